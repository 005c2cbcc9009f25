import keras

from tf_posenc import _validation


class DenseInputLayer(keras.layers.Layer):
    """The base of tf_posenc's layers: refuses ragged and sparse inputs by name, before Keras
    tries to convert them and fails with a shape error of its own."""

    def __call__(self, inputs, *args, **kwargs):
        _validation.dense_inputs(inputs)
        return super().__call__(inputs, *args, **kwargs)
