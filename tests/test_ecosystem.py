"""The layers where Keras users put them: dtype policies, masks, graphs and XLA, decoding, shapes."""

import math
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from bounds import FLOAT32_UNIT
from helpers import MaskProbe
from reference import reference_table
from test_keras_harness import HARNESS_WARNINGS, run_harness

from tf_posenc import PositionalEmbedding, PositionalEncoding, RotaryEmbedding


def random_inputs(batch, seq_len, d_model, seed=0):
    return np.random.default_rng(seed).normal(size=(batch, seq_len, d_model)).astype("float32")


@HARNESS_WARNINGS[0]
@HARNESS_WARNINGS[1]
def test_positional_embedding_passes_the_keras_harness():
    tokens = np.array([[1, 4, 2, 0], [3, 3, 0, 0]], dtype="int32")
    layer = PositionalEmbedding(5, 6, 16, embeddings_initializer="ones")
    expected = math.sqrt(6) + reference_table(np.arange(4), 6)
    np.testing.assert_allclose(layer(tokens).numpy(), np.broadcast_to(expected, (2, 4, 6)), rtol=1e-6)
    arguments = {
        "vocab_size": 5,
        "d_model": 6,
        "position": 16,
        "mask_zero": True,
        "embeddings_initializer": "ones",
    }
    run_harness(
        PositionalEmbedding, arguments, tokens, expected=np.broadcast_to(expected, (2, 4, 6)), trainable=1
    )


# 1. Dtype policies


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16", "float64"])
def test_global_dtype_policy_is_followed_and_model_trains(policy):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        tokens = keras.Input((None,), dtype="int32")
        x = PositionalEmbedding(20, 8, 32)(tokens)
        x = PositionalEncoding(32, 8, name="second")(x)
        outputs = keras.layers.Dense(1, dtype="float32")(keras.layers.GlobalAveragePooling1D()(x))
        model = keras.Model(tokens, outputs)
        assert model.get_layer("second").compute_dtype == keras.config.dtype_policy().compute_dtype
        assert x.dtype == keras.config.dtype_policy().compute_dtype
        model.compile(optimizer="adam", loss="mse")
        data = np.random.default_rng(0).integers(0, 20, size=(16, 12))
        history = model.fit(data, np.ones((16, 1)), epochs=2, verbose=0)
        assert np.isfinite(history.history["loss"]).all()
    finally:
        keras.config.set_dtype_policy(previous)


# 2. Masking


def test_mask_reaches_the_next_layer_symbolically_and_eagerly_without_warning():
    tokens = np.array([[3, 5, 0, 0], [1, 0, 0, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inputs = keras.Input((None,), dtype="int32")
        embedded = keras.layers.Embedding(10, 4, mask_zero=True)(inputs)
        model = keras.Model(inputs, MaskProbe()(PositionalEncoding(8, 4)(embedded)))
        np.testing.assert_array_equal(model.predict(tokens, verbose=0), tokens != 0)
        np.testing.assert_array_equal(model(tokens).numpy(), tokens != 0)


def test_positional_embedding_makes_the_mask():
    tokens = np.array([[3, 5, 0, 0], [1, 0, 0, 0]])
    inputs = keras.Input((None,), dtype="int32")
    model = keras.Model(inputs, MaskProbe()(PositionalEmbedding(10, 4, 8, mask_zero=True)(inputs)))
    np.testing.assert_array_equal(model.predict(tokens, verbose=0), tokens != 0)
    unmasked = keras.Model(inputs, MaskProbe()(PositionalEmbedding(10, 4, 8)(inputs)))
    np.testing.assert_array_equal(unmasked.predict(tokens, verbose=0), -np.ones((2, 4)))


# 3. Graph and XLA


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_same_numbers_eager_graph_and_xla_with_one_trace(jit_compile):
    layer = PositionalEncoding(64, 16)
    traces = []

    def call(x):
        traces.append(1)
        return layer(x)

    compiled = tf.function(call, jit_compile=jit_compile, input_signature=[tf.TensorSpec((None, None, 16))])
    for seq_len in (1, 13, 64):
        x = random_inputs(3, seq_len, 16, seed=seq_len)
        eager = layer(x).numpy()
        np.testing.assert_allclose(compiled(x).numpy(), eager, atol=2 * FLOAT32_UNIT)
        np.testing.assert_allclose(
            eager - x,
            np.broadcast_to(reference_table(np.arange(seq_len), 16), x.shape),
            atol=2 * FLOAT32_UNIT,
        )
    assert len(traces) == 1


def test_model_compiled_with_xla_trains():
    tokens = keras.Input((None,), dtype="int32")
    x = PositionalEmbedding(20, 8, 32)(tokens)
    model = keras.Model(tokens, keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(x)))
    model.compile(optimizer="adam", loss="mse", jit_compile=True)
    data = np.random.default_rng(0).integers(0, 20, size=(32, 10))
    before = model.get_weights()[0].copy()
    history = model.fit(data, np.ones((32, 1)), epochs=2, batch_size=8, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert not np.array_equal(before, model.get_weights()[0])


# 4. Incremental decoding


def test_decoding_one_step_at_a_time_equals_the_full_pass():
    layer = PositionalEncoding(32, 8)
    x = random_inputs(2, 10, 8)
    full = layer(x).numpy()
    steps = [layer(x[:, t : t + 1], start_index=t).numpy() for t in range(10)]
    np.testing.assert_array_equal(np.concatenate(steps, axis=1), full)
    step = tf.function(lambda x, t: layer(x, start_index=t))
    traced = [step(x[:, t : t + 1], tf.constant(t)).numpy() for t in range(10)]
    np.testing.assert_array_equal(np.concatenate(traced, axis=1), full)
    # Against the formula too: x + PE, each sum rounded once to float32.
    expected = x + reference_table(np.arange(10), 8)
    assert np.abs(full - expected).max() <= FLOAT32_UNIT * (1 + np.abs(expected).max())


def test_positional_embedding_decodes_step_by_step():
    layer = PositionalEmbedding(10, 8, 16)
    tokens = np.array([[4, 2, 7, 1]])
    full = layer(tokens).numpy()
    steps = [layer(tokens[:, t : t + 1], start_index=t).numpy() for t in range(4)]
    np.testing.assert_array_equal(np.concatenate(steps, axis=1), full)
    table = layer.token_embedding.embeddings.numpy().astype(np.float64)
    expected = table[tokens] * np.sqrt(8) + reference_table(np.arange(4), 8)
    assert np.abs(full - expected).max() <= 2 * FLOAT32_UNIT * (1 + np.abs(expected).max())


@pytest.mark.parametrize("shape", [(3,), (2, 3)], ids=["shared", "per-example"])
def test_positions_pick_rows(shape):
    positions = np.array([5, 0, 31]) if shape == (3,) else np.array([[5, 0, 31], [1, 1, 2]])
    layer = PositionalEncoding(32, 8)
    added = layer(tf.zeros((2, 3, 8)), positions=positions).numpy()
    expected = np.broadcast_to(reference_table(positions, 8), (2, 3, 8))
    np.testing.assert_allclose(added, expected, atol=FLOAT32_UNIT)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"start_index": 30}, ValueError, r"start_index \+ seq_len must be at most position=32"),
        ({"start_index": -1}, ValueError, r"`start_index` must be a non-negative integer"),
        ({"start_index": 1.5}, TypeError, r"`start_index` must hold integers"),
        ({"start_index": tf.constant([1, 2])}, ValueError, r"`start_index` must be a scalar"),
        ({"positions": [0, 1, 32]}, tf.errors.InvalidArgumentError, r"every position must be below"),
        ({"positions": [0, -1, 2]}, tf.errors.InvalidArgumentError, r"must be non-negative"),
        ({"positions": [0.0, 1.5, 2.0]}, tf.errors.InvalidArgumentError, r"must hold whole numbers"),
        ({"positions": ["0", "1", "2"]}, TypeError, r"`positions` must hold integers, or floats"),
        ({"positions": [0, 1]}, ValueError, r"one entry per step of `inputs` \(seq_len=3\)"),
        ({"positions": [[0, 1, 2]] * 2}, ValueError, r"one row per example of `inputs` \(batch=1\)"),
        ({"positions": [1, 2, 3], "start_index": 2}, ValueError, r"either `start_index` or `positions`"),
    ],
    ids=[
        "past-end",
        "negative-start",
        "float-start",
        "vector-start",
        "position-too-big",
        "negative-position",
        "fractional-positions",
        "string-positions",
        "wrong-length",
        "wrong-batch",
        "both",
    ],
)
def test_running_past_position_or_bad_offsets_are_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        PositionalEncoding(32, 8)(tf.zeros((1, 3, 8)), **kwargs)


@pytest.mark.parametrize(
    "layer", [PositionalEncoding(2**20, 8), RotaryEmbedding()], ids=["encoding", "rotary"]
)
def test_every_layer_takes_float_positions_that_hold_whole_numbers(layer):
    # One rule for every layer: tensor2tensor and Model Garden pass positions as floats.
    x = tf.random.normal((2, 4, 8))
    as_integers = layer(x, positions=np.array([0, 7, 4096, 2**20 - 1]))
    as_floats = layer(x, positions=np.array([0.0, 7.0, 4096.0, 2.0**20 - 1], "float32"))
    np.testing.assert_array_equal(as_floats.numpy(), as_integers.numpy())


def test_running_past_position_with_tensor_start_index_fails_in_graph():
    layer = PositionalEncoding(32, 8)
    step = tf.function(lambda x, t: layer(x, start_index=t))
    step(tf.zeros((1, 2, 8)), tf.constant(30))
    with pytest.raises(tf.errors.InvalidArgumentError, match="longer than `position`"):
        step(tf.zeros((1, 2, 8)), tf.constant(31))


# 5. Conventions


def text_tutorial_table(length, depth):
    """The `[sin | cos]` table as the TensorFlow text tutorial's Transformer builds it."""
    half = depth / 2
    positions = np.arange(length)[:, np.newaxis]
    depths = np.arange(half)[np.newaxis, :] / half
    angle_rads = positions * (1 / (10000**depths))
    return np.concatenate([np.sin(angle_rads), np.cos(angle_rads)], axis=-1)


def test_concat_layout_matches_the_text_tutorial_convention():
    layer = PositionalEncoding(2048, 512, layout="concat")
    added = layer(tf.zeros((1, 2048, 512))).numpy()[0]
    np.testing.assert_allclose(added, text_tutorial_table(2048, 512), atol=FLOAT32_UNIT)


def test_max_wavelength_changes_the_frequencies():
    layer = PositionalEncoding(100, 4, max_wavelength=100)
    added = layer(tf.zeros((1, 100, 4))).numpy()[0]
    np.testing.assert_allclose(
        added, reference_table(np.arange(100), 4, max_wavelength=100), atol=FLOAT32_UNIT
    )
    assert layer.get_config()["max_wavelength"] == 100


# 6. PositionalEmbedding


def test_positional_embedding_scales_by_sqrt_d_model_and_trains_only_its_embedding():
    layer = PositionalEmbedding(7, 16, 12)
    tokens = np.array([[1, 2, 3]])
    embedded = layer(tokens).numpy()[0]
    table = layer.token_embedding.embeddings.numpy()
    np.testing.assert_allclose(embedded, table[[1, 2, 3]] * 4 + reference_table(np.arange(3), 16), atol=1e-6)
    assert [w.path for w in layer.trainable_weights] == [layer.token_embedding.embeddings.path]
    assert layer.non_trainable_weights == []


def test_positional_embedding_reloads_from_keras_file(tmp_path):
    tokens = keras.Input((None,), dtype="int32")
    model = keras.Model(tokens, PositionalEmbedding(30, 8, 16, mask_zero=True)(tokens))
    model.save(tmp_path / "embedding.keras")
    reloaded = keras.models.load_model(tmp_path / "embedding.keras")
    data = np.array([[3, 4, 0]])
    np.testing.assert_array_equal(reloaded.predict(data, verbose=0), model.predict(data, verbose=0))
    assert reloaded.layers[1].get_config() == model.layers[1].get_config()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"vocab_size": 0}, "`vocab_size` must be a positive integer"),
        ({"position": "8"}, "`position` must be a positive integer"),
        ({"mask_zero": 1}, "`mask_zero` must be a boolean"),
        ({"layout": "halves"}, "`layout` must be one of"),
    ],
    ids=["vocab", "position", "mask", "layout"],
)
def test_positional_embedding_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PositionalEmbedding(**{"vocab_size": 5, "d_model": 4, "position": 8, **kwargs})


def test_positional_embedding_rejects_embedded_inputs():
    with pytest.raises(ValueError, match=r"`inputs` must have rank 2"):
        PositionalEmbedding(5, 4, 8)(np.zeros((1, 3, 4)))


# 9. Shapes


@pytest.mark.parametrize("shape", [(None, None, 8), (4, None, 8), (None, 16, 8), (2, 5, 8)])
def test_output_shape_and_spec_follow_the_input(shape):
    layer = PositionalEncoding(16, 8)
    assert layer.compute_output_shape(shape) == shape
    spec = layer.compute_output_spec(keras.KerasTensor(shape, dtype="float32"))
    assert spec.shape == shape and spec.dtype == "float32"
    assert PositionalEmbedding(5, 8, 16).compute_output_shape(shape[:2]) == shape
