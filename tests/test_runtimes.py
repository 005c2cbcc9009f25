"""One route everywhere: no float64 in any graph, the same exact rows in eager calls, graphs,
XLA, TensorFlow Lite (LiteRT) and ONNX (onnxruntime), small exports, one length contract."""

import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import onnxruntime
import pytest
import tensorflow as tf
import tf2onnx
from ai_edge_litert.interpreter import Interpreter
from bounds import FLOAT32_UNIT, ROW_BOUND
from helpers import run_python
from reference import exact_reference_table, reference_table
from tensorflow.core.protobuf import saved_model_pb2

import tf_posenc
from tf_posenc import PositionalEmbedding, PositionalEncoding, RotaryEmbedding


def assert_exact(added, expected, bound=ROW_BOUND["float32"], nearest=0.999):
    """Within the route's row bound, and mostly the nearest float32."""
    added = np.asarray(added, np.float64)
    assert np.abs(added - expected).max() <= bound
    assert np.mean(added == expected.astype(np.float32)) > nearest


def float64_attributes(graph_def):
    """Names of the nodes in `graph_def` (and its function library) with a float64 type."""
    double = tf.float64.as_datatype_enum
    nodes = list(graph_def.node)
    for function in graph_def.library.function:
        nodes.extend(function.node_def)
    found = set()
    for node in nodes:
        for value in node.attr.values():
            if value.type == double or double in value.list.type:
                found.add(f"{node.op}:{node.name}")
    return found


def model_with_every_layer(d_model=16, position=64):
    tokens = keras.Input((None,), dtype="int32")
    x = PositionalEmbedding(50, d_model, position=position, mask_zero=True)(tokens)
    x = PositionalEncoding(position, d_model, layout="concat", name="second")(x)
    return keras.Model(tokens, keras.layers.Dense(3)(x))


@pytest.mark.slow
def test_exported_saved_model_holds_no_float64_anywhere(tmp_path):
    model_with_every_layer().export(str(tmp_path / "exported"), verbose=False)
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((tmp_path / "exported" / "saved_model.pb").read_bytes())
    graph_def = saved_model.meta_graphs[0].graph_def
    assert len(graph_def.library.function) > 0
    assert float64_attributes(graph_def) == set()
    # The check itself can fail: a float64 op is found when there is one.
    with tf.Graph().as_default() as graph:
        tf.cast(tf.constant(1.0), tf.float64)
    assert float64_attributes(graph.as_graph_def())


MIRRORED_STEP = """
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras, numpy as np, tf_posenc
sys.path.insert(0, {tests!r})
from test_runtimes import float64_attributes, model_with_every_layer
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = model_with_every_layer()
    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build(model.trainable_variables)

@tf.function
def train_step(tokens):
    def step(tokens):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(tokens, training=True) ** 2)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss
    return strategy.reduce("SUM", strategy.run(step, args=(tokens,)), axis=None)

tokens = tf.constant(np.random.default_rng(0).integers(1, 50, size=(4, 9)), tf.int32)
loss = float(train_step(tokens))
graph = train_step.get_concrete_function(tokens).graph
print(json.dumps({{"float64": sorted(float64_attributes(graph.as_graph_def())), "loss": loss,
                  "replicas": strategy.num_replicas_in_sync}}))
"""


@pytest.mark.slow
def test_mirrored_strategy_replica_step_holds_no_float64(tmp_path):
    tests = str(pathlib.Path(__file__).parent)
    result = json.loads(run_python(MIRRORED_STEP.format(tests=tests), tmp_path).splitlines()[-1])
    assert result["replicas"] == 2
    assert np.isfinite(result["loss"])
    assert result["float64"] == []


def to_tflite(model, folder):
    model.export(str(folder / "exported"), verbose=False)
    converter = tf.lite.TFLiteConverter.from_saved_model(str(folder / "exported"))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    interpreter = Interpreter(model_content=converter.convert())
    given, produced = interpreter.get_input_details()[0], interpreter.get_output_details()[0]

    def run(data):
        interpreter.resize_tensor_input(given["index"], data.shape)
        interpreter.allocate_tensors()
        interpreter.set_tensor(given["index"], data)
        interpreter.invoke()
        return interpreter.get_tensor(produced["index"])

    return run


def to_onnx(model, input_spec):
    function = tf.function(lambda x: model(x), input_signature=[input_spec])
    proto, _ = tf2onnx.convert.from_function(function, input_signature=[input_spec], opset=17)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda data: session.run(None, {name: data})[0]


def to_tflite_with_positions(model, folder, exported=None):
    """`model`, whose inputs are one float32 and one int32 tensor (features and positions),
    converted from its SavedModel (`exported`, or exported into `folder`) to TensorFlow Lite
    builtins: a function of the two arrays (matched to the interpreter's inputs by dtype)
    returning the first output."""
    if exported is None:
        exported = str(folder / "for_litert")
        model.export(exported, verbose=False)
    converter = tf.lite.TFLiteConverter.from_saved_model(str(exported))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    interpreter = Interpreter(model_content=converter.convert())
    inputs = {detail["dtype"]: detail["index"] for detail in interpreter.get_input_details()}
    produced = interpreter.get_output_details()[0]["index"]

    def run(*arrays):
        for data in arrays:
            interpreter.resize_tensor_input(inputs[data.dtype.type], data.shape)
        interpreter.allocate_tensors()
        for data in arrays:
            interpreter.set_tensor(inputs[data.dtype.type], data)
        interpreter.invoke()
        return interpreter.get_tensor(produced)

    return run


def to_onnx_with_positions(model, specs):
    """`model` of several inputs converted to ONNX: a function of the input arrays, in order."""
    function = tf.function(lambda *inputs: model(list(inputs)), input_signature=specs)
    proto, _ = tf2onnx.convert.from_function(function, input_signature=specs, opset=17)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [given.name for given in session.get_inputs()]
    return lambda *arrays: session.run(None, dict(zip(names, arrays, strict=True)))[0]


def encoding_model(position, d_model, layout="interleave"):
    inputs = keras.Input((None, d_model))
    return keras.Model(inputs, PositionalEncoding(position, d_model, layout=layout)(inputs))


def runtime(name, model, d_model, folder):
    """`model` as served by one runtime: a function of a float32 NumPy batch."""
    spec = tf.TensorSpec((None, None, d_model), tf.float32, name="x")
    if name == "eager":
        return lambda data: model(data).numpy()
    if name in ("graph", "xla"):
        function = tf.function(model, jit_compile=name == "xla", input_signature=[spec])
        return lambda data: function(data).numpy()
    if name == "litert":
        return to_tflite(model, folder)
    return to_onnx(model, spec)


RUNTIMES = ["eager", "graph", "xla", "litert", "onnxruntime"]
CONVERTERS = ["litert", "onnxruntime"]


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNTIMES)
def test_every_runtime_is_exact_at_every_position_below_2_20(name, tmp_path):
    model = encoding_model(2**20, 6)
    added = runtime(name, model, 6, tmp_path)(np.zeros((1, 2**20, 6), np.float32))[0]
    assert_exact(added, reference_table(np.arange(2**20), 6))


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=pytest.mark.slow) if name in CONVERTERS else name for name in RUNTIMES]
)
@pytest.mark.parametrize("layout", ["interleave", "concat"])
def test_every_runtime_serves_lengths_1_100_and_position(name, layout, tmp_path):
    serve = runtime(name, encoding_model(4096, 64, layout), 64, tmp_path)
    for seq_len in (1, 100, 4096):
        added = serve(np.zeros((1, seq_len, 64), np.float32))[0]
        assert_exact(added, reference_table(np.arange(seq_len), 64, layout=layout))


WIDE_PROBE = """
import json, sys
sys.path.insert(0, {tests!r})
import numpy as np, tensorflow as tf
from reference import reference_table
from tf_posenc import PositionalEncoding
results = {{}}
for d_model, length in ((64, 2**20), (1024, 2**16)):
    expected = reference_table(np.arange(length), d_model)
    layer = PositionalEncoding(length, d_model)
    for jit_compile in (False, True):
        function = tf.function(layer, jit_compile=jit_compile,
                               input_signature=[tf.TensorSpec((None, None, d_model))])
        added = function(tf.zeros((1, length, d_model))).numpy()[0].astype(np.float64)
        results[f"d{{d_model}}-{{'xla' if jit_compile else 'graph'}}"] = {{
            "error": float(np.abs(added - expected).max()),
            "nearest": float(np.mean(added == expected.astype(np.float32)))}}
        del added
print(json.dumps(results))
"""


@pytest.mark.slow
def test_wide_encodings_are_exact_in_graphs(tmp_path):
    # A fresh process: these tables take several GiB on their way.
    probe = WIDE_PROBE.format(tests=str(pathlib.Path(__file__).parent))
    results = json.loads(run_python(probe, tmp_path).splitlines()[-1])
    assert set(results) == {"d64-graph", "d64-xla", "d1024-graph", "d1024-xla"}
    for name, result in results.items():
        assert result["error"] <= ROW_BOUND["float32"], name
        assert result["nearest"] > 0.999, name


@pytest.mark.parametrize("d_model", [6, 64], ids=lambda d: f"d{d}")
def test_sampled_positions_up_to_2_31_are_exact(d_model):
    positions = np.random.default_rng(d_model).integers(0, 2**31 - 1, size=500)
    positions[:2] = [2**24, 2**31 - 2]
    layer = PositionalEncoding(2**31 - 1, d_model)
    added = layer(tf.zeros((1, 500, d_model)), positions=positions).numpy()[0]
    # The float64 formula itself is off by up to 2**-22 at these angles; this reference is not.
    assert_exact(added, exact_reference_table(positions, d_model), nearest=0.998)
    shifted = layer(tf.zeros((1, 70, d_model)), start_index=2**31 - 71).numpy()[0]
    assert_exact(shifted, exact_reference_table(np.arange(2**31 - 71, 2**31 - 1), d_model), nearest=0.99)


def test_every_row_has_the_same_bits_however_it_is_asked_for():
    layer = PositionalEncoding(5000, 32)
    x = tf.zeros((1, 300, 32))
    full = layer(x, start_index=4700).numpy()[0]
    picked = layer(x, positions=np.arange(4700, 5000)).numpy()[0]
    served = tf.function(
        lambda x, t: layer(x, start_index=t),
        input_signature=[tf.TensorSpec((None, None, 32)), tf.TensorSpec((), tf.int32)],
    )
    one_by_one = np.concatenate([served(x[:, :1], tf.constant(t)).numpy()[0] for t in range(4700, 5000, 7)])
    np.testing.assert_array_equal(picked, full)
    np.testing.assert_array_equal(one_by_one, full[::7])
    assert_exact(full, reference_table(np.arange(4700, 5000), 32), nearest=0.99)


def test_runs_of_any_length_known_only_at_run_time_have_the_bits_of_their_rows():
    # Inside one block the grid shrinks to the run's own steps; across blocks it keeps all 64.
    # (start, length): empty, inside a block, ending on its edge, just across, one whole block,
    # a block and a row, several blocks.
    runs = [(70, 0), (64, 0), (70, 1), (70, 10), (60, 4), (60, 5), (64, 64), (65, 64), (100, 300)]
    for layer, features in [(PositionalEncoding(5000, 32), (32,)), (RotaryEmbedding(), (4, 32))]:
        served = tf.function(
            lambda x, t, layer=layer: layer(x, start_index=t),
            input_signature=[tf.TensorSpec((None, None, *features)), tf.TensorSpec((), tf.int32)],
        )
        for start, length in runs:
            x = tf.ones((1, length, *features))
            picked = layer(x, positions=np.arange(start, start + length)).numpy()
            np.testing.assert_array_equal(
                served(x, tf.constant(start)).numpy(), picked, err_msg=f"{start}, {length}"
            )
        assert served.experimental_get_tracing_count() == 1


@pytest.mark.slow
def test_litert_and_onnxruntime_serve_an_embedding_model_like_the_formula(tmp_path):
    tokens = keras.Input((None,), dtype="int32")
    layer = PositionalEmbedding(50, 16, position=64)
    model = keras.Model(tokens, layer(tokens))
    data = np.random.default_rng(1).integers(0, 50, size=(2, 64)).astype("int32")
    table = layer.token_embedding.embeddings.numpy().astype(np.float64)
    expected = table[data] * 4 + reference_table(np.arange(64), 16)
    for serve in (to_tflite(model, tmp_path), to_onnx(model, tf.TensorSpec((None, None), tf.int32))):
        np.testing.assert_allclose(serve(data), expected, atol=4 * FLOAT32_UNIT)


@pytest.mark.slow
def test_past_position_xla_and_litert_give_formula_values_not_clamped_rows(tmp_path):
    model = encoding_model(100, 8)
    xla = runtime("xla", model, 8, tmp_path)
    litert = runtime("litert", model, 8, tmp_path)
    expected = reference_table(np.arange(150), 8)
    for serve in (xla, litert):
        assert_exact(serve(np.zeros((1, 150, 8), np.float32))[0], expected, nearest=0.99)
    with pytest.raises(tf.errors.InvalidArgumentError, match="longer than `position`"):
        runtime("graph", model, 8, tmp_path)(np.zeros((1, 150, 8), np.float32))


def folder_bytes(folder):
    return sum(path.stat().st_size for path in pathlib.Path(folder).rglob("*") if path.is_file())


SERVE_WITHOUT_TF_POSENC = """
import json, sys
sys.modules["tf_posenc"] = None
sys.path.insert(0, {tests!r})
import numpy as np, tensorflow as tf
from reference import reference_table
served = tf.saved_model.load("exported")
added = served.serve(tf.zeros((1, 16384, 1024))).numpy()[0, -256:].astype(np.float64)
expected = reference_table(np.arange(16384 - 256, 16384), 1024)
print(json.dumps({{"error": float(np.abs(added - expected).max()),
                  "nearest": float(np.mean(added == expected.astype(np.float32)))}}))
"""


@pytest.mark.slow
def test_a_static_length_saved_model_holds_no_table(tmp_path):
    # Grappler folds the rows of a static length when the graph is loaded, not when it is saved.
    # (A `None` length: test_numerics.py::test_large_position_models_save_and_export_small_and_exact.)
    inputs = keras.Input((16384, 1024))
    model = keras.Model(inputs, PositionalEncoding(16384, 1024)(inputs))
    model.export(str(tmp_path / "exported"), verbose=False)
    assert folder_bytes(tmp_path / "exported") <= 2**20  # the table would be 64 MiB
    probe = SERVE_WITHOUT_TF_POSENC.format(tests=str(pathlib.Path(__file__).parent))
    result = json.loads(run_python(probe, tmp_path).splitlines()[-1])
    assert result["error"] <= FLOAT32_UNIT
    assert result["nearest"] > 0.999


def test_the_package_uses_no_private_tensorflow_module():
    package = pathlib.Path(tf_posenc.__file__).parent
    sources = {path.name: path.read_text() for path in package.rglob("*.py")}
    assert len(sources) > 5
    assert [name for name, text in sources.items() if "tensorflow.python" in text] == []


@pytest.mark.slow
def test_graphs_make_tensorflow_print_nothing_about_our_ops(tmp_path):
    script = """
import keras, numpy as np, tf_posenc
tokens = keras.Input((None,), dtype="int32")
x = tf_posenc.PositionalEmbedding(20, 8, position=32)(tokens)
x = tf_posenc.PositionalEncoding(32, 8)(x)
model = keras.Model(tokens, keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(x)))
model.compile(optimizer="adam", loss="mse")
data = np.random.default_rng(0).integers(0, 20, size=(16, 12))
model.fit(data, np.ones((16, 1)), epochs=1, verbose=0)
model.predict(data[:, :5], verbose=0)
model.export("exported", verbose=False)
"""
    completed = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "loop_optimizer" not in completed.stderr
    assert "Assert" not in completed.stderr
