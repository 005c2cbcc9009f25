"""RotaryEmbedding: the documents' rotation T(k) applied to queries and keys, exact at long context."""

import json
import pathlib

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf
from bounds import FLOAT32_UNIT, ROW_BOUND
from helpers import MaskProbe, as_float64, rounding_floor, run_python
from reference import keras_hub_yarn_frequencies, reference_rotation, rope_frequencies
from test_keras_harness import HARNESS_WARNINGS, run_harness
from test_runtimes import to_onnx, to_onnx_with_positions, to_tflite, to_tflite_with_positions

from tf_posenc import RotaryEmbedding, positions_from_mask, shift_matrix

COMPUTE_DTYPE = {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


@pytest.mark.parametrize("start", [0, 4096, 65536, 2**20 - 64], ids=lambda s: f"start{s}")
@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("layout", ["half", "interleave"])
def test_rotation_is_exact_at_every_start(layout, policy, start):
    x = np.random.default_rng(start).normal(size=(2, 64, 2, 128)).astype("float32")
    x = as_float64(tf.cast(x, COMPUTE_DTYPE[policy]))  # inputs the layer can hold exactly
    layer = RotaryEmbedding(layout=layout, dtype=policy)
    rotated = layer(tf.constant(x, COMPUTE_DTYPE[policy]), start_index=start)
    assert rotated.dtype == COMPUTE_DTYPE[policy]
    exact = reference_rotation(x, np.arange(start, start + 64)[None], rope_frequencies(128), layout)
    floor = rounding_floor(exact, COMPUTE_DTYPE[policy])
    factor = 4 if policy == "float32" else 2
    assert np.abs(as_float64(rotated) - exact).max() <= factor * floor


# transformers 5.24's `LlamaRotaryEmbedding(LlamaConfig(head_dim=64, rope_theta=500000.0))`, cos at
# positions 131071 and 2**20 - 1, features 0, 1, 5, 13 (torch 2.13): after `.to(torch.float64)`
# (what `model.to(torch.float64)` does to it), and with `forward` replaced by one computing
# `inv_freq` and `position_ids * inv_freq` in float64.
TRANSFORMERS_FLOAT64_MODULE_COS = [
    [-0.8179835081100464, 0.7326388955116272, -0.9996256232261658, 0.9571168422698975],
    [0.7880422472953796, -0.37252891063690186, 0.7729345560073853, -0.679321825504303],
]
TRANSFORMERS_FLOAT64_ROTATION_COS = [
    [-0.8179834993879491, 0.7360236311534571, -0.9996014489998353, 0.9571153456487187],
    [0.7880422395289275, -0.39072162863742815, 0.7807443481314105, -0.6792162859615662],
]


def test_transformers_in_float64_needs_its_rotation_in_float64():
    positions, features = np.array([131071, 2**20 - 1]), [0, 1, 5, 13]
    exact = np.cos(positions[:, None] * rope_frequencies(64, 500000.0)[None, features])  # float64
    np.testing.assert_allclose(TRANSFORMERS_FLOAT64_ROTATION_COS, exact, rtol=0, atol=1e-12)
    assert np.abs(np.array(TRANSFORMERS_FLOAT64_MODULE_COS) - exact).max() > 0.007  # float32 angles
    for policy, bound in (("float64", 1e-9), ("float32", ROW_BOUND["float32"])):
        rope = RotaryEmbedding(max_wavelength=500000, dtype=policy)
        cos, _ = rope.rows(np.zeros((1, 2, 1, 64), policy), positions=positions)
        assert np.abs(cos.numpy()[0][:, features] - exact).max() <= bound, policy


def test_interleaved_rotation_at_p_is_the_transpose_of_t_p():
    layer = RotaryEmbedding(layout="interleave")
    basis = np.eye(8, dtype="float32")[:, None, :]  # eight one-step sequences
    for position in (3, 1000, 2**20 + 7):
        columns = layer(basis, start_index=position).numpy()[:, 0, :]
        rotation = columns.T  # column j is the image of feature j
        np.testing.assert_allclose(rotation, shift_matrix(-position, 8), atol=2 * FLOAT32_UNIT)
        np.testing.assert_allclose(rotation, shift_matrix(position, 8).T, atol=2 * FLOAT32_UNIT)


def test_relative_property_survives_a_million_positions_in_bfloat16():
    rng = np.random.default_rng(7)
    q, k = (as_float64(tf.cast(rng.normal(size=(1, 1, 1, 128)), "bfloat16")) for _ in range(2))
    layer = RotaryEmbedding(dtype="mixed_bfloat16")
    shift = 2**20 - 64
    frequencies = rope_frequencies(128)

    def score(m, n):
        rotated_q = as_float64(layer(tf.constant(q, "bfloat16"), start_index=m)).astype(np.float32)
        rotated_k = as_float64(layer(tf.constant(k, "bfloat16"), start_index=n)).astype(np.float32)
        exact_q = reference_rotation(q, [[m]], frequencies)
        exact_k = reference_rotation(k, [[n]], frequencies)
        # Each output is within twice its rounding floor (half a bfloat16 unit is at most
        # 2**-8 of the value), so each product moves by at most (2**-6 + 2**-14) of its size;
        # the float32 sum adds far less.
        allowed = np.sum(np.abs(exact_q * exact_k)) * (2**-6 + 2**-14 + 128 * ROW_BOUND["float32"])
        return float(np.dot(rotated_q.ravel(), rotated_k.ravel())), float(np.sum(exact_q * exact_k)), allowed

    near, exact, allowed = score(0, 5)
    far, far_exact, far_allowed = score(shift, shift + 5)
    assert abs(exact - far_exact) < 1e-6  # the float64 rotation depends on n - m only
    assert abs(near - exact) <= allowed
    assert abs(far - exact) <= far_allowed


def test_decoding_one_step_at_a_time_has_the_full_pass_bits():
    layer = RotaryEmbedding(layout="interleave")
    x = np.random.default_rng(2).normal(size=(2, 20, 3, 16)).astype("float32")
    full = layer(x, start_index=100).numpy()
    steps = [layer(x[:, t : t + 1], start_index=100 + t).numpy() for t in range(20)]
    np.testing.assert_array_equal(np.concatenate(steps, axis=1), full)
    step = tf.function(lambda x, t: layer(x, start_index=t))
    traced = [step(x[:, t : t + 1], tf.constant(100 + t)).numpy() for t in range(20)]
    np.testing.assert_array_equal(np.concatenate(traced, axis=1), full)
    # More positions than a block: the grid, and 100 positions gathering their steps part by part.
    longer = np.concatenate(
        [x, np.random.default_rng(4).normal(size=(2, 80, 3, 16)).astype("float32")], axis=1
    )
    grid = layer(longer, start_index=100).numpy()
    np.testing.assert_array_equal(grid[:, :20], full)
    np.testing.assert_array_equal(layer(longer, positions=np.arange(100, 200)).numpy(), grid)


def test_left_padded_rows_rotate_like_unpadded_ones_with_positions_from_mask():
    tokens = np.array([[0, 0, 5, 6, 7], [1, 2, 3, 4, 5]])
    mask = tokens != 0
    positions = positions_from_mask(mask)
    np.testing.assert_array_equal(positions.numpy(), [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]])
    x = np.random.default_rng(3).normal(size=(2, 5, 8)).astype("float32")
    layer = RotaryEmbedding()
    padded = layer(x, positions=positions).numpy()
    np.testing.assert_array_equal(padded[0, 2:], layer(x[:1, 2:]).numpy()[0])
    np.testing.assert_array_equal(padded[1], layer(x[1:]).numpy()[0])
    shared = layer(x, positions=np.array([4, 3, 2, 1, 0])).numpy()
    exact = reference_rotation(x, np.array([[4, 3, 2, 1, 0]] * 2), rope_frequencies(8))
    assert np.abs(shared - exact).max() <= 4 * rounding_floor(exact, "float32")


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"scaling_factor": 2.0},
        {"rope_type": "dynamic", "scaling_factor": 4.0},
        {"rope_type": "yarn", "scaling_factor": 4.0, "original_max_position_embeddings": 64},
        {"max_wavelength": 500, "denominator_dim": 32},
        {"sequence_axis": 2, "feature_axis": 1},
        {"dtype": "float16"},
    ],
    ids=["default", "linear", "dynamic", "yarn", "base-and-denominator", "permuted-axes", "float16"],
)
def test_a_keras_hub_model_can_switch_layers(kwargs):
    x = np.random.default_rng(4).normal(size=(2, 12, 3, 16)).astype("float32")
    if "sequence_axis" in kwargs:
        x = np.transpose(x, (0, 3, 1, 2))
    ours = RotaryEmbedding(**kwargs)(x, start_index=3)
    theirs = keras_hub.layers.RotaryEmbedding(**kwargs)(x, start_index=3)
    assert ours.dtype == theirs.dtype
    tolerance = 2e-3 if kwargs.get("dtype") == "float16" else 1e-5
    np.testing.assert_allclose(as_float64(ours), as_float64(theirs), atol=tolerance)
    positional = RotaryEmbedding(500, 2.0)  # keras-hub's argument order
    assert (positional.max_wavelength, positional.scaling_factor) == (500, 2.0)


def test_whole_float_positions_are_exact_and_fractional_ones_refused():
    layer = RotaryEmbedding()
    x = np.random.default_rng(5).normal(size=(1, 3, 8)).astype("float32")
    as_floats = layer(x, positions=np.array([70000.0, 3.0, 0.0], "float32")).numpy()
    np.testing.assert_array_equal(as_floats, layer(x, positions=[70000, 3, 0]).numpy())
    with pytest.raises(tf.errors.InvalidArgumentError, match="whole numbers"):
        layer(x, positions=np.array([0.5, 1.0, 2.0], "float32"))


@pytest.mark.parametrize(
    "kwargs, shape, error, message",
    [
        ({}, (1, 3, 7), ValueError, r"must have a known, even size"),
        ({"sequence_axis": 5}, (1, 3, 8), ValueError, r"`sequence_axis` must name an axis"),
        ({"sequence_axis": 0}, (1, 3, 8), ValueError, r"`sequence_axis` must name an axis"),
        ({"sequence_axis": 2}, (1, 3, 8), ValueError, r"must differ"),
        ({"rope_type": "su"}, None, ValueError, r"`rope_type` must be one of"),
        ({"layout": "pairs"}, None, ValueError, r"`layout` must be one of"),
        ({"scaling_factor": 0.5}, None, ValueError, r"`scaling_factor` must be a finite number at least 1"),
        ({"max_wavelength": 1}, None, ValueError, r"`max_wavelength` must be a finite number greater than 1"),
        ({}, (1, 3), ValueError, r"must have rank 3 or more"),
    ],
    ids=[
        "odd-dim",
        "axis-out-of-range",
        "batch-axis",
        "same-axes",
        "rope-type",
        "layout",
        "scaling",
        "wavelength",
        "rank",
    ],
)
def test_bad_arguments_are_clear_errors(kwargs, shape, error, message):
    with pytest.raises(error, match=message):
        layer = RotaryEmbedding(**kwargs)
        layer(np.zeros(shape, "float32"))


def test_bad_calls_are_clear_errors():
    layer = RotaryEmbedding()
    with pytest.raises(TypeError, match=r"`inputs` must be a floating-point tensor"):
        layer(np.zeros((1, 3, 8), "int32"))
    with pytest.raises(ValueError, match=r"runs past the largest position"):
        layer(np.zeros((1, 3, 8), "float32"), start_index=2**31 - 3)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"must be below 2147483647"):
        layer(np.zeros((1, 2, 8), "float32"), positions=np.array([0, 2**31 - 1], "int64"))


@pytest.mark.parametrize("layout", ["half", "interleave"])
@HARNESS_WARNINGS[0]
@HARNESS_WARNINGS[1]
def test_rotary_embedding_passes_the_keras_harness(layout):
    x = np.random.default_rng(6).normal(size=(2, 5, 8)).astype("float32")
    expected = reference_rotation(x, np.arange(5)[None], rope_frequencies(8), layout)
    run_harness(RotaryEmbedding, {"layout": layout}, x, expected=expected)


def test_mask_reaches_the_next_layer():
    tokens = np.array([[3, 5, 0, 0], [1, 0, 0, 0]])
    inputs = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 8, mask_zero=True)(inputs)
    model = keras.Model(inputs, MaskProbe()(RotaryEmbedding()(embedded)))
    np.testing.assert_array_equal(model.predict(tokens, verbose=0), tokens != 0)


def test_same_numbers_under_xla_with_one_trace():
    layer = RotaryEmbedding()
    traces = []

    def call(x):
        traces.append(1)
        return layer(x)

    compiled = tf.function(call, jit_compile=True, input_signature=[tf.TensorSpec((None, None, 2, 16))])
    for seq_len in (1, 13, 64):
        x = np.random.default_rng(seq_len).normal(size=(2, seq_len, 2, 16)).astype("float32")
        exact = reference_rotation(x, np.arange(seq_len)[None], rope_frequencies(16))
        assert np.abs(compiled(x).numpy() - exact).max() <= 4 * rounding_floor(exact, "float32")
    assert len(traces) == 1


def attention_model(layout="half"):
    queries = keras.Input((None, 2, 8))
    rotated = RotaryEmbedding(layout=layout, name="rope")(queries)
    return keras.Model(queries, rotated)


RELOAD = """
import json, sys
sys.path.insert(0, {tests!r})
import numpy as np, keras, tf_posenc
from reference import reference_rotation, rope_frequencies
model = keras.models.load_model("rope.keras")
x = np.random.default_rng(0).normal(size=(1, 40, 2, 8)).astype("float32")
exact = reference_rotation(x, np.arange(40)[None], rope_frequencies(8), "interleave")
print(json.dumps({{"error": float(np.abs(model.predict(x, verbose=0) - exact).max()),
                  "layout": model.get_layer("rope").layout}}))
"""

SERVE = """
import json, sys
sys.modules["tf_posenc"] = None
sys.path.insert(0, {tests!r})
import numpy as np, tensorflow as tf
from reference import reference_rotation, rope_frequencies
served = tf.saved_model.load("exported")
errors = []
for seq_len in (1, 7, 300):
    x = np.random.default_rng(seq_len).normal(size=(2, seq_len, 2, 8)).astype("float32")
    frequencies = 10000 ** -(np.arange(0, 8, 2) / 8)
    exact = reference_rotation(x, np.arange(seq_len)[None], frequencies, "interleave")
    errors.append(float(np.abs(served.serve(tf.constant(x)).numpy() - exact).max()))
print(json.dumps(errors))
"""


@pytest.mark.slow
def test_keras_file_and_saved_model_reload_in_fresh_processes(tmp_path):
    tests = str(pathlib.Path(__file__).parent)
    model = attention_model("interleave")  # saved here; reloaded in fresh interpreters
    model.save(tmp_path / "rope.keras")
    model.export(str(tmp_path / "exported"), verbose=False)
    reloaded = json.loads(run_python(RELOAD.format(tests=tests), tmp_path).splitlines()[-1])
    assert reloaded["layout"] == "interleave" and reloaded["error"] <= 4 * FLOAT32_UNIT * 4
    served = json.loads(run_python(SERVE.format(tests=tests), tmp_path).splitlines()[-1])
    assert len(served) == 3 and max(served) <= 4 * FLOAT32_UNIT * 4


@pytest.mark.slow
def test_litert_and_onnxruntime_rotate_like_the_formula(tmp_path):
    model = attention_model()
    x = np.random.default_rng(8).normal(size=(2, 100, 2, 8)).astype("float32")
    exact = reference_rotation(x, np.arange(100)[None], rope_frequencies(8))
    spec = tf.TensorSpec((None, None, 2, 8), tf.float32)
    for serve in (to_tflite(model, tmp_path), to_onnx(model, spec)):
        assert np.abs(serve(x) - exact).max() <= 4 * rounding_floor(exact, "float32")


@pytest.mark.slow
def test_positions_given_as_a_model_input_convert_to_litert_builtins_and_onnx(tmp_path):
    # Left padding, packed batches and KV caches give the positions as an input of the model.
    queries, positions = keras.Input((None, 2, 8)), keras.Input((None,), dtype="int32")
    model = keras.Model([queries, positions], RotaryEmbedding()(queries, positions=positions))
    x = np.random.default_rng(9).normal(size=(2, 5, 2, 8)).astype("float32")
    given = np.array([[4, 3, 2, 1, 0], [0, 1, 2, 3, 70000]], "int32")
    exact = reference_rotation(x, given, rope_frequencies(8))
    bound = 4 * rounding_floor(exact, "float32")

    assert np.abs(to_tflite_with_positions(model, tmp_path)(x, given) - exact).max() <= bound
    specs = [tf.TensorSpec((None, None, 2, 8), tf.float32), tf.TensorSpec((None, None), tf.int32)]
    assert np.abs(to_onnx_with_positions(model, specs)(x, given) - exact).max() <= bound


def test_yarn_scale_is_float64_under_a_float64_policy():
    x = np.random.default_rng(3).normal(size=(1, 6, 2, 16))
    layer = RotaryEmbedding(
        scaling_factor=8.0, rope_type="yarn", original_max_position_embeddings=64, dtype="float64"
    )
    # YaRN's attention temperature 0.1 ln s + 1 (keras-hub 0.32, `_compute_cos_sin_embedding`).
    frequencies = keras_hub_yarn_frequencies(16, factor=8.0, original_max_position_embeddings=64)
    expected = reference_rotation(x, np.arange(6)[None], frequencies) * (0.1 * np.log(8.0) + 1)
    # The float64 route is good to about 2**-38; the scale rounded to float32 is 3.6e-8 off.
    np.testing.assert_allclose(layer(x).numpy(), expected, rtol=0, atol=1e-10)
