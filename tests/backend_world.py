"""The layers on Keras 3's other backends, JAX (without its 64-bit mode) and PyTorch: they build,
train, predict and reload with the TensorFlow backend's bits. One interpreter of the backend runs
the checks (and a second one reloads what the first saved); the test process (TensorFlow)
computes what it must match. `test_jax.py` runs this world on JAX, `tests/torch_world.py` (in
the PyTorch environment of `tests/torch.sh`) on PyTorch: each sets `BACKEND` and imports the
tests below."""

import json
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf
from bounds import BOUND, FLOAT32_UNIT
from helpers import run_python
from layer_cases import BAD_CALLS, CASES, case_weights, helper_results, make_layer, stored_weights
from reference import reference_table

from tf_posenc import layers

ENVIRONMENTS = {
    "jax": {"KERAS_BACKEND": "jax", "JAX_ENABLE_X64": None, "TF_USE_LEGACY_KERAS": None},
    "torch": {"KERAS_BACKEND": "torch", "TF_USE_LEGACY_KERAS": None},
}
# How the world compiles a function and makes a tensor of an array, on each backend.
PRELUDES = {
    "jax": """
import jax, jax.numpy as jnp
assert not jax.config.jax_enable_x64
compiled, as_tensor = jax.jit, jnp.asarray
""",
    # `torch.compile` takes half a minute to trace the route, once per function: the world runs
    # its functions eagerly again, and a model with `jit_compile=True` once (`COMPILED_TRAINING`).
    "torch": """
import torch
compiled, as_tensor = (lambda function: function), torch.as_tensor
""",
}
TESTS = str(pathlib.Path(__file__).parent)

# Before anything of the tests' own imports TensorFlow: a tour of the public API on the world's
# backend, which must import none.
NO_TENSORFLOW = """
import sys, numpy as np, keras, tf_posenc
sys.path.insert(0, TESTS)
from layer_cases import helper_results
from tf_posenc import layers
helper_results()  # every public function besides the layers
x = np.random.default_rng(0).normal(size=(2, 8, 16)).astype("float32")
q = np.random.default_rng(0).normal(size=(2, 8, 2, 8)).astype("float32")
layers.PositionalEncoding(64, 16)(x)
layers.PositionalEncoding(64, 16, dtype="mixed_bfloat16")(x)
layers.RotaryEmbedding()(q, start_index=3)
layers.RotaryEmbedding.from_hf_config({"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2})(q)
tf_posenc.positional_encoding(10, 8, dtype="bfloat16")
tf_posenc.hf_attention_layers({"model_type": "gemma3_text"})
attention = tf_posenc.GroupQueryAttention(
    8, 4, 2, rope=layers.RotaryEmbedding(), position_bias=layers.AlibiBias(num_heads=4)
)
attention(x, x, use_causal_mask=True)
tf_posenc.MultiHeadAttention(2, 8, position_bias=layers.RelativePositionBias(2, 16, 40))(x, x)
tf_posenc.attention_mask(np.arange(8), np.arange(8), sliding_window=3)
tower = layers.AxialRotaryEmbedding.from_hf_config({"model_type": "qwen2_5_vl_vision"})
tower(np.zeros((1, 24, 2, 224), "float32"), positions=tf_posenc.vision_position_ids([[1, 4, 6]], 2))
layers.TimestepEmbedding(32)(np.arange(4.0))
qwen3 = {"model_type": "qwen3", "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 8}
hidden = np.zeros((1, 4, 32), "float32")
tf_posenc.GroupQueryAttention.from_hf_config(qwen3, 0)(hidden, hidden)
tf_posenc.InklingRelativeBias.from_hf_config({"model_type": "inkling2_text"}, 0)
tf_posenc.hf_position_ids({"model_type": "roberta", "pad_token_id": 1}, np.array([[0, 5, 1]]))
tf_posenc.deberta_relative_positions(3, 4, 256, 512)
tensorflow_imported = ["tensorflow" in sys.modules]
"""

RUN_CASES = """
import sys, json, numpy as np, keras
sys.path.insert(0, TESTS)
from layer_cases import CASES, case_weights, make_layer
from tf_posenc import layers
assert keras.backend.backend() == BACKEND
to_numpy = lambda tensor: keras.ops.convert_to_numpy(keras.ops.cast(tensor, "float32"))
weights = np.load("weights.npz")
outputs, dtypes = {}, {}
for name, (class_name, arguments, inputs, call_arguments) in CASES.items():
    for policy in ("float32", "mixed_bfloat16"):
        layer = make_layer(layers, name, policy, case_weights(weights, name))
        eager = layer(inputs, **call_arguments)
        # Compiled, `start_index` and `positions` are traced arrays, not constants.
        traced = {key: as_tensor(value) for key, value in call_arguments.items()}
        jitted = compiled(lambda x, kw: layer(x, **kw))(inputs, traced)
        dtypes[f"{name}-{policy}"] = [keras.backend.standardize_dtype(t.dtype) for t in (eager, jitted)]
        outputs[f"{name}-{policy}-eager"] = to_numpy(eager)
        outputs[f"{name}-{policy}-jit"] = to_numpy(jitted)
# Decoding one step at a time gives the full pass's bits.
encoding, rotary = layers.PositionalEncoding(4096, 32), layers.RotaryEmbedding()
for layer, shape in ((encoding, (1, 130, 32)), (rotary, (1, 130, 2, 8))):
    x = np.random.default_rng(3).normal(size=shape).astype("float32")
    steps = [to_numpy(layer(x[:, start : start + 1], start_index=start + 3900)) for start in range(130)]
    outputs[f"{type(layer).__name__}-steps"] = np.concatenate(steps, axis=1)
    outputs[f"{type(layer).__name__}-full"] = to_numpy(layer(x, start_index=3900))
np.savez("outputs.npz", **outputs)
tensorflow_imported.append("tensorflow" in sys.modules)  # after every layer case, compiled too
# Eager calls run one compiled body on JAX: one trace for every offset of a length.
encoding, rotary = layers.PositionalEncoding(4096, 32), layers.RotaryEmbedding()
for start in range(0, 4000, 97):
    encoding(np.zeros((1, 1, 32), "float32"), start_index=start)
    rotary(np.zeros((1, 1, 2, 8), "float32"), start_index=start)
world = {
    "tensorflow_imported": tensorflow_imported,
    "dtypes": dtypes,
    "traces": [encoding._eager_paths.traces, rotary._eager_paths.traces],
}
"""


@pytest.fixture(scope="module")
def backend_world(request, tmp_path_factory):
    """One interpreter of the test module's `BACKEND` runs every check below; returns its
    folder, the weights it was given, what it reported, its layer outputs and the backend."""
    backend = request.module.BACKEND
    folder = tmp_path_factory.mktemp(f"{backend}_world")
    weights = stored_weights({name: make_layer(layers, name).get_weights() for name in CASES})
    np.savez(folder / "weights.npz", **weights)
    script = "\n".join(
        [
            f"TESTS = {TESTS!r}",
            f"BACKEND = {backend!r}",
            PRELUDES[backend],
            NO_TENSORFLOW,
            RUN_CASES,
            CHANGED_BETWEEN_CALLS,
            *EXTRAS[backend],
            EVERY_POSITION,
            TRAIN_AND_SAVE,
            COMPILED_TRAINING,
            HELPERS,
            MASKS_AND_ERRORS,
            POSITIONS_IN_ATTENTION,
            ATTENTION_LAYERS,
            getattr(request.module, "WORLD_PAGE", ""),
            BACKEND_ERRORS,
        ]
    )
    world = json.loads(run_python(script, folder, env=ENVIRONMENTS[backend]).splitlines()[-1])
    return folder, weights, world, np.load(folder / "outputs.npz"), backend


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("name", CASES)
def test_layers_give_the_tensorflow_bits(backend_world, name, policy):
    _, weights, result, outputs, backend = backend_world
    class_name, _, inputs, call_arguments = CASES[name]
    layer = make_layer(layers, name, policy, case_weights(weights, name))
    assert result["dtypes"][f"{name}-{policy}"] == [layer.compute_dtype] * 2
    expected = tf.cast(layer(inputs, **call_arguments), "float32").numpy()
    # On JAX eager calls run the body compiled (`jax.jit`), like a jitted model.
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


def test_the_public_api_imports_no_tensorflow(backend_world):
    # After a tour of the public API, and after every layer case in both dtype policies.
    assert backend_world[2]["tensorflow_imported"] == [False, False]


def test_a_changed_dtype_policy_gets_a_fresh_layers_bits_and_dtype(backend_world):
    changed = backend_world[2]["changed_policy"]
    assert len(changed) == 3 * 4
    for name, (got, fresh, same_bits) in changed.items():
        assert got == fresh and same_bits, name
    # The rotation's own rows stay float32 under mixed precision; a call's output follows.
    assert changed["encoding-1-bfloat16"][0] == "bfloat16"
    assert changed["rotary-2-mixed_float16"][0] == "float16"
    assert changed["rotary-rows-2-mixed_float16"][0] == "float32"


def test_calls_at_new_lengths_have_the_tensorflow_bits_and_compile_per_power_of_two(backend_world):
    folder, _, world, _, backend = backend_world
    saved = np.load(folder / "new_lengths.npz")
    x = np.random.default_rng(5).normal(size=(2, 1100, 4, 32)).astype("float32")
    encoding, rotary = layers.PositionalEncoding(4096, 32), layers.RotaryEmbedding()
    calls = {
        "encoding-values": lambda t: encoding(t, positions=np.arange(t.shape[1]) * 3),
        "encoding": lambda t: encoding(t, start_index=7),
        "rotary": lambda t: rotary(t, start_index=7),
    }
    for key in saved.files:
        kind, length = key.rsplit("-", 1)
        inputs = x[:1, : int(length)] if kind == "rotary" else x[:1, : int(length), 0]
        # A static shape, whose rows Grappler folds to constants: the route's own bits.
        expected = tf.function(calls[kind])(tf.constant(inputs)).numpy()
        if key.startswith("rotary") and backend == "jax":  # compiled: a multiply-add may be fused
            assert np.abs(saved[key] - expected).max() <= 2 * FLOAT32_UNIT * np.abs(x).max(), key
        else:
            np.testing.assert_array_equal(saved[key], expected, err_msg=key)
    # JAX compiles the route once per power of two of at least a block (64, 128, 256, 512, 2048
    # here), per structure (the encoding's start, and its positions); PyTorch runs it per window.
    if backend == "jax":
        assert world["new_length_traces"] == [10, 5]


def test_eager_calls_trace_once_and_steps_have_the_full_pass_bits(backend_world):
    _, _, world, outputs, backend = backend_world
    # JAX compiles an eager call's body once for every offset; PyTorch runs it op by op, its
    # rows computed once per 64-position block the calls reach and sliced for each step in it.
    blocks = len({start // 64 for start in range(0, 4000, 97)})
    assert world["traces"] == ([1, 1] if backend == "jax" else [blocks, blocks])
    for layer, shape in (
        (layers.PositionalEncoding(4096, 32), (1, 130, 32)),
        (layers.RotaryEmbedding(), (1, 130, 2, 8)),
    ):
        x = np.random.default_rng(3).normal(size=shape).astype("float32")
        name, full = type(layer).__name__, layer(x, start_index=3900).numpy()
        np.testing.assert_array_equal(outputs[f"{name}-steps"], outputs[f"{name}-full"])
        if name == "RotaryEmbedding" and backend == "jax":  # compiled: a multiply-add may be fused
            assert np.abs(outputs[f"{name}-full"] - full).max() <= 2 * FLOAT32_UNIT * np.abs(x).max()
        else:
            np.testing.assert_array_equal(outputs[f"{name}-full"], full)


EVERY_POSITION = """
from tf_posenc import PositionalEncoding
for policy in ("float32", "mixed_bfloat16"):
    inputs = keras.Input((None, 8))
    model = keras.Model(inputs, PositionalEncoding(2**20, 8, dtype=policy)(inputs))
    rows = model.predict(np.zeros((1, 2**20, 8), "float32"), verbose=0)[0]
    np.save(f"rows_{policy}.npy", np.asarray(rows, np.float32))
"""


def test_is_exact_at_every_position_below_2_20(backend_world):
    folder = backend_world[0]
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
y = tf_posenc.PatchPositionalEncoding(2, d_model=16, cls_token=True)(patches)
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


def test_models_train_predict_and_reload_from_keras_files(backend_world):
    tmp_path = backend_world[0]
    first, last = backend_world[2]["loss"]
    assert last < first
    assert run_python(RELOAD, tmp_path, env=ENVIRONMENTS[backend_world[4]]).split()[-1] == "True"
    # The same file on the TensorFlow backend: the same predictions, to float32 rounding of
    # the dense layers' sums.
    model = keras.models.load_model(tmp_path / "model.keras")
    data = list(np.load(tmp_path / "data.npz").values())
    difference = np.abs(model.predict(data, verbose=0) - np.load(tmp_path / "expected.npy")).max()
    assert difference <= 1e-6


COMPILED_TRAINING = """
keras.utils.set_random_seed(0)
inputs = keras.Input((None, 16))
x = keras.layers.Reshape((-1, 2, 8))(tf_posenc.PositionalEncoding(64, 16)(inputs))
x = keras.layers.Reshape((-1, 16))(tf_posenc.RotaryEmbedding()(x))
compiled_model = keras.Model(inputs, keras.layers.Dense(1)(x))
compiled_model.compile(optimizer="sgd", loss="mse", jit_compile=True)  # torch.compile on PyTorch
data = np.random.default_rng(1).normal(size=(8, 12, 16)).astype("float32")
targets = data[:, :, :1] * 0.5
world["compiled_loss"] = compiled_model.fit(data, targets, epochs=3, batch_size=4, verbose=0).history["loss"]
eager_outputs = keras.ops.convert_to_numpy(compiled_model(data))
world["compiled_predict"] = float(np.abs(compiled_model.predict(data, verbose=0) - eager_outputs).max())
"""


def test_models_train_and_predict_compiled(backend_world):
    world = backend_world[2]
    assert world["compiled_loss"][-1] < world["compiled_loss"][0]
    # A compiled program may fuse a multiply and an add (one rounding fewer) in the dense sums.
    assert world["compiled_predict"] <= 1e-5


# Keras exports ONNX from the PyTorch backend with torch's exporter.
ONNX_EXPORT = """
import onnxruntime, tf_posenc
inputs = keras.Input((16, 8), batch_size=2)
x = tf_posenc.PositionalEncoding(64, 8)(inputs, start_index=40)
x = keras.layers.Reshape((16, 8))(tf_posenc.RotaryEmbedding()(keras.layers.Reshape((16, 2, 4))(x)))
exported = keras.Model(inputs, x)
data = np.random.default_rng(4).normal(size=(2, 16, 8)).astype("float32")
eager_outputs = keras.ops.convert_to_numpy(exported(data))  # Keras exports a model once called
exported.export("exported.onnx", format="onnx", verbose=False)
session = onnxruntime.InferenceSession("exported.onnx")
onnx_outputs = session.run(None, {session.get_inputs()[0].name: data})[0]
np.savez("onnx.npz", data=data, onnx=onnx_outputs, eager=eager_outputs)
"""


# The public functions besides the layers, on this backend's tensors.
HELPERS = """
from layer_cases import helper_results
helpers = helper_results()
np.savez("helpers.npz", **{key: keras.ops.convert_to_numpy(value) for key, value in helpers.items()})
"""


def test_helper_functions_give_the_tensorflow_results(backend_world):
    saved = np.load(backend_world[0] / "helpers.npz")
    expected = helper_results()
    resized = expected.pop("interpolate_position_embeddings").numpy()
    assert set(saved) == {*expected, "interpolate_position_embeddings"}
    for name, value in expected.items():
        np.testing.assert_array_equal(saved[name], np.asarray(value), err_msg=name)
    # The resize's weighted sums round in each backend's own order: float32 noise.
    np.testing.assert_allclose(saved["interpolate_position_embeddings"], resized, rtol=1e-6, atol=1e-6)


# What a user changes between eager calls: the dtype policy, and (JAX) lengths no call has used.
CHANGED_BETWEEN_CALLS = """
changed = {}
x = np.random.default_rng(5).normal(size=(2, 1100, 4, 32)).astype("float32")
calls = {
    "encoding": (
        lambda policy: layers.PositionalEncoding(4096, 32, dtype=policy),
        lambda layer: layer(x[:, :, 0], start_index=9),
    ),
    "rotary": (lambda policy: layers.RotaryEmbedding(dtype=policy), lambda layer: layer(x, start_index=9)),
    "rotary-rows": (
        lambda policy: layers.RotaryEmbedding(dtype=policy),
        lambda layer: layer.rows(x, start_index=9)[1],
    ),
}
for name, (make, call) in calls.items():
    layer = make("float32")
    for step, policy in enumerate(("float32", "bfloat16", "mixed_float16", "float32")):
        layer.dtype_policy = policy
        got, fresh = call(layer), call(make(policy))
        changed[f"{name}-{step}-{policy}"] = [
            keras.backend.standardize_dtype(got.dtype),
            keras.backend.standardize_dtype(fresh.dtype),
            bool(np.array_equal(to_numpy(got), to_numpy(fresh))),
        ]
world["changed_policy"] = changed
# Lengths no call has used, each once: their rows are the TensorFlow backend's.
lengths = [1, 64, 65, 129, 300, 1025]
encoding, rotary = layers.PositionalEncoding(4096, 32), layers.RotaryEmbedding()
new_lengths = {}
for length in lengths:
    new_lengths[f"encoding-{length}"] = to_numpy(encoding(x[:1, :length, 0], start_index=7))
    new_lengths[f"rotary-{length}"] = to_numpy(rotary(x[:1, :length], start_index=7))
    spread = np.arange(length) * 3
    new_lengths[f"encoding-values-{length}"] = to_numpy(encoding(x[:1, :length, 0], positions=spread))
np.savez("new_lengths.npz", **new_lengths)
world["new_length_traces"] = [encoding._eager_paths.traces, rotary._eager_paths.traces]
"""


# What only one backend's world runs, after the layer cases.
SCATTERED_CALLS = """
import gc, types, torch
from helpers import in_threads
from tf_posenc import _eager


def kept_storage_bytes(layer):
    # The bytes of every torch tensor's storage that a layer's eager paths reach.
    seen, storages, todo = set(), {}, [layer._eager_paths]
    while todo:
        item = todo.pop()
        # Code is not what a layer keeps: a function's globals would reach every module's state.
        if id(item) in seen or isinstance(item, (type, str, bytes, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
        else:
            todo.extend(gc.get_referents(item))
    return sum(storages.values())


# Calls at scattered starts and lengths (ranges that come back, ranges over kept and new
# blocks, more blocks than a layer keeps) give the bits of a fresh layer's call.
scattered = [(5, 1), (70, 40), (5, 1), (60, 7), (1000, 65), (130, 64), (3000, 40), (61, 1), (64, 1)]
scattered += [(start, 1 + start % 65) for start in range(0, 4000, 150)] + [(3, 64), (3000, 40)]
kept, scattered_outputs = {}, {}
for name, make, width in (
    ("encoding", lambda: layers.PositionalEncoding(4096, 2048), (2048,)),
    ("rotary", layers.RotaryEmbedding, (1, 2048)),
    ("rotary-rows", layers.RotaryEmbedding, (1, 2048)),
):
    layer, x = make(), np.random.default_rng(4).normal(size=(1, 65, *width)).astype("float32")
    for start, length in scattered:
        for which, called in (("kept", layer), ("fresh", make())):
            if name == "rotary-rows":
                got = np.stack([to_numpy(t) for t in called.rows(x[:, :length], start_index=start)])
            else:
                got = to_numpy(called(x[:, :length], start_index=start))
            scattered_outputs[f"{name}-{start}-{length}-{which}"] = got
    kept[name] = [layer._eager_paths.kept_windows, layer._eager_paths.kept_bytes, kept_storage_bytes(layer)]
np.savez("scattered.npz", **scattered_outputs)
world["kept"] = kept

# Four threads calling one layer at starts whose windows they extend, evict and share.
threaded, fresh = layers.PositionalEncoding(2**20, 2048), layers.PositionalEncoding(2**20, 2048)
x = torch.as_tensor(np.random.default_rng(6).normal(size=(1, 3, 2048)).astype("float32"))
starts = np.random.default_rng(7).integers(0, 8192, size=(4, 200)).tolist()
# Thread t makes the calls of starts[t]: items (thread, call, start), each its own result.
work = [[(thread, call, start) for call, start in enumerate(starts[thread])] for thread in range(4)]
results, errors = in_threads(lambda item: to_numpy(threaded(x, start_index=item[2])), work)
world["threads"] = {
    "errors": errors,
    "calls": len(results),
    "different": [
        f"{thread}-{start}"
        for (thread, _, start), got in results.items()
        if not np.array_equal(got, to_numpy(fresh(x, start_index=start)))
    ],
    "kept": [threaded._eager_paths.kept_bytes, kept_storage_bytes(threaded)],
}

# Calls under inference mode, then a training step: the kept rows are not inference tensors.
inference = {}
for name, layer, shape in (
    ("rotary", layers.RotaryEmbedding(), (1, 5, 2, 8)),
    # Columns no call has used yet: their steps' pieces are first made under inference mode.
    ("rotary-new-columns", layers.RotaryEmbedding(max_wavelength=12345), (1, 5, 2, 8)),
    ("encoding", layers.PositionalEncoding(64, 8), (1, 5, 8)),
):
    data = torch.as_tensor(np.random.default_rng(8).normal(size=shape).astype("float32"))
    with torch.inference_mode():
        under = to_numpy(layer(data, start_index=3))
    weights = data.clone().requires_grad_(True)
    try:
        rotated = layer(weights, start_index=3)
        (rotated**2).sum().backward()
        same = bool(np.array_equal(under, to_numpy(rotated.detach())))
        inference[name] = [same, to_numpy(weights.grad).tolist()]
    except Exception as raised:
        inference[name] = [False, repr(raised)]
world["inference_mode"] = inference

# A very long call, then decoding steps: what the layer keeps stays within its byte cap.
long = layers.PositionalEncoding(65536, 512)
long(torch.zeros(1, 65536, 512))
after_long = [long._eager_paths.kept_bytes, kept_storage_bytes(long)]
for start in range(0, 3000, 3):
    long(torch.zeros(1, 3, 512), start_index=start)
after_decoding = [long._eager_paths.kept_bytes, kept_storage_bytes(long)]
world["kept_after"] = {"long call": after_long, "decoding": after_decoding}
# The device the rows are made on is part of what they are kept under (a key, read: no GPU here).
key = lambda: _eager.call_key(long, torch.zeros(1, 3, 512), (-1,), "_combine", "start")
with keras.device("meta"):
    meta_key = key()
world["device_keys"] = [key().device, meta_key.device]
"""

# keras-hub's own model: a tiny Llama 3.1 swapped by `exact_rotary`, the new layer tracked in the
# old one's place (on PyTorch, torch keeps sublayers in its modules, apart from the attributes).
KERAS_HUB_SWAP = """
import keras_hub
from tf_posenc.keras_hub import exact_rotary
from test_keras_hub import LLAMA31_ROPE, HEADS, SMALL, inputs
keras.utils.set_random_seed(7)
backbone = keras_hub.models.Llama3Backbone(**SMALL, **HEADS, **LLAMA31_ROPE)
rope = backbone.transformer_layers[0]._self_attention_layer.rotary_embedding_layer
x = np.random.default_rng(1).normal(size=(1, 16, 2, 8)).astype("float32")
hub = {"theirs": to_numpy(backbone(inputs())), "theirs-far": to_numpy(rope(x, start_index=2**20 - 16))}
exact_rotary(backbone)
attention = backbone.transformer_layers[0]._self_attention_layer
rope = attention.rotary_embedding_layer
children = dict(attention.named_children()) if hasattr(attention, "named_children") else vars(attention)
world["keras_hub_tracked"] = [
    any(layer is rope for layer in attention._layers), children["rotary_embedding_layer"] is rope
]
hub["ours"] = to_numpy(backbone(inputs()))
hub["ours-far"] = to_numpy(rope(x, start_index=2**20 - 16))
far_step = compiled(lambda q, start: rope(q, start_index=start))
hub["ours-far-jit"] = to_numpy(far_step(x, as_tensor(2**20 - 16)))
np.savez("keras_hub.npz", **hub)
world["keras_hub_rope"] = type(rope).__module__
"""
EXTRAS = {"jax": (KERAS_HUB_SWAP,), "torch": (KERAS_HUB_SWAP, ONNX_EXPORT, SCATTERED_CALLS)}


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


def test_masks_flow_and_errors_are_the_tensorflow_errors(backend_world):
    result, backend = backend_world[2]["masks_and_errors"], backend_world[4]
    assert result["mask"] == [[1, 1, 0, 0], [1, 0, 1, 0]]
    for name, (*_, error, message) in BAD_CALLS.items():
        if name == "fractional-positions":
            if backend == "jax":
                # A compiled JAX function cannot stop on a value it computes: float positions
                # are taken as integers, as XLA does in TensorFlow (documented).
                assert result[f"{name}-eager"] is None
            else:  # PyTorch's eager values are checked at once: the message, as a ValueError
                kind, text = result[f"{name}-eager"]
                assert kind == "ValueError" and message in text, text
            continue
        wheres = ["eager"] if name == "both-start-and-positions" else ["eager", "symbolic"]
        for where in wheres:
            kind, text = result[f"{name}-{where}"]
            assert kind == getattr(error, "__name__", error) and message in text, (name, where, text)


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
    jitted = compiled(lambda x, p: rope.rows(x, positions=p))(x, as_tensor(positions))
    saved.update({{f"{{name}}-cos": rows[0], f"{{name}}-sin": rows[1], f"{{name}}-jit-cos": jitted[0],
                  f"{{name}}-jit-sin": jitted[1], f"{{name}}-rows": rope(x, rows=rows),
                  f"{{name}}-call": rope(x, positions=positions)}})
mask = lambda q, k, m: attention_mask(q, k, sliding_window=3, chunk_size=4, key_mask=m)
written = np.arange(6) < 5
saved["mask"] = mask(positions, np.arange(6), written)
saved["mask-jit"] = compiled(mask)(as_tensor(positions), as_tensor(np.arange(6)), as_tensor(written))
saved["temperature"] = attention_temperature(positions * 1000, 4096, 0.1)
temperature = compiled(lambda p: attention_temperature(p, 4096, 0.1))
saved["temperature-jit"] = temperature(as_tensor(positions * 1000))
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
from fingerprints import inkling_arguments, inkling_weights
from tf_posenc import InklingRelativeBias
inkling = InklingRelativeBias(**inkling_arguments(), log_scaling=True)
hidden, linear, scale, proj = inkling_weights()
inkling.build(None, hidden.shape)
inkling.set_weights([linear.T, scale, proj])
near = np.arange(2**17 - 5, 2**17)
saved["inkling"] = inkling.bias(hidden, near, near)
saved["inkling-jit"] = compiled(lambda h, p: inkling.bias(h, p, p))(as_tensor(hidden), as_tensor(near))
for name, layer in (("alibi", AlibiBias()), ("t5", t5)):
    saved[name] = layer(scores, query_positions=positions, key_positions=positions)
    biased = compiled(lambda s, p: layer(s, query_positions=p, key_positions=p))
    saved[name + "-jit"] = biased(scores, as_tensor(positions))
    saved[name + "-default"] = layer(scores)
np.savez("attention.npz", **{{key: keras.ops.convert_to_numpy(value) for key, value in saved.items()}})
"""


def test_rows_masks_temperature_port_and_biases_are_the_tensorflow_ones(backend_world):
    from test_attention import reference_mask
    from test_port import LOGIT_BOUND, TRANSFORMERS_LLAMA_LOGITS

    from tf_posenc import RotaryEmbedding, attention_mask, attention_temperature

    saved = np.load(backend_world[0] / "attention.npz")
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
    from test_biases import inkling_layer

    inkling, hidden = inkling_layer(True)
    near = np.arange(2**17 - 5, 2**17)
    expected = inkling.bias(hidden, near, near).numpy()
    for key in ("inkling", "inkling-jit"):  # float32 matmuls and a norm, in each backend's order
        assert np.abs(saved[key] - expected).max() <= 4 * FLOAT32_UNIT * np.abs(expected).max()
    for name, layer in (("alibi", AlibiBias()), ("t5", t5)):  # the biases: the same bits
        expected = layer(scores, query_positions=positions, key_positions=positions).numpy()
        np.testing.assert_array_equal(saved[name], expected)
        np.testing.assert_array_equal(saved[name + "-jit"], expected)
        np.testing.assert_array_equal(saved[name + "-default"], layer(scores).numpy())


# `tf_posenc.MultiHeadAttention` and `GroupQueryAttention` with rotations, biases and a cache.
ATTENTION_LAYERS = """
from test_multi_head_attention import BACKEND_CASES, backend_outputs
layers_saved = {}
for name, make in BACKEND_CASES.items():
    for key, value in backend_outputs(make(), compiled, as_tensor).items():
        layers_saved[f"{name}-{key}"] = value
np.savez("attention_layers.npz", **layers_saved)
# Float positions under mixed precision, and a model whose layers share a bias and a rotation,
# saved and reloaded: what `test_multi_head_attention.py` checks on TensorFlow.
from tf_posenc.layers import GroupQueryAttention, MultiHeadAttention, RotaryEmbedding
x = np.random.default_rng(5).normal(size=(2, 7, 16)).astype("float32")
integers = np.arange(257, 264)[None]
mixed = {}
for policy in ("mixed_float16", "mixed_bfloat16"):
    for name, layer in (("mha", MultiHeadAttention(2, 8, rope=RotaryEmbedding(), dtype=policy)),
                        ("gqa", GroupQueryAttention(8, 4, 2, rope=RotaryEmbedding(), dtype=policy))):
        given = layer(x, x, query_positions=integers, key_positions=integers, use_causal_mask=True)
        floats = integers.astype("float32")
        again = layer(x, x, query_positions=floats, key_positions=floats, use_causal_mask=True)
        mixed[f"{name}-{policy}"] = [
            keras.backend.standardize_dtype(again.dtype),
            bool(np.array_equal(to_numpy(again), to_numpy(given))),
        ]
from test_multi_head_attention import shared_position_model
model, _ = shared_position_model()
model.save("shared.keras")
reloaded = keras.saving.load_model("shared.keras")
one, two = reloaded.layers[1], reloaded.layers[2]
world["attention_reload"] = {
    "mixed": mixed,
    "same": bool(np.array_equal(to_numpy(reloaded(x)), to_numpy(model(x)))),
    "shared": [one.position_bias is two.position_bias, one.rope is two.rope],
    "weights": [len(reloaded.weights), len(model.weights)],
}
"""


def test_attention_layers_keep_positions_exact_and_reload_shared_position_layers(backend_world):
    result = backend_world[2]["attention_reload"]
    for key, (dtype, same) in result["mixed"].items():
        assert dtype == key.split("_")[-1] and same, key
    assert result["same"] and result["shared"] == [True, True]
    assert result["weights"] == [2 * 8 + 1, 2 * 8 + 1]  # the bias table once


def test_attention_layers_give_the_tensorflow_numbers(backend_world):
    from test_multi_head_attention import BACKEND_CASES, backend_outputs

    saved = np.load(backend_world[0] / "attention_layers.npz")
    for name, make in BACKEND_CASES.items():
        for key, expected in backend_outputs(make(), tf.function).items():
            # Each backend's matmuls and softmax round in their own order: float32 noise.
            np.testing.assert_allclose(saved[f"{name}-{key}"], expected, atol=2e-5, err_msg=f"{name}-{key}")


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


def test_runs_keras_3_layers_and_names_the_backend_tf_keras_needs(backend_world):
    result, backend = backend_world[2]["backend_errors"], backend_world[4]
    assert result["tf_posenc.layers"] is None
    assert "runs on the Keras backend tensorflow; set KERAS_BACKEND" in result["tf_posenc.tf_keras"]
    assert f"Received: keras.backend.backend()={backend!r}" in result["tf_posenc.tf_keras"]


def test_keras_hubs_models_swap_to_the_exact_rotation(backend_world):
    import keras_hub
    from test_keras_hub import HEADS, LLAMA31_ROPE, SMALL, keras_hub_rotation

    from tf_posenc import RotaryEmbedding

    folder, _, world, _, _ = backend_world
    saved = np.load(folder / "keras_hub.npz")
    assert world["keras_hub_rope"] == "tf_posenc.layers.rotary_embedding"
    assert world["keras_hub_tracked"] == [True, True]
    assert np.abs(saved["ours"] - saved["theirs"]).max() <= 2e-5 * max(1.0, np.abs(saved["theirs"]).max())
    rope = keras_hub.models.Llama3Backbone(**SMALL, **HEADS, **LLAMA31_ROPE).transformer_layers[0]
    rope = rope._self_attention_layer.rotary_embedding_layer
    x = np.random.default_rng(1).normal(size=(1, 16, 2, 8)).astype("float32")
    # The TensorFlow backend's rotation (a compiled call may fuse its multiply-add), and
    # keras-hub's float32 angles far from it.
    expected = RotaryEmbedding.from_keras_hub(rope)(x, start_index=2**20 - 16).numpy()
    for key in ("ours-far", "ours-far-jit"):
        assert np.abs(saved[key] - expected).max() <= 2 * FLOAT32_UNIT * np.abs(x).max()
    exact = keras_hub_rotation(rope, x, 2**20 - 16)
    assert np.abs(saved["theirs-far"] - exact).max() > 100 * np.abs(saved["ours-far"] - exact).max()
