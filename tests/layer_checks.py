"""The checks Keras's own `run_layer_test` makes, for the layers of tf_posenc."""

import json

import keras
import numpy as np
import tensorflow as tf
from reference import BOUND


def run_layer_checks(
    layer_class, init_kwargs, input_data, expected_output, expected_trainable_weights, supports_masking=True
):
    """Config and serialization round trips, masking, weights, symbolic, eager, fit, dtypes."""
    layer = layer_class(**init_kwargs)
    config = json.loads(json.dumps(layer.get_config()))
    assert layer_class.from_config(config).get_config() == layer.get_config()
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    assert keras.saving.deserialize_keras_object(serialized).get_config() == layer.get_config()

    assert layer.supports_masking == supports_masking

    output = layer(input_data)
    assert len(layer.trainable_weights) == expected_trainable_weights
    assert layer.non_trainable_weights == []
    np.testing.assert_allclose(keras.ops.convert_to_numpy(output), expected_output, atol=2**-22)

    symbolic_input = keras.Input(input_data.shape[1:], dtype=str(input_data.dtype))
    symbolic_output = layer_class(**init_kwargs)(symbolic_input)
    assert symbolic_output.shape == (None,) + tuple(output.shape[1:])
    assert symbolic_output.dtype == output.dtype

    model = keras.Model(symbolic_input, keras.layers.Dense(1)(symbolic_output))
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(input_data, np.zeros(output.shape[:-1] + (1,)), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])

    for policy, bound in BOUND.items():
        typed = layer_class(**init_kwargs, dtype=policy)
        typed_output = typed(input_data)
        assert typed_output.dtype == typed.compute_dtype, policy
        difference = tf.cast(typed_output, tf.float64).numpy() - expected_output
        # Inputs of size ~1 are rounded too; allow one unit for them and one for the encoding.
        assert np.abs(difference).max() <= 4 * bound * max(1, np.abs(expected_output).max()), policy
