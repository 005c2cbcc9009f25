import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from reference import reference_table

from tf_posenc import PositionalEncoding, positional_encoding


def random_inputs(batch, seq_len, d_model, seed=0):
    return np.random.default_rng(seed).normal(size=(batch, seq_len, d_model)).astype("float32")


def test_pos_encoding_is_the_documented_table():
    layer = PositionalEncoding(50, 512)
    table = layer.pos_encoding
    assert table.shape == (1, 50, 512)
    np.testing.assert_array_equal(table.numpy(), positional_encoding(50, 512).numpy())


@pytest.mark.parametrize("seq_len", [1, 17, 50], ids=lambda n: f"len{n}")
def test_call_adds_the_table_slice(seq_len):
    layer = PositionalEncoding(50, 16)
    x = random_inputs(3, seq_len, 16)
    expected = x + layer.pos_encoding.numpy()[:, :seq_len, :]
    np.testing.assert_array_equal(layer(x).numpy(), expected)


def test_call_with_dynamic_sequence_length_in_tf_function():
    layer = PositionalEncoding(50, 16)
    serve = tf.function(layer, input_signature=[tf.TensorSpec((None, None, 16), tf.float32)])
    table = reference_table(np.arange(50), 16)
    for seq_len in (1, 9, 50):
        x = random_inputs(2, seq_len, 16)
        got = serve(x).numpy() - x
        np.testing.assert_allclose(got, np.broadcast_to(table[:seq_len], x.shape), atol=2**-22)
    assert len(serve.get_concrete_function().graph.get_operations()) > 0


def test_functional_model_with_none_sequence_length():
    inputs = keras.Input((None, 8))
    model = keras.Model(inputs, PositionalEncoding(20, 8)(inputs))
    assert model.output_shape == (None, None, 8)
    x = random_inputs(2, 20, 8)
    np.testing.assert_allclose(model.predict(x, verbose=0) - x,
                               np.broadcast_to(reference_table(np.arange(20), 8), x.shape),
                               atol=2**-22)


def test_layer_has_no_weights_for_a_checkpoint_to_overwrite():
    layer = PositionalEncoding(50, 16)
    layer(random_inputs(1, 4, 16))
    assert layer.weights == []
    assert layer.trainable_weights == [] and layer.non_trainable_weights == []
    assert not layer.variables


def test_get_config_round_trips_through_json():
    layer = PositionalEncoding(64, 12, max_wavelength=500, layout="concat", name="pe",
                               dtype="float64")
    config = json.loads(json.dumps(layer.get_config()))
    assert {"position": 64, "d_model": 12, "max_wavelength": 500, "layout": "concat",
            "name": "pe"}.items() <= config.items()
    clone = PositionalEncoding.from_config(config)
    assert clone.get_config() == layer.get_config()
    x = random_inputs(2, 10, 12).astype("float64")
    np.testing.assert_array_equal(clone(x).numpy(), layer(x).numpy())


def test_keras_serialize_round_trip_uses_registered_name():
    layer = PositionalEncoding(10, 4)
    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"] == "tf_posenc>PositionalEncoding"
    restored = keras.saving.deserialize_keras_object(json.loads(json.dumps(serialized)))
    assert isinstance(restored, PositionalEncoding)
    assert restored.get_config() == layer.get_config()


BAD_SIZES = [0, -1, 50.5, "50", None, True]
BAD_IDS = ["zero", "negative", "float", "str", "none", "bool"]


@pytest.mark.parametrize("value", BAD_SIZES, ids=BAD_IDS)
@pytest.mark.parametrize("argument", ["position", "d_model"])
def test_constructor_rejects_bad_sizes(argument, value):
    kwargs = {"position": 10, "d_model": 4, argument: value}
    with pytest.raises(ValueError, match=rf"`{argument}` must be a positive integer\. "
                                         rf"Received: {argument}="):
        PositionalEncoding(**kwargs)


def test_constructor_refuses_positions_float64_cannot_count():
    with pytest.raises(ValueError, match=r"`position` must be at most 9007199254740992"):
        PositionalEncoding(2**53 + 1, 4)


@pytest.mark.parametrize(
    "shape, message",
    [((2, 5, 7), r"last dimension of `inputs` must equal `d_model`.*d_model=4"),
     ((5, 4), r"`inputs` must have rank 3"),
     ((2, 2, 5, 4), r"`inputs` must have rank 3"),
     ((2, 11, 4), r"longer than `position`.*position=10.*seq_len=11")],
    ids=["width", "rank2", "rank4", "too-long"],
)
def test_bad_input_shapes_fail_at_build_eagerly_and_symbolically(shape, message):
    with pytest.raises(ValueError, match=message):
        PositionalEncoding(10, 4)(np.zeros(shape, "float32"))
    with pytest.raises(ValueError, match=message):
        PositionalEncoding(10, 4)(keras.Input(shape[1:], batch_size=shape[0]))
    with pytest.raises(ValueError, match=message):
        PositionalEncoding(10, 4).build(shape)


def test_bad_shape_after_build_still_gets_a_clear_error():
    layer = PositionalEncoding(10, 4)
    layer(np.zeros((1, 3, 4), "float32"))
    with pytest.raises(ValueError, match=r"must equal `d_model`"):
        layer(np.zeros((1, 3, 5), "float32"))


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_integer_inputs_are_rejected(dtype):
    with pytest.raises(TypeError, match=rf"`inputs` must be a floating-point tensor.*{dtype}"):
        PositionalEncoding(10, 4)(tf.zeros((1, 3, 4), dtype))


def test_too_long_dynamic_sequence_fails_with_a_clear_message_in_tf_function():
    layer = PositionalEncoding(10, 4)
    serve = tf.function(layer, input_signature=[tf.TensorSpec((None, None, 4), tf.float32)])
    serve(tf.zeros((1, 10, 4)))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"The sequence is longer than `position`.*position=10"):
        serve(tf.zeros((1, 11, 4)))


def test_masks_pass_through_unchanged():
    tokens = np.array([[3, 5, 0, 0], [1, 0, 0, 0]])
    embedding = keras.layers.Embedding(10, 4, mask_zero=True)
    layer = PositionalEncoding(8, 4)
    embedded = embedding(tokens)
    mask = embedding.compute_mask(tokens)
    assert layer.supports_masking
    np.testing.assert_array_equal(layer.compute_mask(embedded, mask).numpy(), tokens != 0)
    inputs = keras.Input((None,), dtype="int32")
    outputs = PositionalEncoding(8, 4)(keras.layers.Embedding(10, 4, mask_zero=True)(inputs))
    np.testing.assert_array_equal(outputs._keras_mask.shape, (None, None))


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_empty_sequence_with_dynamic_length(jit_compile):
    layer = PositionalEncoding(8, 4)
    serve = tf.function(layer, jit_compile=jit_compile,
                        input_signature=[tf.TensorSpec((None, None, 4), tf.float32)])
    assert serve(tf.zeros((2, 0, 4))).shape == (2, 0, 4)
    assert layer(np.zeros((2, 0, 4), "float32")).shape == (2, 0, 4)
