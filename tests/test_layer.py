import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from bounds import FLOAT32_UNIT, ROW_BOUND
from reference import reference_table
from test_keras_harness import HARNESS_WARNINGS, run_harness

from tf_posenc import PositionalEncoding, positional_encoding


def random_inputs(batch, seq_len, d_model, seed=0):
    return np.random.default_rng(seed).normal(size=(batch, seq_len, d_model)).astype("float32")


def test_pos_encoding_is_the_documented_table():
    layer = PositionalEncoding(50, 512)
    table = layer.pos_encoding
    assert table.shape == (1, 50, 512)
    assert np.abs(table.numpy()[0] - reference_table(np.arange(50), 512)).max() <= ROW_BOUND["float32"]
    # Both round the formula once to float32; they may differ by one unit in a rare entry.
    assert np.mean(table.numpy() == positional_encoding(50, 512).numpy()) > 0.999


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
        np.testing.assert_allclose(got, np.broadcast_to(table[:seq_len], x.shape), atol=2 * FLOAT32_UNIT)


def test_functional_model_with_none_sequence_length():
    inputs = keras.Input((None, 8))
    model = keras.Model(inputs, PositionalEncoding(20, 8)(inputs))
    assert model.output_shape == (None, None, 8)
    x = random_inputs(2, 20, 8)
    np.testing.assert_allclose(
        model.predict(x, verbose=0) - x,
        np.broadcast_to(reference_table(np.arange(20), 8), x.shape),
        atol=2 * FLOAT32_UNIT,
    )


def test_layer_has_no_weights_for_a_checkpoint_to_overwrite():
    layer = PositionalEncoding(50, 16)
    layer(random_inputs(1, 4, 16))
    assert layer.weights == []
    assert layer.trainable_weights == [] and layer.non_trainable_weights == []
    assert not layer.variables


def test_get_config_round_trips_through_json():
    layer = PositionalEncoding(64, 12, max_wavelength=500, layout="concat", name="pe", dtype="float64")
    config = json.loads(json.dumps(layer.get_config()))
    assert {
        "position": 64,
        "d_model": 12,
        "max_wavelength": 500,
        "layout": "concat",
        "name": "pe",
    }.items() <= config.items()
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
    with pytest.raises(
        ValueError,
        match=rf"`{argument}` must be a positive integer\. "
        rf"Received: {argument}=",
    ):
        PositionalEncoding(**kwargs)


def test_constructor_refuses_positions_int32_cannot_hold():
    with pytest.raises(
        ValueError,
        match=r"`position` must be at most 2147483647\. "
        r"Received: position=2147483648 \(of type int\)",
    ):
        PositionalEncoding(2**31, 4)


@pytest.mark.parametrize(
    "shape, message",
    [
        ((2, 5, 7), r"last dimension of `inputs` must equal `d_model`.*d_model=4"),
        ((5, 4), r"`inputs` must have rank 3 or more"),
        ((2, 11, 4), r"longer than `position`.*position=10.*seq_len=11"),
        ((2, 3, 11, 4), r"longer than `position`.*position=10.*seq_len=11"),
    ],
    ids=["width", "rank2", "too-long", "too-long-rank4"],
)
def test_bad_input_shapes_fail_eagerly_symbolically_and_in_the_output_shape(shape, message):
    # Built at construction (it has no weights), the layer checks its inputs where it sees them.
    assert PositionalEncoding(10, 4).built
    with pytest.raises(ValueError, match=message):
        PositionalEncoding(10, 4)(np.zeros(shape, "float32"))
    with pytest.raises(ValueError, match=message):
        PositionalEncoding(10, 4)(keras.Input(shape[1:], batch_size=shape[0]))
    with pytest.raises(ValueError, match=message):
        PositionalEncoding(10, 4).compute_output_shape(shape)


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
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"The sequence is longer than `position`.*position=10"
    ):
        serve(tf.zeros((1, 11, 4)))


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_empty_sequence_with_dynamic_length(jit_compile):
    layer = PositionalEncoding(8, 4)
    serve = tf.function(
        layer, jit_compile=jit_compile, input_signature=[tf.TensorSpec((None, None, 4), tf.float32)]
    )
    assert serve(tf.zeros((2, 0, 4))).shape == (2, 0, 4)
    assert layer(np.zeros((2, 0, 4), "float32")).shape == (2, 0, 4)


def test_encoding_rows_are_the_table_slice():
    layer = PositionalEncoding(300, 16)
    np.testing.assert_array_equal(
        layer.encoding_rows(100, 250).numpy(), layer.pos_encoding.numpy()[:, 100:250]
    )
    assert layer.encoding_rows(7, 7).shape == (1, 0, 16)
    for start, stop in ((5, 4), (0, 301), (-1, 3)):
        with pytest.raises(ValueError, match=r"`(encoding_rows|start)`"):
            layer.encoding_rows(start, stop)


def test_a_long_table_points_to_encoding_rows():
    layer = PositionalEncoding(2**24, 1024)
    with pytest.raises(
        ValueError,
        match=r"position \* d_model = 17179869184 values, more than "
        r"4194304; use `encoding_rows\(start, stop\)`",
    ):
        _ = layer.pos_encoding
    last = layer.encoding_rows(2**24 - 3, 2**24).numpy()[0]
    assert np.abs(last - reference_table(np.arange(2**24 - 3, 2**24), 1024)).max() <= FLOAT32_UNIT


# keras-hub's tests of SinePositionEncoding, carried over: the same shapes, with the encoding
# added to zeros wherever values are checked.


@pytest.mark.parametrize("shape", [(2, 4, 6), (1, 2, 4, 6)], ids=["3d", "4d"])
@HARNESS_WARNINGS[0]
@HARNESS_WARNINGS[1]
def test_keras_hub_shapes_pass_the_keras_harness(shape):
    x = np.random.default_rng(0).uniform(size=shape).astype("float32")
    run_harness(
        PositionalEncoding, {"position": 16, "d_model": 6}, x, expected=x + reference_table(np.arange(4), 6)
    )


@pytest.mark.parametrize(
    "shape, expected",
    [((100, 32), (None, 100, 32)), ((None, 32), (None, None, 32)), ((None, 100, 32), (None, None, 100, 32))],
    ids=["static", "dynamic", "extra-axis-before-sequence"],
)
def test_keras_hub_symbolic_shapes(shape, expected):
    assert PositionalEncoding(128, 32)(keras.Input(shape)).shape == expected


def test_keras_hub_values_at_positions_0_and_3():
    model = keras.Sequential([keras.Input((4, 6)), PositionalEncoding(4, 6)])
    added = model(np.zeros((1, 4, 6), "float32")).numpy()
    np.testing.assert_allclose(added[0, 0], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0], atol=1e-7)
    # keras-hub checks these to two digits; they are the formula's values to float32.
    np.testing.assert_allclose(
        added[0, 3], [0.14112, -0.98999, 0.13879, 0.99032, 0.00646, 0.99997], atol=1e-5
    )
    assert np.abs(added[0] - reference_table(np.arange(4), 6)).max() <= ROW_BOUND["float32"]


def test_keras_hub_start_index_step_by_step_on_4d_inputs():
    layer = PositionalEncoding(8, 4)
    data = np.random.default_rng(1).uniform(size=(2, 5, 3, 4)).astype("float32")
    full = layer(data).numpy()
    steps = [layer(data[:, :, i : i + 1], start_index=i).numpy() for i in range(3)]
    np.testing.assert_array_equal(np.concatenate(steps, axis=2), full)
    picked = layer(data, positions=np.array([[2, 0, 1], [7, 6, 5]])).numpy()
    expected = data + reference_table(np.array([[2, 0, 1], [7, 6, 5]]), 4)[:, None]
    np.testing.assert_allclose(picked, expected, atol=FLOAT32_UNIT)
