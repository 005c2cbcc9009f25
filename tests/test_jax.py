"""Keras 3 on JAX (`KERAS_BACKEND=jax`, without JAX's 64-bit mode): the layers build, train,
predict and reload, with the TensorFlow backend's bits. One JAX interpreter runs the checks
(and a second one reloads what the first saved); this process (TensorFlow) computes what JAX
must match."""

import json
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf
from bounds import BOUND, FLOAT32_UNIT
from helpers import run_python
from layer_cases import BAD_CALLS, CASES, case_weights, make_layer, stored_weights
from reference import reference_table

from tf_posenc import layers

JAX = {"KERAS_BACKEND": "jax", "JAX_ENABLE_X64": None, "TF_USE_LEGACY_KERAS": None}
TESTS = str(pathlib.Path(__file__).parent)

pytestmark = pytest.mark.slow

RUN_CASES = """
import sys, json, numpy as np, jax, jax.numpy as jnp, keras
sys.path.insert(0, TESTS)
from layer_cases import CASES, case_weights, make_layer
from tf_posenc import layers
assert keras.backend.backend() == "jax" and not jax.config.jax_enable_x64
weights = np.load("weights.npz")
outputs, dtypes = {}, {}
for name, (class_name, arguments, inputs, call_arguments) in CASES.items():
    for policy in ("float32", "mixed_bfloat16"):
        layer = make_layer(layers, name, policy, case_weights(weights, name))
        eager = layer(inputs, **call_arguments)
        # Under jit, `start_index` and `positions` are traced arrays, not constants.
        traced = {key: jnp.asarray(value) for key, value in call_arguments.items()}
        jitted = jax.jit(lambda x, kw: layer(x, **kw))(inputs, traced)
        dtypes[f"{name}-{policy}"] = [str(eager.dtype), str(jitted.dtype)]
        outputs[f"{name}-{policy}-eager"] = np.asarray(eager, np.float32)
        outputs[f"{name}-{policy}-jit"] = np.asarray(jitted, np.float32)
np.savez("outputs.npz", **outputs)
# Eager calls run one compiled body: one trace for every offset of a length.
encoding, rotary = layers.PositionalEncoding(4096, 32), layers.RotaryEmbedding()
for start in range(0, 4000, 97):
    encoding(np.zeros((1, 1, 32), "float32"), start_index=start)
    rotary(np.zeros((1, 1, 2, 8), "float32"), start_index=start)
world = {"dtypes": dtypes, "traces": [encoding._eager_functions.traces, rotary._eager_functions.traces]}
"""


@pytest.fixture(scope="module")
def jax_world(tmp_path_factory):
    """One JAX interpreter runs every check below; returns its folder, the weights it was given,
    what it reported, and its layer outputs."""
    folder = tmp_path_factory.mktemp("jax_world")
    weights = stored_weights({name: make_layer(layers, name).get_weights() for name in CASES})
    np.savez(folder / "weights.npz", **weights)
    script = "\n".join(
        [
            f"TESTS = {TESTS!r}",
            RUN_CASES,
            EVERY_POSITION,
            TRAIN_AND_SAVE,
            MASKS_AND_ERRORS,
            POSITIONS_IN_ATTENTION,
            BACKEND_ERRORS,
        ]
    )
    world = json.loads(run_python(script, folder, env=JAX).splitlines()[-1])
    return folder, weights, world, np.load(folder / "outputs.npz")


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("name", CASES)
def test_jax_layers_give_the_tensorflow_bits(jax_world, name, policy):
    _, weights, result, outputs = jax_world
    class_name, _, inputs, call_arguments = CASES[name]
    layer = make_layer(layers, name, policy, case_weights(weights, name))
    assert result["dtypes"][f"{name}-{policy}"] == [layer.compute_dtype] * 2
    expected = tf.cast(layer(inputs, **call_arguments), "float32").numpy()
    # Eager calls run the body compiled (`jax.jit`), like a jitted model.
    for where in ("eager", "jit"):
        got = outputs[f"{name}-{policy}-{where}"]
        if class_name in ("ContinuousPositionBias", "LearnedPatchPositionEmbedding"):
            # Their matrix products (an MLP; the resize) round in each backend's own order.
            unit = BOUND[policy]
            assert np.abs(got - expected).max() <= 4 * unit * np.abs(expected).max(), where
        elif "Rotary" not in class_name:
            assert np.array_equal(got, expected), where
        else:
            # Compiled, the rotation's last multiply-add may be fused (one rounding fewer), as
            # XLA does in TensorFlow too; the cosines and sines it applies are the same bits.
            unit = BOUND[policy]
            assert np.abs(got - expected).max() <= 2 * unit * np.abs(inputs).max(), where


def test_jax_eager_calls_trace_once_for_every_offset(jax_world):
    assert jax_world[2]["traces"] == [1, 1]


EVERY_POSITION = """
from tf_posenc import PositionalEncoding
for policy in ("float32", "mixed_bfloat16"):
    inputs = keras.Input((None, 8))
    model = keras.Model(inputs, PositionalEncoding(2**20, 8, dtype=policy)(inputs))
    rows = model.predict(np.zeros((1, 2**20, 8), "float32"), verbose=0)[0]
    np.save(f"rows_{policy}.npy", np.asarray(rows, np.float32))
"""


def test_jax_is_exact_at_every_position_below_2_20(jax_world):
    folder = jax_world[0]
    expected = reference_table(np.arange(2**20), 8)
    zeros = np.zeros((1, 2**20, 8), "float32")
    # Within half a unit of the output dtype (a unit is 2**-24 in [0.5, 1) for float32, 2**-8
    # for bfloat16), plus the route's own 2**-38; TensorFlow meets the same bound.
    for policy, half_unit in [("float32", 2**-25), ("mixed_bfloat16", 2**-9)]:
        tensorflow_rows = layers.PositionalEncoding(2**20, 8, dtype=policy)(zeros)[0]
        nearest = tf.cast(tf.cast(expected, tensorflow_rows.dtype), "float64").numpy()
        tensorflow_rows = tf.cast(tensorflow_rows, "float64").numpy()
        rows = np.load(folder / f"rows_{policy}.npy").astype(np.float64)
        for got in (rows, tensorflow_rows):
            assert np.abs(got - expected).max() <= half_unit * 1.001, policy
            assert np.mean(got == nearest) > 0.9999, policy
        # Where the formula lies within 2**-38 of halfway, compiled code (which may fuse a
        # multiply and an add) can round the other way: a few entries in 100000.
        assert np.mean(rows != tensorflow_rows) < 1e-4, policy
        assert np.abs(rows - tensorflow_rows).max() <= 2 * half_unit, policy


TRAIN_AND_SAVE = """
import tf_posenc
keras.utils.set_random_seed(0)
tokens = keras.Input((None,), dtype="int32")
x = tf_posenc.PositionalEmbedding(50, 16, position=32)(tokens)
x = tf_posenc.PositionalEncoding(32, 16, convention="tensor2tensor")(x)
x = tf_posenc.RotaryEmbedding(layout="interleave")(keras.layers.Reshape((-1, 2, 8))(x))
x = keras.layers.Reshape((-1, 16))(x)
timesteps = keras.Input((), dtype="int32")
patches = keras.Input((5, 16))
y = tf_posenc.PatchPositionalEncoding(2, 16, cls_token=True)(patches)
y = y + keras.layers.Reshape((1, 16))(tf_posenc.TimestepEmbedding(16)(timesteps))
pooled = keras.layers.Concatenate()([x[:, 0], y[:, 0]])
model = keras.Model([tokens, timesteps, patches], keras.layers.Dense(1, activation="sigmoid")(pooled))
model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy")
rng = np.random.default_rng(0)
data = [rng.integers(1, 50, size=(32, 12)).astype("int32"), rng.integers(0, 1000, size=(32,)).astype("int32"),
        rng.normal(size=(32, 5, 16)).astype("float32")]
targets = (data[0][:, :1] > 25).astype("float32")
history = model.fit(data, targets, epochs=8, batch_size=8, verbose=0).history["loss"]
np.savez("data.npz", *data)
np.save("expected.npy", model.predict(data, verbose=0))
model.save("model.keras")
world["loss"] = [history[0], history[-1]]
"""

RELOAD = """
import numpy as np, keras, tf_posenc
data = list(np.load("data.npz").values())
model = keras.models.load_model("model.keras")
print(np.array_equal(model.predict(data, verbose=0), np.load("expected.npy")))
"""


def test_jax_models_train_predict_and_reload_from_keras_files(jax_world):
    tmp_path = jax_world[0]
    first, last = jax_world[2]["loss"]
    assert last < first
    assert run_python(RELOAD, tmp_path, env=JAX).split()[-1] == "True"
    # The same file on the TensorFlow backend: the same predictions, to float32 rounding of
    # the dense layers' sums.
    model = keras.models.load_model(tmp_path / "model.keras")
    data = list(np.load(tmp_path / "data.npz").values())
    difference = np.abs(model.predict(data, verbose=0) - np.load(tmp_path / "expected.npy")).max()
    assert difference <= 1e-6


MASKS_AND_ERRORS = """
from layer_cases import BAD_CALLS
from helpers import MaskProbe
import tf_posenc

tokens = keras.Input((None,), dtype="int32")
x = tf_posenc.PositionalEmbedding(20, 8, 16, mask_zero=True)(tokens)
x = tf_posenc.RotaryEmbedding()(tf_posenc.PositionalEncoding(16, 8)(x))
probe = keras.Model(tokens, MaskProbe()(x))
result = {"mask": probe.predict(np.array([[3, 4, 0, 0], [5, 0, 6, 0]], "int32"), verbose=0).tolist()}
for name, (class_name, arguments, inputs, call_arguments, error, _) in BAD_CALLS.items():
    for where in ("eager", "symbolic"):
        try:
            layer = getattr(tf_posenc, class_name)(**arguments)
            if where == "eager":
                layer(inputs, **call_arguments)
            else:
                layer(keras.Input(inputs.shape[1:], dtype=str(inputs.dtype)), **call_arguments)
            result[f"{name}-{where}"] = None
        except Exception as raised:
            result[f"{name}-{where}"] = [type(raised).__name__, str(raised)]
world["masks_and_errors"] = result
"""


def test_jax_masks_flow_and_errors_are_the_tensorflow_errors(jax_world):
    result = jax_world[2]["masks_and_errors"]
    assert result["mask"] == [[1, 1, 0, 0], [1, 0, 1, 0]]
    for name, (*_, error, message) in BAD_CALLS.items():
        if name == "fractional-positions":
            # A compiled JAX function cannot stop on a value it computes: float positions
            # are taken as integers, as XLA does in TensorFlow (documented).
            assert result[f"{name}-eager"] is None
            continue
        wheres = ["eager"] if name == "both-start-and-positions" else ["eager", "symbolic"]
        for where in wheres:
            kind, text = result[f"{name}-{where}"]
            assert kind == error.__name__ and message in text, (name, where, text)


ROPES = {
    "plain": {},
    "longrope": {"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [4.0] * 8,
                 "original_max_position_embeddings": 16, "max_position_embeddings": 64},
}  # fmt: skip
ATTENTION_POSITIONS = np.array([[0, 1, 2, 3, 4, 5], [0, 0, 7, 8, 9, 30]], "int32")
ATTENTION_INPUTS = np.random.default_rng(21).normal(size=(2, 6, 4, 16)).astype("float32")

POSITIONS_IN_ATTENTION = f"""
from port_model import Port
from port_weights import LLAMA, TOKENS, weights as port_weights
from tf_posenc import RotaryEmbedding, attention_mask, attention_temperature
x = np.array({ATTENTION_INPUTS.tolist()!r}, "float32")
positions = np.array({ATTENTION_POSITIONS.tolist()!r}, "int32")
saved = {{}}
for name, kwargs in {ROPES!r}.items():
    rope = RotaryEmbedding(**kwargs)
    rows = rope.rows(x, positions=positions)
    jitted = jax.jit(lambda x, p: rope.rows(x, positions=p))(x, positions)
    saved.update({{f"{{name}}-cos": rows[0], f"{{name}}-sin": rows[1], f"{{name}}-jit-cos": jitted[0],
                  f"{{name}}-jit-sin": jitted[1], f"{{name}}-rows": rope(x, rows=rows),
                  f"{{name}}-call": rope(x, positions=positions)}})
mask = lambda q, k, m: attention_mask(q, k, sliding_window=3, chunk_size=4, key_mask=m)
written = np.arange(6) < 5
saved["mask"] = mask(positions, np.arange(6), written)
saved["mask-jit"] = jax.jit(mask)(positions, np.arange(6), written)
saved["temperature"] = attention_temperature(positions * 1000, 4096, 0.1)
saved["temperature-jit"] = jax.jit(lambda p: attention_temperature(p, 4096, 0.1))(positions * 1000)
port = Port(LLAMA, port_weights(LLAMA))
saved["port"] = port(TOKENS, port.empty_cache(16), 0)[0]
from tf_posenc import AlibiBias, RelativePositionBias
scores = np.asarray(x[:, :, :4, :6].transpose(0, 2, 1, 3) * 0 + np.arange(6), "float32")  # (2, 4, 6, 6)
t5 = RelativePositionBias(4, 16, 40)
t5.build()
t5.set_weights([np.arange(64, dtype="float32").reshape(16, 4) / 7])
from tf_posenc import ContinuousPositionBias
continuous = ContinuousPositionBias((2, 3), 4)
continuous.build()
continuous.set_weights([np.linspace(-1, 1, size, dtype="float32").reshape(shape) for size, shape in
                        ((1024, (2, 512)), (512, (512,)), (2048, (512, 4)))])
saved["continuous"] = continuous(scores)
for name, layer in (("alibi", AlibiBias()), ("t5", t5)):
    saved[name] = layer(scores, query_positions=positions, key_positions=positions)
    biased = jax.jit(lambda s, p: layer(s, query_positions=p, key_positions=p))
    saved[name + "-jit"] = biased(scores, positions)
    saved[name + "-default"] = layer(scores)
np.savez("attention.npz", **{{key: np.asarray(value) for key, value in saved.items()}})
"""


def test_jax_rows_masks_temperature_port_and_biases_are_the_tensorflow_ones(jax_world):
    from test_attention import reference_mask
    from test_port import LOGIT_BOUND, TRANSFORMERS_LLAMA_LOGITS

    from tf_posenc import RotaryEmbedding, attention_mask, attention_temperature

    saved = np.load(jax_world[0] / "attention.npz")
    x, positions = ATTENTION_INPUTS, ATTENTION_POSITIONS
    for name, kwargs in ROPES.items():
        rope = RotaryEmbedding(**kwargs)
        cos, sin = rope.rows(x, positions=positions)
        for where in ("", "jit-"):  # the rows: the TensorFlow backend's bits, eager and jitted
            np.testing.assert_array_equal(saved[f"{name}-{where}cos"], cos.numpy())
            np.testing.assert_array_equal(saved[f"{name}-{where}sin"], sin.numpy())
        expected = rope(x, positions=positions).numpy()
        np.testing.assert_array_equal(saved[f"{name}-rows"], expected)  # op by op: no fused multiply-add
        # A compiled call may fuse the rotation's multiply-add (see the layer cases above).
        assert np.abs(saved[f"{name}-call"] - expected).max() <= 2 * FLOAT32_UNIT * np.abs(x).max()
    written = np.arange(6) < 5
    expected = reference_mask(positions, np.arange(6)[None], True, 3, 4, key_mask=written[None])
    np.testing.assert_array_equal(saved["mask"], expected)
    np.testing.assert_array_equal(saved["mask-jit"], expected)
    np.testing.assert_array_equal(
        attention_mask(positions, np.arange(6), sliding_window=3, chunk_size=4, key_mask=written).numpy(),
        expected,
    )
    temperature = attention_temperature(positions * 1000, 4096, 0.1).numpy()
    np.testing.assert_array_equal(saved["temperature"], temperature)
    np.testing.assert_array_equal(saved["temperature-jit"], temperature)
    assert np.abs(saved["port"][0] - TRANSFORMERS_LLAMA_LOGITS).max() <= LOGIT_BOUND
    from tf_posenc import AlibiBias, RelativePositionBias

    scores = np.asarray(x[:, :, :4, :6].transpose(0, 2, 1, 3) * 0 + np.arange(6), "float32")
    t5 = RelativePositionBias(4, 16, 40)
    t5.build()
    t5.set_weights([np.arange(64, dtype="float32").reshape(16, 4) / 7])
    from tf_posenc import ContinuousPositionBias

    continuous = ContinuousPositionBias((2, 3), 4)
    continuous.build()
    shapes = ((1024, (2, 512)), (512, (512,)), (2048, (512, 4)))
    continuous.set_weights(
        [np.linspace(-1, 1, size, dtype="float32").reshape(shape) for size, shape in shapes]
    )
    # Its MLP's matmuls round in each backend's own order: float32 noise.
    np.testing.assert_allclose(saved["continuous"], continuous(scores).numpy(), rtol=1e-6, atol=1e-5)
    for name, layer in (("alibi", AlibiBias()), ("t5", t5)):  # the biases: the same bits
        expected = layer(scores, query_positions=positions, key_positions=positions).numpy()
        np.testing.assert_array_equal(saved[name], expected)
        np.testing.assert_array_equal(saved[name + "-jit"], expected)
        np.testing.assert_array_equal(saved[name + "-default"], layer(scores).numpy())


BACKEND_ERRORS = """
import tf_posenc.tf_keras
result = {}
for family in (tf_posenc.layers, tf_posenc.tf_keras):
    try:
        family.PositionalEncoding(8, 4)
        result[family.__name__] = None
    except RuntimeError as raised:
        result[family.__name__] = str(raised)
world["backend_errors"] = result
print(json.dumps(world))
"""


def test_jax_runs_keras_3_layers_and_names_the_backend_tf_keras_needs(jax_world):
    result = jax_world[2]["backend_errors"]
    assert result["tf_posenc.layers"] is None
    assert "runs on the Keras backends tensorflow; set KERAS_BACKEND" in result["tf_posenc.tf_keras"]
    assert "Received: keras.backend.backend()='jax'" in result["tf_posenc.tf_keras"]


def test_a_backend_no_family_runs_on_is_named(tmp_path):
    # Keras's own numpy backend, in an interpreter of its own: tf_posenc imports, and its
    # layers refuse to be built with an error naming the backends they run on.
    script = "import json\nworld = {}\n" + BACKEND_ERRORS
    result = json.loads(run_python(script, tmp_path, env={**JAX, "KERAS_BACKEND": "numpy"}).splitlines()[-1])
    for family, supported in (
        ("tf_posenc.layers", "tensorflow and jax"),
        ("tf_posenc.tf_keras", "tensorflow"),
    ):
        assert (
            f"runs on the Keras backends {supported}; set KERAS_BACKEND" in result["backend_errors"][family]
        )
        assert "Received: keras.backend.backend()='numpy'" in result["backend_errors"][family]
