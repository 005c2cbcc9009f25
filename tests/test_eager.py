"""Eager calls run each layer's body compiled once, with the bits, checks and errors of a graph."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import in_threads
from layer_cases import CASES, make_layer

from tf_posenc import layers


def traces(layer):
    return layer._eager_paths.traces


@pytest.mark.parametrize("name", CASES)
def test_an_eager_call_gives_the_bits_of_a_static_graph(name):
    _, _, inputs, call_arguments = CASES[name]
    layer = make_layer(layers, name)
    eager = keras.ops.convert_to_numpy(layer(inputs, **call_arguments))
    # A static shape lets Grappler fold the rows into a constant: the other end of the route.
    graph = tf.function(lambda x: layer(x, **call_arguments))(tf.constant(inputs)).numpy()
    np.testing.assert_array_equal(eager, graph)


def test_one_trace_serves_every_length_and_offset():
    encoding = layers.PositionalEncoding(4096, 32)
    for length, start in [(1, 0), (1, 1), (1, 4000), (5, 63), (64, 64), (300, 2000), (0, 17)]:
        encoding(tf.zeros((2, length, 32)), start_index=start)
    encoding(tf.zeros((3, 2, 32)), start_index=tf.constant(9, tf.int64))
    assert traces(encoding) == 1
    encoding(tf.zeros((1, 4, 32)), positions=np.array([3, 1, 4, 1]))
    encoding(tf.zeros((1, 9, 32)), positions=np.arange(9))
    assert traces(encoding) == 2  # positions given one by one are a second structure

    rotary = layers.RotaryEmbedding()
    for length, start in [(1, 0), (1, 70000), (32, 5), (200, 0)]:
        rotary(tf.zeros((1, length, 4, 64)), start_index=start)
    rotary(tf.zeros((2, 7, 3, 64)))  # another number of heads
    assert traces(rotary) == 1

    timesteps = layers.TimestepEmbedding(16)
    for batch in (1, 3, 50):
        timesteps(np.arange(batch))
    assert traces(timesteps) == 1


def test_eager_calls_inside_a_graph_leave_the_graph_as_it_was():
    layer = layers.PositionalEncoding(64, 8)
    layer(tf.zeros((1, 3, 8)))  # compiles the eager body
    graph = tf.function(lambda x: layer(x)).get_concrete_function(tf.TensorSpec((None, None, 8))).graph
    kinds = {operation.type for operation in graph.get_operations()}
    assert not kinds & {"PartitionedCall", "StatefulPartitionedCall"}, kinds
    assert "Sin" not in kinds and "Cos" not in kinds  # the exact route, not a float32 angle


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda layer: layer(tf.zeros((1, 3, 8)), start_index=tf.constant(30)),
            tf.errors.InvalidArgumentError,
            "longer than `position`",
        ),
        (
            lambda layer: layer(tf.zeros((1, 3, 8)), start_index=tf.constant(-1)),
            tf.errors.InvalidArgumentError,
            "`start_index` must be non-negative",
        ),
        (
            lambda layer: layer(tf.zeros((1, 3, 8)), positions=tf.constant([0, 1, 32])),
            tf.errors.InvalidArgumentError,
            "every position must be below position=32",
        ),
        (
            lambda layer: layer(tf.zeros((1, 3, 8)), start_index=30),
            ValueError,
            "start_index + seq_len must be at most position=32",
        ),
    ],
    ids=["tensor-start-too-far", "negative-tensor-start", "position-too-big", "python-start-too-far"],
)
def test_eager_and_graph_calls_raise_the_same_errors(call, error, message):
    layer = layers.PositionalEncoding(32, 8)
    for run in (call, tf.function(call)):
        with pytest.raises(error, match=message.replace("+", r"\+")):
            run(layer)
    layer(tf.zeros((1, 3, 8)), start_index=tf.constant(29))  # and the next call is served


def test_eager_gradients_flow_through_the_compiled_body():
    layer = layers.RotaryEmbedding()
    x = tf.Variable(tf.random.normal((2, 5, 2, 8)))
    with tf.GradientTape() as tape:
        total = tf.reduce_sum(layer(x, start_index=3) ** 2)
    # A rotation keeps lengths, so the gradient of the squared norm is 2x.
    np.testing.assert_allclose(tape.gradient(total, x).numpy(), 2 * x.numpy(), rtol=1e-5, atol=1e-5)


CHANGED_POLICY_CALLS = {
    "encoding": (
        lambda policy: layers.PositionalEncoding(64, 8, dtype=policy),
        lambda layer, x: layer(x[..., 0, :]),
    ),
    "rotary": (lambda policy: layers.RotaryEmbedding(dtype=policy), lambda layer, x: layer(x, start_index=3)),
    "rotary-rows": (lambda policy: layers.RotaryEmbedding(dtype=policy), lambda layer, x: layer.rows(x)[0]),
}


@pytest.mark.parametrize("name", CHANGED_POLICY_CALLS)
def test_a_changed_dtype_policy_gets_a_fresh_layers_bits_and_dtype(name):
    make, call = CHANGED_POLICY_CALLS[name]
    x = tf.random.stateless_normal((2, 5, 2, 8), seed=(1, 2))
    layer = make("float32")
    for policy in ("float32", "bfloat16", "mixed_float16", "float64", "float32"):
        layer.dtype_policy = policy
        got, fresh = call(layer, x), call(make(policy), x)
        assert got.dtype == fresh.dtype, policy
        np.testing.assert_array_equal(got.numpy(), fresh.numpy(), err_msg=policy)


@pytest.mark.slow
def test_at_most_sixteen_traced_functions_are_kept():
    layer = layers.PatchPositionalEncoding(None, d_model=16)
    grids = [(height, width) for height in range(1, 5) for width in range(1, 5)] + [(5, 1)]  # 17 grids
    outputs = {grid: layer(tf.zeros((1, *grid, 16))).numpy() for grid in grids}
    assert layer._eager_paths.kept_functions == 16
    # The grid used longest ago was let go: traced again, with the same bits.
    traces = layer._eager_paths.traces
    np.testing.assert_array_equal(layer(tf.zeros((1, 1, 1, 16))).numpy(), outputs[1, 1])
    assert layer._eager_paths.traces == traces + 1 and layer._eager_paths.kept_functions == 16


def test_threads_calling_one_layer_get_its_sequential_bits():
    layer, fresh = layers.PositionalEncoding(2**20, 64), layers.PositionalEncoding(2**20, 64)
    shapes = [(1, 1, 64), (2, 3, 64), (1, 1, 4, 64), (1, 70, 64)]  # structures to trace and share
    x = {shape: tf.random.stateless_normal(shape, seed=(3, len(shape))) for shape in shapes}
    calls = [(shapes[i % 4], start) for i, start in enumerate(range(0, 2**20 - 70, 2**20 // 97))]
    results, errors = in_threads(
        lambda call: layer(x[call[0]], start_index=call[1]).numpy(), [calls[i::4] for i in range(4)]
    )
    assert errors == [] and len(results) == len(calls)
    for (shape, start), got in results.items():
        np.testing.assert_array_equal(got, fresh(x[shape], start_index=start).numpy())
