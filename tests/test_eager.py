"""Eager calls run each layer's body compiled once, with the bits, checks and errors of a graph."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from layer_cases import CASES, make_layer

from tf_posenc import layers


def traces(layer):
    return layer._eager_functions.traces


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
