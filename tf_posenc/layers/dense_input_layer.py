import keras

from tf_posenc import _validation


class DenseInputMixin:
    """What every tf_posenc layer does around its inputs, in either Keras family.

    Ragged and sparse inputs, and symbolic tensors of the other Keras family, are refused by
    name (Keras would fail on them with a shape error or "unsupported type Operation").
    Automatic casting is off: Keras would round every floating argument to the compute
    dtype, float positions and timesteps included (999.0 is 1000 in bfloat16); the layers
    cast the features they add to or rotate themselves, and nothing else.
    """

    def __init__(self, autocast=False, **kwargs):
        _validation.supported_backend(type(self).__name__, self.keras_family)
        if autocast is not False:
            raise ValueError(
                "`autocast` must be False: tf_posenc layers cast their floating features to the "
                "compute dtype themselves, and never positions or timesteps. "
                f"{_validation.received('autocast', autocast)}"
            )
        super().__init__(autocast=False, **kwargs)

    def __call__(self, inputs, *args, **kwargs):
        _validation.dense_inputs(inputs)
        _validation.same_keras_family(inputs, type(self).__name__, self.keras_family)
        return super().__call__(inputs, *args, **kwargs)

    def _features_in_compute_dtype(self, inputs, what):
        """`inputs`, checked to be floating-point, cast to the compute dtype as Keras would."""
        _validation.floating_inputs(inputs.dtype, what)
        return keras.ops.cast(inputs, self.compute_dtype)


class DenseInputLayer(DenseInputMixin, keras.layers.Layer):
    """The Keras 3 base of tf_posenc's layers."""

    keras_family = keras
