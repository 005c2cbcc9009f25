"""The float32-only route: no float64 in the graph, still exact, and it runs on TensorFlow Lite."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from reference import reference_table

from tf_posenc import PositionalEmbedding, PositionalEncoding, float32_only


def traced(layer, d_model, jit_compile=False):
    with float32_only():
        function = tf.function(layer, jit_compile=jit_compile,
                               input_signature=[tf.TensorSpec((None, None, d_model))])
        function.get_concrete_function()
    return function


def graph_dtypes(function):
    graph = function.get_concrete_function().graph
    return {output.dtype for op in graph.get_operations() for output in op.outputs}


def test_graph_traced_inside_holds_no_float64_and_outside_does():
    layer = PositionalEncoding(1000, 16)
    assert tf.float64 not in graph_dtypes(traced(layer, 16))
    outside = tf.function(layer, input_signature=[tf.TensorSpec((None, None, 16))])
    assert tf.float64 in graph_dtypes(outside)


@pytest.mark.slow
@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_exact_at_every_position_below_2_20(jit_compile):
    function = traced(PositionalEncoding(2**20, 8), 8, jit_compile)
    added = function(tf.zeros((1, 2**20, 8))).numpy()[0]
    error = np.abs(added - reference_table(np.arange(2**20), 8))
    # The leading products are exact, two sums round (at most 2**-24 and 2**-25), and
    # the terms below 2**-24 carry rounding errors far under 2**-30.
    assert error.max() <= 1.5 * 2**-24 + 2**-30


@pytest.mark.parametrize(
    "position, d_model, layout",
    [(1, 4, "interleave"), (37, 7, "interleave"), (5000, 32, "concat"), (65536, 512, "interleave")],
    ids=["one-position", "odd-width", "concat", "wide"],
)
def test_layouts_widths_and_table_sizes(position, d_model, layout):
    function = traced(PositionalEncoding(position, d_model, layout=layout), d_model)
    added = function(tf.zeros((1, position, d_model))).numpy()[0]
    expected = reference_table(np.arange(position), d_model, layout=layout)
    assert np.abs(added - expected).max() <= 2**-23


def test_positions_and_start_index_use_the_same_route():
    layer = PositionalEncoding(4096, 16)
    with float32_only():
        picked = layer(tf.zeros((2, 3, 16)), positions=tf.constant([[4095, 0, 77], [1, 2, 3]]))
        shifted = tf.function(lambda x, t: layer(x, start_index=t))(tf.zeros((1, 5, 16)),
                                                                     tf.constant(4090))
    expected = reference_table(np.array([[4095, 0, 77], [1, 2, 3]]), 16)
    assert np.abs(picked.numpy() - expected).max() <= 2**-23
    assert np.abs(shifted.numpy()[0] - reference_table(np.arange(4090, 4095), 16)).max() <= 2**-23


def test_mixed_precision_inside_float32_only():
    layer = PositionalEncoding(4096, 16, dtype="mixed_float16")
    with float32_only():
        function = tf.function(layer, input_signature=[tf.TensorSpec((None, None, 16), "float16")])
        added = function(tf.zeros((1, 4096, 16), "float16"))
    assert added.dtype == tf.float16
    error = np.abs(tf.cast(added, tf.float64).numpy()[0] - reference_table(np.arange(4096), 16))
    assert error.max() <= 2**-10


def convert_to_tflite(model, folder):
    with float32_only():
        model.export(str(folder / "exported"), verbose=False)
    converter = tf.lite.TFLiteConverter.from_saved_model(str(folder / "exported"))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return Interpreter(model_content=converter.convert())


def run_tflite(interpreter, data):
    given, produced = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    interpreter.resize_tensor_input(given["index"], data.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(given["index"], data)
    interpreter.invoke()
    return interpreter.get_tensor(produced["index"])


@pytest.mark.slow
def test_tflite_builtins_serve_the_encoding_exactly_at_several_lengths(tmp_path):
    inputs = keras.Input((None, 64))
    model = keras.Model(inputs, PositionalEncoding(4096, 64)(inputs))
    interpreter = convert_to_tflite(model, tmp_path)
    for seq_len in (1, 100, 4096):
        added = run_tflite(interpreter, np.zeros((1, seq_len, 64), "float32"))[0]
        assert np.abs(added - reference_table(np.arange(seq_len), 64)).max() <= 2**-23


@pytest.mark.slow
def test_tflite_model_with_embedding_matches_keras(tmp_path):
    tokens = keras.Input((None,), dtype="int32")
    x = PositionalEmbedding(50, 16, position=64)(tokens)
    model = keras.Model(tokens, keras.layers.Dense(4)(x))
    interpreter = convert_to_tflite(model, tmp_path)
    for seq_len in (1, 9, 64):
        data = np.random.default_rng(seq_len).integers(0, 50, size=(2, seq_len)).astype("int32")
        np.testing.assert_allclose(run_tflite(interpreter, data), model.predict(data, verbose=0),
                                   atol=1e-5)


def test_positions_beyond_2_24_are_refused_inside_float32_only():
    layer = PositionalEncoding(2**24 + 1, 8)
    with float32_only(), pytest.raises(ValueError, match=r"must be at most 16777216"):
        tf.function(layer, input_signature=[tf.TensorSpec((None, None, 8))]).get_concrete_function()
