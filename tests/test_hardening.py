"""Every wrong input caught where it enters, and served models that stay correct under load and faults."""

import json
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf
from bounds import FLOAT32_UNIT
from helpers import MaskProbe
from reference import reference_table

import tf_posenc
from tf_posenc import PositionalEmbedding, PositionalEncoding, RotaryEmbedding

# Symbolic checks: wrong inputs fail while the model is built, not when it first runs.


@pytest.mark.parametrize(
    "layer, shape",
    [(PositionalEncoding(16, 8), (None, 8)), (RotaryEmbedding(), (None, 2, 8))],
    ids=["encoding", "rotary"],
)
def test_integer_inputs_fail_when_the_model_is_built(layer, shape):
    with pytest.raises(TypeError, match=r"`inputs` must be a floating-point tensor.*inputs\.dtype=int32"):
        layer(keras.Input(shape, dtype="int32"))


def test_float_token_ids_fail_eagerly_and_symbolically():
    layer = PositionalEmbedding(10, 4, 8)
    with pytest.raises(TypeError, match=r"`inputs` must hold integer token ids.*float32"):
        layer(keras.Input((None,), dtype="float32"))
    with pytest.raises(TypeError, match=r"`inputs` must hold integer token ids"):
        layer(np.array([[1.0, 2.0]], "float32"))


def test_a_width_only_known_when_the_graph_runs_is_checked_there():
    layer = PositionalEncoding(16, 8)
    serve = tf.function(layer, input_signature=[tf.TensorSpec((None, None, None))])
    assert serve(tf.zeros((1, 3, 8))).shape == (1, 3, 8)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"last dimension of `inputs` must equal d_model=8"
    ):
        serve(tf.zeros((1, 3, 1)))


@pytest.mark.parametrize("layer", [PositionalEncoding(16, 8), RotaryEmbedding()], ids=["encoding", "rotary"])
def test_ragged_inputs_are_refused_by_name(layer):
    ragged = tf.ragged.constant([[[1.0] * 8] * 3, [[1.0] * 8] * 2], ragged_rank=1)
    with pytest.raises(TypeError, match=r"must be a dense tensor: ragged and sparse tensors"):
        layer(ragged)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_float_positions_and_timesteps_are_never_rounded_to_the_compute_dtype(policy):
    # Keras's automatic casting would make timestep 999.0 1000 in bfloat16, and 2**20 inf
    # in float16.
    timesteps = tf_posenc.TimestepEmbedding(16, dtype=policy)
    assert np.array_equal(timesteps(np.array([999.0, 4097.0])), timesteps(np.array([999, 4097])))
    rotary = RotaryEmbedding(dtype=policy)
    queries = np.ones((1, 3, 8), "float32")
    by_floats = rotary(queries, positions=np.array([999.0, 4097.0, 2.0**20]))
    by_integers = rotary(queries, positions=np.array([999, 4097, 2**20]))
    assert by_floats.dtype == policy.split("_")[1]
    assert np.array_equal(by_floats, by_integers)


def test_automatic_casting_cannot_be_turned_on():
    with pytest.raises(ValueError, match=r"`autocast` must be False.*Received: autocast=True"):
        PositionalEncoding(8, 4, autocast=True)


@pytest.mark.parametrize(
    "value, stored",
    [(np.int64(500), 500), (np.float32(512.5), 512.5), (np.float64(1e4), 1e4)],
    ids=["int64", "float32", "float64"],
)
def test_numpy_wavelengths_are_stored_as_python_numbers(value, stored):
    for layer in (
        PositionalEncoding(8, 4, max_wavelength=value),
        PositionalEmbedding(5, 4, 8, max_wavelength=value),
        RotaryEmbedding(max_wavelength=value),
    ):
        config = json.loads(json.dumps(layer.get_config()))
        assert config["max_wavelength"] == stored and type(layer.max_wavelength) in (int, float)


@pytest.mark.parametrize(
    "value", [float("inf"), float("nan"), 1, 0.5, "10000"], ids=["inf", "nan", "one", "half", "str"]
)
def test_every_layer_refuses_a_bad_wavelength(value):
    for make in (
        lambda: PositionalEncoding(8, 4, max_wavelength=value),
        lambda: PositionalEmbedding(5, 4, 8, max_wavelength=value),
        lambda: RotaryEmbedding(max_wavelength=value),
    ):
        with pytest.raises(ValueError, match=r"`max_wavelength` must be a finite number greater than 1"):
            make()


def test_start_index_limits_are_named_when_known():
    layer = PositionalEncoding(32, 8)
    dynamic = tf.function(lambda x, t: layer(x, start_index=t))
    with pytest.raises(ValueError, match=r"longer than `position`.*start_index=33"):
        tf.function(
            lambda x: layer(x, start_index=33), input_signature=[tf.TensorSpec((None, None, 8))]
        ).get_concrete_function()
    with pytest.raises(ValueError, match=r"longer than `position`.*start_index=18446744073709551616"):
        tf.function(
            lambda x: layer(x, start_index=2**64), input_signature=[tf.TensorSpec((None, None, 8))]
        ).get_concrete_function()
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`start_index` must be at most 32"):
        dynamic(tf.zeros((1, 1, 8)), tf.constant(2**63 + 5, tf.uint64))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`start_index` must be non-negative"):
        dynamic(tf.zeros((1, 1, 8)), tf.constant(-1, tf.int64))
    # An int32 start with a length the graph knows (a decoding step) is checked in int32.
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`start_index` must be non-negative"):
        dynamic(tf.zeros((1, 3, 8)), tf.constant(-1))
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"longer than `position`: start_index \+ seq_len"
    ):
        dynamic(tf.zeros((1, 3, 8)), tf.constant(30))
    assert dynamic(tf.zeros((1, 3, 8)), tf.constant(29)).shape == (1, 3, 8)
    # start_index + seq_len would wrap around in int32: the check must still fail.
    rotary = RotaryEmbedding()
    rope = tf.function(lambda x, t: rotary(x, start_index=t))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"runs past the largest position"):
        rope(tf.zeros((1, 2, 8)), tf.constant(2**31 - 2))
    assert rope(tf.zeros((1, 2, 8)), tf.constant(2**31 - 3)).shape == (1, 2, 8)


def test_positional_embedding_names_its_own_arguments():
    with pytest.raises(ValueError, match=r"`position` must be at most 2147483647"):
        PositionalEmbedding(5, 4, 2**31)
    with pytest.raises(ValueError, match=r"`layout='concat'` needs an even `d_model`"):
        PositionalEmbedding(5, 3, 8, layout="concat")
    with pytest.raises(ValueError, match=r"`inputs` must have rank 2"):
        PositionalEmbedding(5, 4, 8).compute_output_shape((2, 3, 4))


def test_positional_embedding_takes_positions():
    layer = PositionalEmbedding(10, 4, 16, embeddings_initializer="zeros")
    positions = np.array([[5, 0, 9], [1, 2, 3]])
    added = layer(np.ones((2, 3), "int32"), positions=positions).numpy()
    assert np.abs(added - reference_table(positions, 4)).max() <= FLOAT32_UNIT


class MaskTokens(keras.layers.Layer):
    """Passes token ids on, masking the id 9 (as an upstream layer with its own mask would)."""

    def compute_mask(self, inputs, mask=None):
        return inputs != 9

    def call(self, inputs):
        return inputs


def test_positional_embedding_merges_an_incoming_mask():
    tokens = np.array([[3, 9, 0, 4], [9, 0, 0, 1]])
    inputs = keras.Input((None,), dtype="int32")
    masked = MaskTokens()(inputs)
    merged = keras.Model(inputs, MaskProbe()(PositionalEmbedding(10, 4, 8, mask_zero=True)(masked)))
    np.testing.assert_array_equal(merged.predict(tokens, verbose=0), (tokens != 9) & (tokens != 0))
    passed = keras.Model(inputs, MaskProbe()(PositionalEmbedding(10, 4, 8)(masked)))
    np.testing.assert_array_equal(passed.predict(tokens, verbose=0), tokens != 9)


# Served models under load and faults.


def in_sixteen_threads(worker):
    """Runs `worker(seed)` for seeds 0..15 in threads at once, and waits for all."""
    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


class Served(tf.Module):
    """An export with an explicit `start_index`, as a decoding server would expose it."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    @tf.function(input_signature=[tf.TensorSpec((None, None, 16)), tf.TensorSpec((), tf.int32)])
    def serve(self, x, start):
        return self.layer(x, start_index=start)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("served") / "exported")
    tf.saved_model.save(Served(PositionalEncoding(64, 16)), folder)
    return tf.saved_model.load(folder)


def expected_rows(start, seq_len):
    return reference_table(np.arange(start, start + seq_len), 16)


@pytest.mark.slow
def test_sixteen_threads_get_the_single_threaded_answers(served):
    requests = [
        (int(length), int(start)) for length, start in np.random.default_rng(0).integers(1, 32, size=(200, 2))
    ]
    single = {
        request: served.serve(tf.zeros((1, request[0], 16)), request[1]).numpy() for request in set(requests)
    }
    for (length, start), answer in single.items():
        assert np.abs(answer[0] - expected_rows(start, length)).max() <= FLOAT32_UNIT
    failures = []

    def worker(seed):
        order = np.random.default_rng(seed).permutation(len(requests))
        for index in order:
            length, start = requests[index]
            answer = served.serve(tf.zeros((1, length, 16)), start).numpy()
            if not np.array_equal(answer, single[(length, start)]):
                failures.append((seed, length, start))

    in_sixteen_threads(worker)
    assert failures == []


@pytest.mark.slow
def test_keras_predict_from_sixteen_threads_is_the_single_threaded_answer(tmp_path):
    tokens = keras.Input((None,), dtype="int32")
    model = keras.Model(tokens, PositionalEmbedding(20, 8, 64)(tokens))
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    batches = [np.random.default_rng(seed).integers(0, 20, size=(2, 1 + seed % 30)) for seed in range(40)]
    single = [reloaded(batch).numpy() for batch in batches]
    failures = []

    def worker(seed):
        for index in np.random.default_rng(seed).permutation(len(batches)):
            if not np.array_equal(reloaded(batches[index]).numpy(), single[index]):
                failures.append(index)

    in_sixteen_threads(worker)
    assert failures == []


@pytest.mark.parametrize(
    "request_args, error, message",
    [
        ((np.zeros((1, 10, 16), "float32"), 60), tf.errors.InvalidArgumentError, r"longer than `position`"),
        (
            (np.zeros((1, 2, 16), "float32"), -3),
            tf.errors.InvalidArgumentError,
            r"`start_index` must be non-negative",
        ),
        ((np.zeros((1, 2, 16), "int32"), 0), (TypeError, ValueError), r"int32|float32"),
        ((np.zeros((1, 2, 17), "float32"), 0), (TypeError, ValueError), r"17|16"),
    ],
    ids=["too-long", "negative-offset", "wrong-dtype", "wrong-width"],
)
def test_a_bad_request_gets_a_named_error_and_the_next_is_served(served, request_args, error, message):
    x, start = request_args
    with pytest.raises(error, match=message):
        served.serve(tf.constant(x), tf.constant(start))
    rows = served.serve(tf.zeros((1, 5, 16)), tf.constant(7)).numpy()[0]
    assert np.abs(rows - expected_rows(7, 5)).max() <= FLOAT32_UNIT


def test_every_public_name_has_a_runnable_example():
    # --doctest-modules runs them; here, that none is missing.
    missing = [
        name
        for name in tf_posenc.__all__
        if name != "__version__" and ">>>" not in (getattr(tf_posenc, name).__doc__ or "")
    ]
    assert missing == []


def test_the_transformers_wing_names_the_top_level_objects():
    from tf_posenc import hf

    assert sorted(hf._HOMES) == sorted(hf.__all__)  # each imported where it lives, on first use
    assert hf.__all__ and all(getattr(hf, name) is getattr(tf_posenc, name) for name in hf.__all__)
    assert all(hasattr(getattr(hf, name), "from_hf_config") for name in hf.__all__ if name[0].isupper())
