"""Exactness at every position up to 2**20 in every dtype, and costs that do not grow with `position`."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from bounds import BOUND, FLOAT32_UNIT, POLICY_OF_DTYPE, ROW_BOUND
from helpers import run_python
from reference import exact_reference_table, reference_table

from tf_posenc import PositionalEncoding, positional_encoding
from tf_posenc._rows import row_error_bound

TESTS = os.path.dirname(os.path.abspath(__file__))
ALL_POSITIONS = 2**20
COMPUTE_DTYPE = {
    "float32": "float32",
    "mixed_float16": "float16",
    "mixed_bfloat16": "bfloat16",
    "float64": "float64",
}


@pytest.fixture(scope="module")
def reference_all_positions():
    return reference_table(np.arange(ALL_POSITIONS), 8)


def encoding_added_by(layer, seq_len, d_model, dynamic):
    zeros = tf.zeros((1, seq_len, d_model), layer.compute_dtype)
    if dynamic:
        spec = tf.TensorSpec((None, None, d_model), layer.compute_dtype)
        call = tf.function(layer, input_signature=[spec])
    else:
        call = layer
    added = call(zeros)
    assert added.dtype == layer.compute_dtype
    return tf.cast(added, tf.float64).numpy()[0]


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static-shape", "none-shape"])
def test_layer_is_exact_at_every_position_below_2_20(policy, dynamic, reference_all_positions):
    layer = PositionalEncoding(ALL_POSITIONS, 8, dtype=policy)
    added = encoding_added_by(layer, ALL_POSITIONS, 8, dynamic)
    error = np.abs(added - reference_all_positions)
    assert error.max() <= ROW_BOUND[policy]
    # Rounded once from float64: the nearest representable value almost everywhere.
    nearest = tf.cast(tf.constant(reference_all_positions), COMPUTE_DTYPE[policy])
    agreement = np.mean(added == tf.cast(nearest, tf.float64).numpy())
    assert agreement > 0.999


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_positional_encoding_is_exact_at_every_position_below_2_20(dtype, reference_all_positions):
    table = positional_encoding(ALL_POSITIONS, 8, dtype=dtype)
    assert table.dtype == dtype
    error = np.abs(tf.cast(table, tf.float64).numpy()[0] - reference_all_positions)
    assert error.max() <= ROW_BOUND[POLICY_OF_DTYPE[dtype]]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_the_documented_row_bound_is_within_the_tests_row_bound(dtype):
    # The code's claim is checked by the tests' numbers, not the tests' numbers taken from it.
    assert row_error_bound(dtype) <= ROW_BOUND[POLICY_OF_DTYPE[dtype]]


@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16", "float64"])
def test_pos_encoding_is_exact_in_the_compute_dtype(policy):
    layer = PositionalEncoding(4096, 64, dtype=policy)
    table = layer.pos_encoding
    assert table.dtype == COMPUTE_DTYPE[policy]
    error = np.abs(tf.cast(table, tf.float64).numpy()[0] - reference_table(np.arange(4096), 64))
    assert error.max() <= ROW_BOUND[policy]


@pytest.mark.parametrize("d_model", [6, 64, 513, 1024], ids=lambda d: f"d{d}")
def test_wide_encodings_are_exact_at_scattered_large_positions(d_model):
    positions = np.random.default_rng(d_model).integers(0, ALL_POSITIONS, size=300)
    layer = PositionalEncoding(ALL_POSITIONS, d_model)
    added = layer(tf.zeros((1, 300, d_model)), positions=positions).numpy()[0]
    assert np.abs(added - reference_table(positions, d_model)).max() <= ROW_BOUND["float32"]


def test_positions_never_pass_through_16_bit_floats():
    # Position 2049 is not a float16 number (it would round to 2048), nor 257 a bfloat16 one.
    for policy, position in (("mixed_float16", 2049), ("mixed_bfloat16", 257)):
        layer = PositionalEncoding(4096, 4, dtype=policy)
        added = tf.cast(
            layer(tf.zeros((1, 1, 4), COMPUTE_DTYPE[policy]), start_index=position), tf.float64
        ).numpy()[0, 0]
        assert np.abs(added - reference_table([position], 4)[0]).max() <= ROW_BOUND[policy]
        # The neighbour's row is further away than that: the position was not rounded.
        assert np.abs(added - reference_table([position - 1], 4)[0]).max() > BOUND[policy]


MEMORY_PROBE = """
import json, sys, time
sys.path.insert(0, {benchmarks!r})
import numpy as np, tensorflow as tf, tf_posenc
from peak_memory import extra_peak_mib, start_peak_measurement

warm = tf_posenc.PositionalEncoding(16, 1024)
warm(tf.zeros((2, 8, 1024)))
tf.function(warm, input_signature=[tf.TensorSpec((None, None, 1024))])(tf.zeros((2, 8, 1024)))
x = tf.zeros((2, 128, 1024))
before = start_peak_measurement()
started = time.perf_counter()
layer = tf_posenc.PositionalEncoding(2**20, 1024)
eager = layer(x, start_index=2**20 - 128)
serve = tf.function(layer, input_signature=[tf.TensorSpec((None, None, 1024))])
traced = serve(x)
shifted = tf.function(lambda x, t: layer(x, start_index=t))(x, tf.constant(2**20 - 128))
seconds = time.perf_counter() - started
huge = tf_posenc.PositionalEncoding.from_config({{"position": 2**31 - 1, "d_model": 64}})
far = huge(tf.zeros((1, 16, 64)), start_index=2**31 - 17)
print(json.dumps({{
    "extra_mib": extra_peak_mib(before),
    "seconds": seconds,
    "eager": eager.numpy()[0].tolist(),
    "traced": traced.numpy()[0, :4].tolist(),
    "shifted": shifted.numpy()[0].tolist(),
    "far": far.numpy()[0].tolist(),
}}))
"""


@pytest.mark.slow
def test_a_million_positions_cost_no_table(tmp_path):
    probe = MEMORY_PROBE.format(benchmarks=os.path.join(os.path.dirname(TESTS), "benchmarks"))
    result = json.loads(run_python(probe, tmp_path).strip().splitlines()[-1])
    assert result["extra_mib"] < 100, result["extra_mib"]
    last_rows = reference_table(np.arange(2**20 - 128, 2**20), 1024)
    assert np.abs(np.array(result["eager"]) - last_rows).max() <= FLOAT32_UNIT
    assert np.abs(np.array(result["shifted"]) - last_rows).max() <= FLOAT32_UNIT
    assert np.abs(np.array(result["traced"]) - reference_table(np.arange(4), 1024)).max() <= FLOAT32_UNIT
    # Near 2**31 the float64 product pos / 10000**(2i/d) is itself off by ~2**-22; the
    # exact reference reduces each angle in 60-digit decimals.
    far_rows = exact_reference_table(np.arange(2**31 - 17, 2**31 - 1), 64)
    assert np.abs(np.array(result["far"]) - far_rows).max() <= FLOAT32_UNIT


ARTIFACT_PROBE = """
import sys
sys.modules["tf_posenc"] = None
sys.path.insert(0, {tests!r})
import json, numpy as np, tensorflow as tf
from reference import exact_reference_table, reference_table
served = tf.saved_model.load("exported")
errors = {{}}
for seq_len in (1, 4097, 65536):
    added = served.serve(tf.zeros((1, seq_len, 1024))).numpy()[0, -4097:]
    expected = reference_table(np.arange(max(0, seq_len - 4097), seq_len), 1024)
    errors[seq_len] = float(np.abs(added - expected).max())
print(json.dumps(errors))
"""


@pytest.mark.slow
def test_large_position_models_save_and_export_small_and_exact(tmp_path):
    inputs = keras.Input((None, 1024))
    model = keras.Model(inputs, PositionalEncoding(2**24, 1024)(inputs))
    model.save(tmp_path / "model.keras")
    model.export(str(tmp_path / "exported"), verbose=False)
    export_bytes = sum(p.stat().st_size for p in (tmp_path / "exported").rglob("*") if p.is_file())
    assert os.path.getsize(tmp_path / "model.keras") <= 2**20
    assert export_bytes <= 2**20
    errors = json.loads(run_python(ARTIFACT_PROBE.format(tests=TESTS), tmp_path).splitlines()[-1])
    assert set(errors) == {"1", "4097", "65536"}
    assert max(errors.values()) <= FLOAT32_UNIT
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    added = reloaded(tf.zeros((1, 3000, 1024))).numpy()[0]
    assert np.abs(added - reference_table(np.arange(3000), 1024)).max() <= FLOAT32_UNIT


@pytest.mark.parametrize("start_index", [0, 5, 31], ids=lambda s: f"start{s}")
def test_call_equals_input_plus_table_slice(start_index):
    layer = PositionalEncoding(64, 32)
    x = np.random.default_rng(start_index).normal(size=(2, 33, 32)).astype("float32")
    table = layer.pos_encoding.numpy()
    expected = x + table[:, start_index : start_index + 33, :]
    np.testing.assert_array_equal(layer(x, start_index=start_index).numpy(), expected)
    traced = tf.function(lambda x, s: layer(x, start_index=s))(x, tf.constant(start_index))
    np.testing.assert_allclose(traced.numpy(), expected, atol=2 * FLOAT32_UNIT)
