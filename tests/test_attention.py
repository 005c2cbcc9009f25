"""The position side of attention: rows computed once and applied to many tensors, masks from
positions, Llama 4's temperature, and every decoder layer's positions from a Hugging Face config."""

import json
import pathlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from bounds import FLOAT32_UNIT
from helpers import as_float64, in_threads
from hf_configs import CONFIGS

import tf_posenc
from tf_posenc import (
    RotaryEmbedding,
    _hf_attention,
    _hf_config,
    _hf_defaults,
    attention_mask,
    attention_temperature,
    hf_attention_layers,
    positions_from_mask,
    positions_from_segment_ids,
    segment_attention_mask,
)

# ---------------------------------------------------------------------------------------------
# Rows once, applied many times

ROPES = {
    "plain": {},
    "interleave": {"layout": "interleave"},
    "partial": {"partial_rotary_factor": 0.5},
    "yarn": {"rope_type": "yarn", "scaling_factor": 4.0, "original_max_position_embeddings": 64},
    "llama3": {"rope_type": "llama3", "scaling_factor": 8.0, "original_max_position_embeddings": 16},
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0 + 0.1 * j for j in range(16)],
        "long_factor": [2.0 + 0.3 * j for j in range(16)],
        "original_max_position_embeddings": 16,
        "max_position_embeddings": 64,
    },
    "bfloat16": {"dtype": "mixed_bfloat16"},
    "float64": {"dtype": "float64"},
    "heads-first": {"sequence_axis": 2, "feature_axis": -1},
}


def heads(rng, batch, steps, count, rope):
    shape = (batch, count, steps, 32) if rope.sequence_axis == 2 else (batch, steps, count, 32)
    return tf.constant(rng.normal(size=shape), rope.compute_dtype)


@pytest.mark.parametrize("name", ROPES)
def test_rows_rotate_queries_and_keys_with_the_bits_of_a_call(name):
    rng = np.random.default_rng(0)
    rope = RotaryEmbedding(**ROPES[name])
    queries, keys = heads(rng, 2, 5, 8, rope), heads(rng, 2, 5, 2, rope)
    # 14 + 5 crosses LongRoPE's switch at 16: the short factors before, the long ones after.
    for where in ({"start_index": 0}, {"start_index": 14}, {"positions": [[0, 1, 2, 3, 4], [0, 0, 5, 6, 7]]}):
        rows = rope.rows(queries, **where)
        for x in (queries, keys):
            np.testing.assert_array_equal(as_float64(rope(x, rows=rows)), as_float64(rope(x, **where)))
    cos, sin = rope.rows(queries, start_index=3)
    width = 16 if name == "partial" else 32
    assert cos.shape == sin.shape == (1, 5, width)
    assert cos.dtype == ("float64" if name == "float64" else "float32")  # the rotation's dtype


@pytest.mark.slow
def test_layers_rotating_at_one_start_in_a_graph_share_its_check_and_rows():
    # keras-hub's attention layers rotate queries and keys at one `cache_update_index`: in a
    # graph each call's check was a stateful Assert, so Grappler kept a copy of the rows per
    # call, and XLA, which does not merge them across keras-hub's `generate` loop, ran each.
    ropes = [RotaryEmbedding(max_wavelength=500000) for _ in range(4)]
    # What the shared rows depend on, changed one at a time: each needs rows of its own.
    others = [
        RotaryEmbedding(max_wavelength=10000),
        RotaryEmbedding(max_wavelength=500000, dtype="float64"),
        *(  # the same frequencies, two scales
            RotaryEmbedding(
                scaling_factor=4.0,
                rope_type="yarn",
                original_max_position_embeddings=64,
                attention_factor=factor,
            )
            for factor in (None, 1.0)
        ),
    ]
    encoding = tf_posenc.PositionalEncoding(position=8, d_model=8)  # a smaller limit: its own check
    q = tf.random.normal((1, 1, 2, 8), seed=1)

    def step(start):
        rotated = [rope(q, start_index=start) for rope in ropes for _ in range(2)]
        return (
            rotated,
            [other(q, start_index=start) for other in others],
            encoding(q[:, :, 0], start_index=start),
        )

    def counts(function):
        graph = tf.function(function).get_concrete_function(tf.TensorSpec([], tf.int32)).graph
        kinds = [op.type for op in graph.get_operations()]
        return kinds.count("Assert"), kinds.count("Round")  # a check; the rows' roundings

    def one_of_each(start):
        return [layer(q, start_index=start) for layer in ropes[:1] + others], encoding(
            q[:, :, 0], start_index=start
        )

    checks, roundings = counts(one_of_each)
    assert checks >= 2 and roundings > 0
    assert counts(step) == (checks, roundings)  # eight rotations, one check and one copy of the rows
    rotated, other_rotated, added = tf.function(step)(tf.constant(5))
    for index, rope in enumerate(ropes):
        np.testing.assert_array_equal(rotated[2 * index].numpy(), rope(q, start_index=5).numpy())
    for rotation, other in zip(other_rotated, others, strict=True):
        np.testing.assert_array_equal(rotation.numpy(), other(q, start_index=5).numpy())
    np.testing.assert_array_equal(added.numpy(), encoding(q[:, :, 0], start_index=5).numpy())
    # A start the rotations accept and the encoding does not is still refused by the encoding.
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"longer than `position`"):
        tf.function(step)(tf.constant(8))

    # One start outside a loop and inside its body (a graph of its own, which captures it),
    # and a start that moves with the loop: the bits of eager calls.
    def looped(start):
        def body(i, at_start, moving):
            return i + 1, ropes[1](q, start_index=start), ropes[2](q, start_index=start + i)

        return ropes[0](q, start_index=start), *tf.while_loop(lambda i, *_: i < 3, body, (0, q, q))[1:]

    outside, at_start, moving = tf.function(looped)(tf.constant(5))
    np.testing.assert_array_equal(outside.numpy(), ropes[0](q, start_index=5).numpy())
    np.testing.assert_array_equal(at_start.numpy(), ropes[1](q, start_index=5).numpy())
    np.testing.assert_array_equal(moving.numpy(), ropes[2](q, start_index=7).numpy())


@pytest.mark.slow
def test_graphs_traced_in_threads_keep_their_own_shared_rows():
    # Each thread traces its own graphs (the default graph is per thread): the rows one shares
    # among its layers are never another graph's.
    ropes = [RotaryEmbedding(max_wavelength=10000 * (1 + index % 2)) for index in range(4)]
    q = tf.random.normal((1, 1, 2, 8), seed=2)

    def traced(item):
        offset, start = item
        step = tf.function(lambda start: [rope(q, start_index=start + offset) for rope in ropes])
        return [rotated.numpy() for rotated in step(tf.constant(start))]

    work = [[(thread, start) for start in (70, 2**20)] for thread in range(4)]
    results, errors = in_threads(traced, work)
    assert errors == []
    for (offset, start), rotated in results.items():
        for rope, got in zip(ropes, rotated, strict=True):
            np.testing.assert_array_equal(got, rope(q, start_index=start + offset).numpy())


@pytest.mark.parametrize("name", ["plain", "longrope", "bfloat16"])
@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_rows_in_a_compiled_step_of_unknown_length_have_the_bits_of_a_call(name, jit_compile):
    rope = RotaryEmbedding(**ROPES[name])
    spec = tf.TensorSpec((1, None, 8, 32), rope.compute_dtype)

    @tf.function(input_signature=[spec, tf.TensorSpec((), tf.int32)], jit_compile=jit_compile)
    def step(x, index):
        return rope(x, rows=rope.rows(x, start_index=index)), rope(x, start_index=index)

    rng = np.random.default_rng(1)
    for index, steps in ((0, 7), (15, 1), (16, 1), (40, 3)):
        with_rows, called = step(tf.constant(rng.normal(size=(1, steps, 8, 32)), rope.compute_dtype), index)
        np.testing.assert_array_equal(as_float64(with_rows), as_float64(called))


def test_rows_of_multimodal_positions_rotate_like_a_call():
    rope = RotaryEmbedding(mrope_section=[4, 6, 6], mrope_interleaved=True)
    ids, _ = tf_posenc.mrope_positions([[0, 0, 1, 1, 1, 1, 0]], image_grid_thw=[[1, 4, 4]])
    x = tf.constant(np.random.default_rng(2).normal(size=(1, 7, 4, 32)), "float32")
    rows = rope.rows(x, positions=ids)
    np.testing.assert_array_equal(rope(x, rows=rows).numpy(), rope(x, positions=ids).numpy())


def test_rows_are_transformers_position_embeddings():
    # transformers' `cos, sin`: each feature's pair angle (the half layout repeats the per-pair
    # values), times `attention_scaling`; float64 angles here, rounded once.
    rope = RotaryEmbedding(rope_type="yarn", scaling_factor=4.0, original_max_position_embeddings=64)
    cos, sin = rope.rows(np.zeros((1, 3, 2, 32), "float32"), start_index=1000)
    angles = np.arange(1000, 1003)[:, None] * rope.frequencies(32)[None]
    angles = np.concatenate([angles, angles], axis=-1)
    np.testing.assert_array_equal(cos.numpy()[0], (np.cos(angles) * rope.attention_scaling).astype("float32"))
    np.testing.assert_array_equal(sin.numpy()[0], (np.sin(angles) * rope.attention_scaling).astype("float32"))


def test_bad_rows_are_clear_errors():
    rope = RotaryEmbedding(partial_rotary_factor=0.5)
    x = np.zeros((2, 5, 4, 32), "float32")
    rows = rope.rows(x)
    with pytest.raises(ValueError, match=r"Pass `rows` alone"):
        rope(x, rows=rows, start_index=3)
    with pytest.raises(ValueError, match=r"Pass `rows` alone"):
        rope(x, rows=rows, positions=np.zeros((5,), "int32"))
    with pytest.raises(ValueError, match=r"`rows` must be the `\(cos, sin\)` pair"):
        rope(x, rows=rows[0])
    with pytest.raises(
        ValueError, match=r"each \(batch or 1, seq_len, 16\).*Received: cos with shape \(1, 5, 32\)"
    ):
        rope(x, rows=RotaryEmbedding().rows(x))
    with pytest.raises(ValueError, match=r"Received: cos with shape \(1, 4, 16\)"):
        rope(x, rows=rope.rows(x[:, :4]))
    with pytest.raises(ValueError, match=r"Received: cos with shape \(3, 5, 16\)"):
        rope(x, rows=rope.rows(np.zeros((3, 5, 4, 32), "float32"), positions=np.zeros((3, 5), "int32")))
    with pytest.raises(TypeError, match=r"`rows\(\)` computes rows of tensors"):
        rope.rows(keras.Input((5, 4, 32)))
    with pytest.raises(TypeError, match=r"Received: cos.dtype=int32"):
        rope(x, rows=(np.zeros((1, 5, 16), "int32"), rows[1]))

    @tf.function(input_signature=[tf.TensorSpec((1, None, 4, 32)), tf.TensorSpec((1, None, 16))] * 1)
    def rotate(x, table):
        return rope(x, rows=(table, table))

    with pytest.raises(tf.errors.InvalidArgumentError, match=r"seq_len differs"):
        rotate(np.zeros((1, 5, 4, 32), "float32"), np.zeros((1, 4, 16), "float32"))


# ---------------------------------------------------------------------------------------------
# Masks from positions

# Printed by transformers 5.24.0, `masking_utils`: each mask function evaluated at every
# (q_idx, kv_idx) of a sequence from 0 (row q, column kv; 1 = attend).
TRANSFORMERS_MASKS = {
    "causal_mask_function": ["100000", "110000", "111000", "111100", "111110", "111111"],
    "sliding_window_causal_mask_function(3)": [
        "10000000", "11000000", "11100000", "01110000", "00111000", "00011100", "00001110", "00000111",
    ],
    "sliding_window_bidirectional_mask_function(2)": [
        "1110000", "1111000", "1111100", "0111110", "0011111", "0001111", "0000111",
    ],
    "chunked_causal_mask_function(3, left_padding=0)": [
        "10000000", "11000000", "11100000", "00010000", "00011000", "00011100", "00000010", "00000011",
    ],
    "chunked_causal_mask_function(3, left_padding=2)": [
        "10000000", "11000000", "00100000", "00110000", "00111000", "00000100", "00000110", "00000111",
    ],
    # Gemma 3's bidirectional mode for sliding_window=6 (its config turns it into 6 // 2 + 1).
    "gemma3 _bidirectional_window_overlay(4)": [
        "11110000", "11111000", "11111100", "11111110", "01111111", "00111111", "00011111", "00001111",
    ],
}  # fmt: skip


def printed(name):
    return np.array([[char == "1" for char in row] for row in TRANSFORMERS_MASKS[name]])


def reference_mask(
    q, k, causal=True, window=None, chunk=None, q_segments=None, k_segments=None, key_mask=None
):
    """transformers' rules (masking_utils) restated in NumPy on positions `(batch, q)`, `(batch, k)`."""
    q, k = np.asarray(q)[:, :, None].astype(np.int64), np.asarray(k)[:, None, :].astype(np.int64)
    keep = (k <= q) if causal else np.ones(np.broadcast_shapes(q.shape, k.shape), bool)
    if window is not None:
        keep &= (k > q - window) if causal else (np.abs(q - k) <= window)
    if chunk is not None:
        keep &= k // chunk == q // chunk
    if q_segments is not None:
        qs, ks = np.asarray(q_segments)[:, :, None], np.asarray(k_segments)[:, None, :]
        keep &= (qs == ks) & (qs != 0) & (ks != 0)
    if key_mask is not None:
        keep &= np.asarray(key_mask, bool)[:, None, :]
    return keep


def test_masks_are_the_masks_transformers_prints():
    def grid(length, **kwargs):
        return attention_mask(np.arange(length), np.arange(length), **kwargs).numpy()[0]

    np.testing.assert_array_equal(grid(6), printed("causal_mask_function"))
    np.testing.assert_array_equal(
        grid(8, sliding_window=3), printed("sliding_window_causal_mask_function(3)")
    )
    np.testing.assert_array_equal(
        grid(7, causal=False, sliding_window=2), printed("sliding_window_bidirectional_mask_function(2)")
    )
    np.testing.assert_array_equal(
        grid(8, chunk_size=3), printed("chunked_causal_mask_function(3, left_padding=0)")
    )
    np.testing.assert_array_equal(
        grid(8, causal=False, sliding_window=6 // 2), printed("gemma3 _bidirectional_window_overlay(4)")
    )
    # Left padding: positions from the mask count from the first real token, as transformers'
    # chunks do; the padding keys are left out by the mask, and their query rows are not used.
    padding = np.array([[0, 0, 1, 1, 1, 1, 1, 1]])
    positions = positions_from_mask(padding)
    mask = attention_mask(positions, positions, chunk_size=3, key_mask=padding).numpy()[0]
    expected = printed("chunked_causal_mask_function(3, left_padding=2)") & padding.astype(bool)
    np.testing.assert_array_equal(mask[2:], expected[2:])


@pytest.mark.parametrize("window", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_sliding_window_boundaries(window, causal):
    # A cache of 12 slots, queries at 5 .. 7: every key distance on both sides of W.
    queries, keys = np.arange(5, 8)[None], np.arange(12)[None]
    mask = attention_mask(queries, keys, causal=causal, sliding_window=window).numpy()
    np.testing.assert_array_equal(mask, reference_mask(queries, keys, causal, window))
    distance = queries[0, :, None] - keys[0, None, :]
    kept = mask[0]
    if causal:
        assert kept[distance == window - 1].all() and not kept[distance == window].any()
        assert not kept[distance < 0].any()
    else:
        assert kept[np.abs(distance) == window].all() and not kept[np.abs(distance) == window + 1].any()


@pytest.mark.parametrize("chunk", [1, 3, 4, 8])
def test_chunks_end_at_their_edges(chunk):
    positions = np.arange(17)[None]
    mask = attention_mask(positions, positions, chunk_size=chunk).numpy()
    np.testing.assert_array_equal(mask, reference_mask(positions, positions, chunk=chunk))
    edge = chunk * 2  # the first position of the third chunk sees only its own chunk
    assert mask[0, edge, edge] and not mask[0, edge, edge - 1]
    if chunk > 1:
        assert mask[0, edge - 1, edge - chunk] and not mask[0, edge - 1, edge - chunk - 1]


def test_keras_multi_head_attentions_window_is_one_narrower_than_transformers():
    # Keras 3.15's `MultiHeadAttention(sliding_window=W)` keeps |q - k| < W; ours, |q - k| <= W.
    x = np.random.default_rng(5).normal(size=(2, 9, 8)).astype("float32")
    windowed = keras.layers.MultiHeadAttention(2, 4, sliding_window=3)
    masked = keras.layers.MultiHeadAttention(2, 4)
    expected = windowed(x, x)
    masked(x, x)
    masked.set_weights(windowed.get_weights())
    band = attention_mask(np.arange(9), np.arange(9), causal=False, sliding_window=2)
    np.testing.assert_allclose(masked(x, x, attention_mask=band).numpy(), expected.numpy(), atol=1e-6)
    wider = attention_mask(np.arange(9), np.arange(9), causal=False, sliding_window=3)
    assert np.abs(masked(x, x, attention_mask=wider).numpy() - expected.numpy()).max() > 1e-3


def test_a_cache_filled_to_its_index_packing_and_padding_take_one_rule():
    rng = np.random.default_rng(3)
    slots = np.arange(10)
    # Decoding step 6 over a cache of 10 slots: only the slots written so far.
    written = slots <= 6
    mask = attention_mask([[6]], slots, sliding_window=4, key_mask=written).numpy()
    np.testing.assert_array_equal(mask, reference_mask([[6]], slots[None], window=4, key_mask=written[None]))
    # A ring buffer's unused slots hold -1: positions the mask leaves out are not checked.
    ring = np.where(written, slots, -1)
    np.testing.assert_array_equal(
        attention_mask([[6]], ring, sliding_window=4, key_mask=written).numpy(), mask
    )
    graph = tf.function(lambda keys, kept: attention_mask([[6]], keys, sliding_window=4, key_mask=kept))
    np.testing.assert_array_equal(graph(ring, written).numpy(), mask)
    with pytest.raises(tf.errors.InvalidArgumentError, match="`key_positions` must be non-negative"):
        attention_mask([[6]], ring, key_mask=np.ones(10, bool))  # a slot it keeps is checked
    # Packed documents: the positions restart and the segments keep attention inside each.
    segments = np.array([[1, 1, 1, 2, 2, 2, 2, 0], [3, 3, 3, 3, 3, 1, 1, 1]], "int32")
    positions = positions_from_segment_ids(segments)
    mask = attention_mask(
        positions, positions, query_segment_ids=segments, key_segment_ids=segments, sliding_window=2
    ).numpy()
    np.testing.assert_array_equal(
        mask, reference_mask(positions.numpy(), positions.numpy(), True, 2, None, segments, segments)
    )
    np.testing.assert_array_equal(
        attention_mask(positions, positions, query_segment_ids=segments, key_segment_ids=segments).numpy(),
        segment_attention_mask(segments, causal=True).numpy(),
    )
    # Random rules at once, batched against unbatched positions.
    for _ in range(20):
        q = np.sort(rng.integers(0, 40, (2, 5)), axis=1)
        k = rng.integers(0, 40, (12,))
        key_mask = rng.integers(0, 2, (2, 12)).astype(bool)
        window, chunk = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        causal = bool(rng.integers(0, 2))
        got = attention_mask(q, k, causal=causal, sliding_window=window, chunk_size=chunk, key_mask=key_mask)
        expected = reference_mask(q, k[None], causal, window, chunk, key_mask=key_mask)
        np.testing.assert_array_equal(got.numpy(), expected)


def test_masks_in_graphs_of_unknown_sizes_and_under_xla():
    specs = [
        tf.TensorSpec((None, None), tf.int32),
        tf.TensorSpec((None,), tf.int32),
        tf.TensorSpec((None,), tf.bool),
    ]
    for jit_compile in (False, True):

        @tf.function(input_signature=specs, jit_compile=jit_compile)
        def mask(q, k, written):
            return attention_mask(q, k, sliding_window=3, chunk_size=8, key_mask=written)

        for steps, slots in ((1, 16), (5, 16), (3, 7)):
            q = np.arange(slots - steps, slots)[None].astype("int32")
            k = np.arange(slots).astype("int32")
            written = k < slots - 1
            np.testing.assert_array_equal(
                mask(q, k, written).numpy(), reference_mask(q, k[None], True, 3, 8, key_mask=written[None])
            )


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: attention_mask([0, 1], [0, 1], sliding_window=0),
            ValueError,
            r"`sliding_window` must be a positive",
        ),
        (
            lambda: attention_mask([0, 1], [0, 1], sliding_window=-2),
            ValueError,
            r"`sliding_window` must be a positive",
        ),
        (
            lambda: attention_mask([0, 1], [0, 1], chunk_size=0),
            ValueError,
            r"`chunk_size` must be a positive",
        ),
        (lambda: attention_mask([0, 1], [0, 1], causal="yes"), ValueError, r"`causal` must be a boolean"),
        (
            lambda: attention_mask(np.zeros((1, 2, 3), "int32"), [0]),
            ValueError,
            r"`query_positions` must have shape \(seq_len,\) or \(batch, seq_len\)",
        ),
        (
            lambda: attention_mask(np.zeros((2, 3), "int32"), np.zeros((3, 4), "int32")),
            ValueError,
            r"one batch size.*query_positions with batch 2, key_positions with batch 3",
        ),
        (
            lambda: attention_mask([0, 1], [0, 1, 2], key_mask=[1, 1]),
            ValueError,
            r"`key_mask` must have the shape of `key_positions`",
        ),
        (
            lambda: attention_mask([[0, 1]], [[0, 1]], query_segment_ids=[[1, 1]]),
            ValueError,
            r"Pass `query_segment_ids` and `key_segment_ids` together",
        ),
        (
            lambda: attention_mask(
                [[0, 1]], [[0, 1]], query_segment_ids=[[1, 1, 1]], key_segment_ids=[[1, 1]]
            ),
            ValueError,
            r"`query_segment_ids` must have the shape of `query_positions`",
        ),
        (
            lambda: attention_mask([0.5], [0]),
            tf.errors.InvalidArgumentError,
            r"`query_positions` given as floats",
        ),
        (
            lambda: attention_mask([-1], [0]),
            tf.errors.InvalidArgumentError,
            r"`query_positions` must be non-negative",
        ),
        (
            lambda: attention_mask([[0]], [[0]], query_segment_ids=[[-2]], key_segment_ids=[[1]]),
            tf.errors.InvalidArgumentError,
            r"`query_segment_ids` must be non-negative",
        ),
        (
            lambda: positions_from_segment_ids([[1, 1, -2, -2]]),
            tf.errors.InvalidArgumentError,
            r"`segment_ids` must be non-negative",
        ),
        (
            lambda: segment_attention_mask([[1, -2]]),
            tf.errors.InvalidArgumentError,
            r"`segment_ids` must be non-negative",
        ),
    ],
    ids=[
        "window-zero",
        "window-negative",
        "chunk-zero",
        "causal-not-bool",
        "positions-rank-3",
        "batches-differ",
        "key-mask-length",
        "one-segment-ids",
        "segment-ids-shape",
        "fractional-positions",
        "negative-positions",
        "negative-query-segments",
        "negative-segments-positions",
        "negative-segments-mask",
    ],
)
def test_bad_mask_arguments_are_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_negative_segment_ids_are_refused_in_graphs_and_functional_models():
    graph = tf.function(positions_from_segment_ids, input_signature=[tf.TensorSpec((None, None), tf.int32)])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`segment_ids` must be non-negative"):
        graph(tf.constant([[1, -2]]))
    segments = keras.Input((None,), dtype="int32")
    model = keras.Model(segments, positions_from_segment_ids(segments))
    np.testing.assert_array_equal(model(np.array([[1, 1, 2]])).numpy(), [[0, 1, 0]])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`segment_ids` must be non-negative"):
        model(np.array([[1, -2, 2]]))


# ---------------------------------------------------------------------------------------------
# Llama 4's temperature

# Printed by transformers 5.24.0 (torch 2.14.1): `Llama4TextAttention.forward`'s
# `torch.log1p(torch.floor((positions.float() + 1.0) / floor_scale)) * attn_scale + 1.0` with
# floor_scale=4096, attn_scale=0.1.
TRANSFORMERS_TEMPERATURE = {
    0: 1.0, 1: 1.0, 4094: 1.0, 4095: 1.06931471824646, 4096: 1.06931471824646, 8190: 1.06931471824646,
    8191: 1.1098612546920776, 8192: 1.1098612546920776, 100000: 1.3218876123428345,
    2**24 - 1: 1.8318010568618774,
}  # fmt: skip


def test_attention_temperature_is_llama4s():
    positions = np.array(list(TRANSFORMERS_TEMPERATURE), "int32")
    scales = attention_temperature(positions, 4096, 0.1).numpy()
    assert scales.dtype == np.float32
    np.testing.assert_array_equal(scales, np.array(list(TRANSFORMERS_TEMPERATURE.values()), "float32"))
    # Against the formula in float64, past 2**24 too, where transformers' float32 positions round.
    positions = np.array([0, 8191, 8192, 2**24 + 1, 2**31 - 2, 2**31 - 3], "int64")
    exact = np.log1p(np.floor((positions + 1) / 8192)) * 0.1 + 1
    got = attention_temperature(positions.astype("int32"), 8192, 0.1).numpy()
    assert np.abs(got - exact).max() <= 2 * FLOAT32_UNIT
    np.testing.assert_allclose(
        attention_temperature([[5, 9]], 2.5, 1.0).numpy(), np.log1p([[2, 4]]) + 1, rtol=1e-7
    )
    with pytest.raises(ValueError, match=r"`floor_scale` must be a finite number greater than 0"):
        attention_temperature([0], 0, 0.1)


# transformers 5.24's `get_llama_4_attn_scale(position_ids, 0.1, 16384)`
# (models/ministral3/modeling_ministral3.py), int64 position ids, printed.
MINISTRAL3_TEMPERATURE = {0: 1.0, 16383: 1.0, 16384: 1.06931471824646, 3 * 16384 - 1: 1.1098612546920776,
                          3 * 16384: 1.13862943649292, 2**20: 1.4174387454986572,
                          2**31 - 2: 2.1783509254455566}  # fmt: skip


def test_attention_temperature_with_offset_0_is_ministral3s():
    positions = np.array(list(MINISTRAL3_TEMPERATURE), "int32")
    got = attention_temperature(positions, 16384, 0.1, offset=0).numpy()
    assert got.dtype == np.float32
    printed = np.array(list(MINISTRAL3_TEMPERATURE.values()))
    np.testing.assert_allclose(got[:-1], printed[:-1], rtol=0, atol=2 * FLOAT32_UNIT)
    exact = np.log1p(np.floor(positions.astype(np.int64) / 16384)) * 0.1 + 1
    assert np.abs(got - exact).max() <= 2 * FLOAT32_UNIT
    # transformers divides in float32: (2**31 - 2) / 16384 rounds up to 131072, one step on.
    assert printed[-1] == pytest.approx(np.log1p(131072) * 0.1 + 1, abs=2 * FLOAT32_UNIT)
    # A fractional floor_scale takes the float route; offset 0 and 1 differ by one position.
    np.testing.assert_allclose(
        attention_temperature([[4, 9]], 2.5, 1.0, offset=0).numpy(), np.log1p([[1, 3]]) + 1
    )
    assert attention_temperature([8191], 8192, 0.1, offset=0).numpy()[0] == 1.0
    assert attention_temperature([8191], 8192, 0.1).numpy()[0] > 1.0
    plan = hf_attention_layers({**TINY, **PLAN_CONFIGS["ministral3"]})
    assert all(entry.temperature == (16384, 0.1, 0, False) for entry in plan)
    # The plan's record, whole or unpacked as 0.7's pages did, gives the same scales.
    by_record = attention_temperature(positions, plan[0].temperature).numpy()
    np.testing.assert_array_equal(by_record, got)
    np.testing.assert_array_equal(attention_temperature(positions, *plan[0].temperature).numpy(), got)
    with pytest.raises(ValueError, match="gives `attn_scale` too"):
        attention_temperature(positions, plan[0].temperature, 0.1)
    for offset in (2, True, -1):
        with pytest.raises(ValueError, match=r"`offset` must be 0 or 1"):
            attention_temperature([0], 8192, 0.1, offset=offset)


def test_attention_temperature_follows_transformers_cache_slots_not_the_tokens_positions():
    # transformers 5.24's `Llama4TextAttention.forward`: `positions = arange(seq_len) +
    # past_seen_tokens`, the same for every row, left padding counted; restated in float64.
    padding = np.array([[1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1]])
    slots = np.arange(6) + 3  # a prompt of 3 written before: the cache's next slots
    transformers = np.log1p(np.floor((slots + 1.0) / 2)) * 0.1 + 1
    by_slots = attention_temperature(slots, 2, 0.1).numpy()
    assert np.abs(by_slots - transformers).max() <= 2 * FLOAT32_UNIT
    by_tokens = attention_temperature(positions_from_mask(padding) + 3, 2, 0.1).numpy()
    np.testing.assert_array_equal(by_tokens[0], by_slots)  # an unpadded row: the same
    assert np.abs(by_tokens[1, 3:] - transformers[3:]).max() > 0.02  # a padded one: off


# ---------------------------------------------------------------------------------------------
# Every decoder layer's positions from its config

# DeepSeek-V3's multi-head latent attention and experts, as small as its config class takes them.
DEEPSEEK_TINY = {"model_type": "deepseek_v3", "num_hidden_layers": 2, "q_lora_rank": 16, "kv_lora_rank": 16,
                 "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 8, "n_routed_experts": 2,
                 "num_experts_per_tok": 1, "moe_intermediate_size": 16, "first_k_dense_replace": 1,
                 "n_group": 1, "topk_group": 1}  # fmt: skip
TINY = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 32, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 16}  # fmt: skip
PLAN_CONFIGS = {
    "llama": dict(model_type="llama", num_hidden_layers=2),
    "mistral": dict(model_type="mistral", num_hidden_layers=2, sliding_window=6),
    "mistral-none": dict(model_type="mistral", num_hidden_layers=2, sliding_window=None),
    "mistral-default": dict(model_type="mistral", num_hidden_layers=2),
    "qwen2-off": dict(
        model_type="qwen2",
        num_hidden_layers=4,
        use_sliding_window=False,
        sliding_window=6,
        max_window_layers=2,
    ),
    "qwen2-on": dict(
        model_type="qwen2",
        num_hidden_layers=4,
        use_sliding_window=True,
        sliding_window=6,
        max_window_layers=2,
    ),
    "qwen2-listed-off": dict(
        model_type="qwen2",
        num_hidden_layers=3,
        use_sliding_window=False,
        sliding_window=6,
        layer_types=["full_attention", "sliding_attention", "full_attention"],
    ),
    "gemma2": dict(model_type="gemma2", num_hidden_layers=4, sliding_window=6),
    "gemma3": dict(model_type="gemma3_text", num_hidden_layers=7, sliding_window=6, sliding_window_pattern=3),
    "gemma3-default": dict(model_type="gemma3_text", num_hidden_layers=7),
    "gpt_oss": dict(
        model_type="gpt_oss",
        num_hidden_layers=4,
        num_local_experts=2,
        num_experts_per_tok=1,
        sliding_window=6,
    ),
    "cohere2": dict(model_type="cohere2", num_hidden_layers=5, sliding_window=6),
    "llama4": dict(
        model_type="llama4_text",
        num_hidden_layers=8,
        attention_chunk_size=16,
        num_local_experts=2,
        intermediate_size_mlp=32,
    ),
    "llama4-listed": dict(
        model_type="llama4_text",
        num_hidden_layers=4,
        no_rope_layers=[1, 0, 0, 1],
        attention_chunk_size=16,
        attn_temperature_tuning=True,
        floor_scale=4,
        attn_scale=0.5,
        num_local_experts=2,
        intermediate_size_mlp=32,
    ),
    "llama4-nochunk": dict(
        model_type="llama4_text",
        num_hidden_layers=4,
        attention_chunk_size=None,
        attn_temperature_tuning=False,
        num_local_experts=2,
        intermediate_size_mlp=32,
    ),
    "smollm3-on": dict(model_type="smollm3", num_hidden_layers=8, use_sliding_window=True, sliding_window=6),
    "smollm3-off": dict(
        model_type="smollm3",
        num_hidden_layers=4,
        use_sliding_window=False,
        sliding_window=6,
        no_rope_layers=[1, 1, 0, 1],
    ),
    "phi3": dict(model_type="phi3", num_hidden_layers=2, sliding_window=6),
    "mixtral": dict(
        model_type="mixtral",
        num_hidden_layers=2,
        sliding_window=6,
        num_local_experts=2,
        num_experts_per_tok=1,
    ),
    "qwen2_moe-on": dict(
        model_type="qwen2_moe",
        num_hidden_layers=5,
        use_sliding_window=True,
        sliding_window=6,
        max_window_layers=3,
        num_experts=2,
        num_experts_per_tok=1,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
    ),
    "qwen2_moe-off": dict(
        model_type="qwen2_moe",
        num_hidden_layers=3,
        use_sliding_window=False,
        sliding_window=6,
        num_experts=2,
        num_experts_per_tok=1,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
    ),
    "qwen3_moe-on": dict(
        model_type="qwen3_moe",
        num_hidden_layers=2,
        use_sliding_window=True,
        sliding_window=6,
        num_experts=2,
        num_experts_per_tok=1,
        moe_intermediate_size=32,
    ),
    "qwen3_moe-off": dict(
        model_type="qwen3_moe",
        num_hidden_layers=2,
        use_sliding_window=False,
        sliding_window=6,
        num_experts=2,
        num_experts_per_tok=1,
        moe_intermediate_size=32,
    ),
    "gemma3n": {
        "model_type": "gemma3n_text",
        "num_hidden_layers": 10,
        "num_kv_shared_layers": 4,
        "sliding_window": 6,
        "vocab_size_per_layer_input": 32,
        "hidden_size_per_layer_input": 8,
        "laurel_rank": 4,
        "altup_num_inputs": 2,
    },
    "gemma3n-default": {
        "model_type": "gemma3n_text",
        "num_hidden_layers": 20,
        "vocab_size_per_layer_input": 32,
        "hidden_size_per_layer_input": 8,
        "laurel_rank": 4,
        "altup_num_inputs": 2,
    },
    "ministral3": {
        "model_type": "ministral3",
        "num_hidden_layers": 2,
        "rope_parameters": CONFIGS["ministral-3"]["rope_parameters"],
    },
    "ministral3-default": {"model_type": "ministral3", "num_hidden_layers": 2},
    "deepseek_v3": {
        **DEEPSEEK_TINY,
        "max_position_embeddings": 4096,
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
    },
    "kimi-k2": {
        **DEEPSEEK_TINY,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 50000.0,
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 1.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
    },
    "deepseek_v3-default": {
        **DEEPSEEK_TINY,
    },
    "glm4": {"model_type": "glm4", "num_hidden_layers": 2},
    "glm4_moe": {
        "model_type": "glm4_moe",
        "num_hidden_layers": 2,
        "n_routed_experts": 2,
        "num_experts_per_tok": 1,
        "moe_intermediate_size": 16,
        "first_k_dense_replace": 1,
        "n_group": 1,
        "topk_group": 1,
    },
    "hunyuan": {
        "model_type": "hunyuan_v1_dense",
        "num_hidden_layers": 2,
        "rope_parameters": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 1.0, "alpha": 1000.0},
    },
    "gemma3-scaling": {"model_type": "gemma3_text", "num_hidden_layers": 2, "query_pre_attn_scalar": 144},
    "gpt_oss-default": {
        "model_type": "gpt_oss",
        "num_hidden_layers": 4,
        "num_local_experts": 2,
        "num_experts_per_tok": 1,
    },
}
# Printed by transformers 5.24.0: `AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY,
# **config))`, per decoder layer `[rotates, sliding_window, chunk_size, temperature, scaling,
# kv_shared_layer_index]` read from its attention module: `use_rope`, `sliding_window`,
# `config.attention_chunk_size` on "chunked_attention" layers, `[floor_scale, attn_scale, 1]`
# where `attn_temperature_tuning` and no rope (Llama 4), `[original_max_position_embeddings,
# llama_4_scaling_beta, 0]` of `config.rope_parameters` (Ministral 3's
# `get_llama_4_attn_scale`), `scaling`, and for Gemma 3n's "reuse" layers of
# `config.kv_sharing_modes` the last "store" layer of their type. Mistral's mask takes
# `config.sliding_window` for every layer; Cohere2 rotates where it slides.
TRANSFORMERS_PLANS = {
    "llama": [[True, None, None, None, 0.25, None], [True, None, None, None, 0.25, None]],
    "mistral": [[True, 6, None, None, 0.25, None], [True, 6, None, None, 0.25, None]],
    "mistral-none": [[True, None, None, None, 0.25, None], [True, None, None, None, 0.25, None]],
    "mistral-default": [[True, 4096, None, None, 0.25, None], [True, 4096, None, None, 0.25, None]],
    "qwen2-off": [
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
    ],
    "qwen2-on": [
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, 6, None, None, 0.25, None],
        [True, 6, None, None, 0.25, None],
    ],
    "qwen2-listed-off": [
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
    ],
    "gemma2": [
        [True, 6, None, None, 0.0625, None],
        [True, None, None, None, 0.0625, None],
        [True, 6, None, None, 0.0625, None],
        [True, None, None, None, 0.0625, None],
    ],
    "gemma3": [
        [True, 6, None, None, 0.0625, None],
        [True, 6, None, None, 0.0625, None],
        [True, None, None, None, 0.0625, None],
        [True, 6, None, None, 0.0625, None],
        [True, 6, None, None, 0.0625, None],
        [True, None, None, None, 0.0625, None],
        [True, 6, None, None, 0.0625, None],
    ],
    "gemma3-default": [
        [True, 4096, None, None, 0.0625, None],
        [True, 4096, None, None, 0.0625, None],
        [True, 4096, None, None, 0.0625, None],
        [True, 4096, None, None, 0.0625, None],
        [True, 4096, None, None, 0.0625, None],
        [True, None, None, None, 0.0625, None],
        [True, 4096, None, None, 0.0625, None],
    ],
    "gpt_oss": [
        [True, 6, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, 6, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
    ],
    "cohere2": [
        [True, 6, None, None, 0.25, None],
        [True, 6, None, None, 0.25, None],
        [True, 6, None, None, 0.25, None],
        [False, None, None, None, 0.25, None],
        [True, 6, None, None, 0.25, None],
    ],
    "llama4": [
        [True, None, 16, None, 0.25, None],
        [True, None, 16, None, 0.25, None],
        [True, None, 16, None, 0.25, None],
        [False, None, None, [8192, 0.1, 1], 0.25, None],
        [True, None, 16, None, 0.25, None],
        [True, None, 16, None, 0.25, None],
        [True, None, 16, None, 0.25, None],
        [False, None, None, [8192, 0.1, 1], 0.25, None],
    ],
    "llama4-listed": [
        [True, None, 16, None, 0.25, None],
        [False, None, None, [4, 0.5, 1], 0.25, None],
        [False, None, None, [4, 0.5, 1], 0.25, None],
        [True, None, 16, None, 0.25, None],
    ],
    "llama4-nochunk": [
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [False, None, None, None, 0.25, None],
    ],
    "smollm3-on": [
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [False, 6, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [False, 6, None, None, 0.25, None],
    ],
    "smollm3-off": [
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [False, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
    ],
    "phi3": [[True, 6, None, None, 0.25, None], [True, 6, None, None, 0.25, None]],
    "mixtral": [[True, 6, None, None, 0.25, None], [True, 6, None, None, 0.25, None]],
    "qwen2_moe-on": [
        [True, 6, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, 6, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
    ],
    "qwen2_moe-off": [
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
    ],
    "qwen3_moe-on": [[True, 6, None, None, 0.25, None], [True, 6, None, None, 0.25, None]],
    "qwen3_moe-off": [[True, None, None, None, 0.25, None], [True, None, None, None, 0.25, None]],
    "gemma3n": [
        [True, 6, None, None, 1.0, None],
        [True, 6, None, None, 1.0, None],
        [True, 6, None, None, 1.0, None],
        [True, 6, None, None, 1.0, None],
        [True, None, None, None, 1.0, None],
        [True, 6, None, None, 1.0, None],
        [True, 6, None, None, 1.0, 5],
        [True, 6, None, None, 1.0, 5],
        [True, 6, None, None, 1.0, 5],
        [True, None, None, None, 1.0, 4],
    ],
    "gemma3n-default": [
        [True, 512, None, None, 1.0, None],
        [True, 512, None, None, 1.0, None],
        [True, 512, None, None, 1.0, None],
        [True, 512, None, None, 1.0, None],
        [True, None, None, None, 1.0, None],
        [True, 512, None, None, 1.0, 3],
        [True, 512, None, None, 1.0, 3],
        [True, 512, None, None, 1.0, 3],
        [True, 512, None, None, 1.0, 3],
        [True, None, None, None, 1.0, 4],
        [True, 512, None, None, 1.0, 3],
        [True, 512, None, None, 1.0, 3],
        [True, 512, None, None, 1.0, 3],
        [True, 512, None, None, 1.0, 3],
        [True, None, None, None, 1.0, 4],
        [True, 512, None, None, 1.0, 3],
        [True, 512, None, None, 1.0, 3],
        [True, 512, None, None, 1.0, 3],
        [True, 512, None, None, 1.0, 3],
        [True, None, None, None, 1.0, 4],
    ],
    "ministral3": [
        [True, None, None, [16384, 0.1, 0], 0.25, None],
        [True, None, None, [16384, 0.1, 0], 0.25, None],
    ],
    "ministral3-default": [
        [True, None, None, [16384, 0.1, 0], 0.25, None],
        [True, None, None, [16384, 0.1, 0], 0.25, None],
    ],
    "deepseek_v3": [
        [True, None, None, None, 0.38249888831204115, None],
        [True, None, None, None, 0.38249888831204115, None],
    ],
    "kimi-k2": [
        [True, None, None, None, 0.37013023618119323, None],
        [True, None, None, None, 0.37013023618119323, None],
    ],
    "deepseek_v3-default": [
        [True, None, None, None, 0.2041241452319315, None],
        [True, None, None, None, 0.2041241452319315, None],
    ],
    "glm4": [[True, None, None, None, 0.25, None], [True, None, None, None, 0.25, None]],
    "glm4_moe": [[True, None, None, None, 0.25, None], [True, None, None, None, 0.25, None]],
    "hunyuan": [[True, None, None, None, 0.25, None], [True, None, None, None, 0.25, None]],
    "gemma3-scaling": [
        [True, 4096, None, None, 0.08333333333333333, None],
        [True, 4096, None, None, 0.08333333333333333, None],
    ],
    "gpt_oss-default": [
        [True, 128, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
        [True, 128, None, None, 0.25, None],
        [True, None, None, None, 0.25, None],
    ],
}


@pytest.mark.parametrize("name", PLAN_CONFIGS)
def test_every_layer_decides_what_transformers_modules_decide(name):
    plan = hf_attention_layers({**TINY, **PLAN_CONFIGS[name]})
    got = [
        [
            entry.rope is not None,
            entry.sliding_window,
            entry.chunk_size,
            entry.temperature and list(entry.temperature)[:3],
            entry.scaling,
            entry.kv_shared_layer_index,
        ]
        for entry in plan
    ]
    printed = TRANSFORMERS_PLANS[name]
    assert [row[:4] + row[5:] for row in got] == [row[:4] + row[5:] for row in printed]
    # Llama 4 scales at the cache's slots (`past_seen_tokens + arange(seq_len)`), Ministral 3 at
    # the position ids (`get_llama_4_attn_scale(position_ids, ...)`).
    slots = name.startswith("llama4")
    assert all(entry.temperature.slots == slots for entry in plan if entry.temperature is not None)
    np.testing.assert_allclose([row[4] for row in got], [row[4] for row in printed], rtol=1e-9, atol=0)


def test_layers_of_one_rope_share_one_layer_in_the_models_layout():
    gemma = hf_attention_layers(
        {
            **TINY,
            **PLAN_CONFIGS["gemma3"],
            "rope_local_base_freq": 10000.0,
            "rope_parameters": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        }
    )
    sliding = [entry.rope for entry in gemma if entry.sliding_window is not None]
    full = [entry.rope for entry in gemma if entry.sliding_window is None]
    assert all(rope is sliding[0] for rope in sliding) and all(rope is full[0] for rope in full)
    assert (sliding[0].max_wavelength, full[0].max_wavelength, full[0].scaling_factor) == (10000.0, 1e6, 8.0)
    cohere = hf_attention_layers({**TINY, **PLAN_CONFIGS["cohere2"]}, dtype="mixed_bfloat16")
    llama4 = hf_attention_layers({**TINY, **PLAN_CONFIGS["llama4"]})
    for plan in (cohere, llama4):
        ropes = {id(entry.rope): entry.rope for entry in plan if entry.rope is not None}
        assert [rope.layout for rope in ropes.values()] == ["interleave"]
    assert cohere[0].rope.dtype_policy.name == "mixed_bfloat16"
    assert {entry.rope.layout for entry in hf_attention_layers({**TINY, **PLAN_CONFIGS["qwen2-on"]})} == {
        "half"
    }
    assert [entry.causal for entry in gemma] == [True] * 7
    bidirectional = hf_attention_layers(
        {**TINY, **PLAN_CONFIGS["gemma3"], "use_bidirectional_attention": True}
    )
    assert [(entry.causal, entry.sliding_window) for entry in bidirectional[:3]] == [
        (False, 3),
        (False, 3),
        (False, None),
    ]


def test_from_hf_config_takes_any_listed_layer_type_and_a_checkpoint_folder(tmp_path):
    qwen2 = {**TINY, **PLAN_CONFIGS["qwen2-on"], "rope_theta": 1e6}
    for layer_type in ("full_attention", "sliding_attention"):
        assert RotaryEmbedding.from_hf_config(qwen2, layer_type=layer_type).max_wavelength == 1e6
    with pytest.raises(ValueError, match=r"`layer_type` must be None or a layer type of the config"):
        RotaryEmbedding.from_hf_config(qwen2, layer_type="chunked_attention")
    (tmp_path / "config.json").write_text(json.dumps(qwen2))
    assert RotaryEmbedding.from_hf_config(tmp_path).max_wavelength == 1e6
    assert len(hf_attention_layers(str(tmp_path))) == 4
    with pytest.raises(ValueError, match=r"the checkpoint folder holding one.*missing' is not a file"):
        RotaryEmbedding.from_hf_config(tmp_path / "missing")


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {**PLAN_CONFIGS["gemma2"], "layer_types": ["full_attention"] * 3},
            r"`layer_types` must have one entry per",
        ),
        (
            {**PLAN_CONFIGS["llama4"], "no_rope_layers": [1, 0]},
            r"`no_rope_layers` must have one entry per layer",
        ),
        (
            {**PLAN_CONFIGS["gemma2"], "layer_types": ["full_attention"] * 3 + ["lattice_attention"]},
            r"`layer_types` must hold",
        ),
        ({}, r"must give `num_hidden_layers`"),  # no model type: nothing fills it in
        (
            {"num_hidden_layers": 1, "head_dim": None, "hidden_size": None},
            r"must give the attention head size",
        ),
        (
            {"model_type": "mamba", "num_hidden_layers": 2},
            r"`model_type` must be a model type of transformers 5.25",
        ),
        (
            {**PLAN_CONFIGS["gemma3n"], "num_kv_shared_layers": 9},
            r"last `num_kv_shared_layers` layers must each reuse an earlier layer of their type",
        ),
        (
            {**PLAN_CONFIGS["gemma2"], "use_bidirectional_attention": True},
            r"read for Gemma 3 \(EmbeddingGemma\) and Gemma 4 only",
        ),
    ],
    ids=[
        "layer-types-length",
        "no-rope-layers-length",
        "unknown-layer-type",
        "no-layer-count",
        "no-head-size",
        "unknown-model-type",
        "kv-sharing-without-source",
        "bidirectional",
    ],
)
def test_bad_plan_configs_are_clear_errors(config, message):
    with pytest.raises(ValueError, match=message):
        hf_attention_layers({**TINY, **config})


# Printed by transformers 5.24.0: `AutoConfig.for_model(model_type, num_hidden_layers=...)`, the
# attributes its config class fills in for a config.json that gives no other key.
TRIMMED_LAYERS = {"gpt_oss": 4, "llama4_text": 4, "smollm3": 4, "gemma3_text": 7, "ministral3": 2}
TRANSFORMERS_FILLED = {
    "gpt_oss": {
        "rope_parameters": {
            "rope_type": "yarn",
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
            "rope_theta": 150000.0,
        },
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        "no_rope_layers": None,
        "attention_chunk_size": None,
        "query_pre_attn_scalar": None,
    },
    "llama4_text": {
        "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "sliding_window": None,
        "layer_types": ["chunked_attention", "chunked_attention", "chunked_attention", "full_attention"],
        "no_rope_layers": [1, 1, 1, 0],
        "attention_chunk_size": 8192,
        "query_pre_attn_scalar": None,
    },
    "smollm3": {
        "rope_parameters": {"rope_theta": 2000000.0, "rope_type": "default"},
        "head_dim": 128,
        "max_position_embeddings": 32768,
        "sliding_window": None,
        "layer_types": ["full_attention", "full_attention", "full_attention", "full_attention"],
        "no_rope_layers": [1, 1, 1, 0],
        "attention_chunk_size": None,
        "query_pre_attn_scalar": None,
    },
    "gemma3_text": {
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
        },
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "layer_types": [
            "sliding_attention",
            "sliding_attention",
            "sliding_attention",
            "sliding_attention",
            "sliding_attention",
            "full_attention",
            "sliding_attention",
        ],
        "no_rope_layers": None,
        "attention_chunk_size": None,
        "query_pre_attn_scalar": 256,
    },
    "ministral3": {
        "rope_parameters": {
            "type": "yarn",
            "rope_theta": 1000000.0,
            "factor": 16.0,
            "original_max_position_embeddings": 16384,
            "max_position_embeddings": 262144,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale_all_dim": 1.0,
            "mscale": 1.0,
            "llama_4_scaling_beta": 0.1,
            "rope_type": "yarn",
        },
        "head_dim": 128,
        "max_position_embeddings": 262144,
        "sliding_window": None,
        "layer_types": None,
        "no_rope_layers": None,
        "attention_chunk_size": None,
        "query_pre_attn_scalar": None,
    },
}


@pytest.mark.parametrize("model_type", TRIMMED_LAYERS)
def test_a_config_without_rope_keys_gets_its_config_classs_defaults(model_type):
    config = {"model_type": model_type, "num_hidden_layers": TRIMMED_LAYERS[model_type]}
    filled = TRANSFORMERS_FILLED[model_type]
    plan = hf_attention_layers(config)
    kinds = filled["layer_types"] or ["full_attention"] * len(plan)
    for index, (entry, kind) in enumerate(zip(plan, kinds, strict=True)):
        rotates = filled["no_rope_layers"] is None or filled["no_rope_layers"][index] == 1
        assert (entry.rope is not None) == rotates, index
        assert entry.sliding_window == (filled["sliding_window"] if kind == "sliding_attention" else None)
        assert entry.chunk_size == (filled["attention_chunk_size"] if kind == "chunked_attention" else None)
        assert entry.scaling == pytest.approx((filled["query_pre_attn_scalar"] or filled["head_dim"]) ** -0.5)
        if entry.rope is None:
            continue
        nested = filled["rope_parameters"].get(kind)
        parameters = nested or filled["rope_parameters"]
        rope = RotaryEmbedding.from_hf_config(
            config, layer_type=kind if nested else None, name=entry.rope.name
        )
        assert rope.get_config() == entry.rope.get_config()
        assert rope.max_wavelength == parameters["rope_theta"]
        assert rope.max_position_embeddings == filled["max_position_embeddings"]
        expected_type = {"default": "linear"}.get(parameters["rope_type"], parameters["rope_type"])
        assert rope.rope_type == expected_type
        assert rope.scaling_factor == parameters.get("factor")
        for key in ("beta_fast", "beta_slow", "truncate", "original_max_position_embeddings"):
            if key in parameters:
                assert getattr(rope, key) == parameters[key], key
        # The rope's own head size is the filled-in one.
        assert rope.frequencies(filled["head_dim"]).shape == (filled["head_dim"] // 2,)


def test_gemma3n_rotates_each_layer_type_with_its_config_classs_theta():
    # Gemma3nTextConfig: rope_theta 1e6 for full attention, rope_local_base_freq 1e4 for sliding
    # (its `default_theta`), and the 4.x keys where a config gives them.
    for extra, thetas in (({}, (1e4, 1e6)), ({"rope_theta": 5e5, "rope_local_base_freq": 2e4}, (2e4, 5e5))):
        plan = hf_attention_layers({**TINY, **PLAN_CONFIGS["gemma3n"], **extra})
        sliding = {entry.rope.max_wavelength for entry in plan if entry.sliding_window is not None}
        full = {entry.rope.max_wavelength for entry in plan if entry.sliding_window is None}
        assert (sliding, full) == ({thetas[0]}, {thetas[1]})
        # A layer that reuses another's keys and values reuses one of its own type.
        for index, entry in enumerate(plan):
            if entry.kv_shared_layer_index is not None:
                source = plan[entry.kv_shared_layer_index]
                assert entry.kv_shared_layer_index < index and source.rope is entry.rope


def test_the_porting_page_lists_the_model_types_read_and_refused():
    text = (pathlib.Path(__file__).parent.parent / "docs" / "porting.md").read_text(encoding="utf-8")

    def block(name):
        return text[text.index(f"<!-- {name} -->") : text.index(f"<!-- /{name} -->")]

    def names(name):
        return set(re.findall(r"`([a-z0-9_.-]+)`", block(name)))

    def reasons(name):
        return dict(re.findall(r"^- `([a-z0-9_.-]+)`: (.*)\.$", block(name), flags=re.M))

    read = {name for name in _hf_defaults.DEFAULTS if name not in _hf_config.MECHANISMS}
    assert names("model-types-read") == read
    multimodal = {
        parent
        for parent, language in _hf_defaults.TEXT_MODEL_TYPES.items()
        if language not in _hf_config.MECHANISMS and parent not in read
    }
    assert names("model-types-multimodal") == multimodal
    assert reasons("model-types-refused") == _hf_config.MECHANISMS
    assert reasons("model-types-plan-refused") == _hf_config.PLAN_MECHANISMS
    module_refused = {
        name: family.refused or family.refused_unrotated
        for name, family in _hf_attention.FAMILIES.items()
        if family.refused or family.refused_unrotated
    }
    assert reasons("model-types-module-refused") == module_refused


# ---------------------------------------------------------------------------------------------
# Runtimes: a model that computes its rows and mask once from positions it is given


class WindowedRotaryAttention(keras.Model):
    """Grouped-query attention (4 query heads, 2 key/value heads) whose queries and keys rotate
    with rows computed once from the positions, under a causal sliding-window mask of them."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rope = RotaryEmbedding(
            rope_type="llama3", scaling_factor=8.0, original_max_position_embeddings=16
        )
        self.query, self.key, self.value = (keras.layers.Dense(width) for width in (32, 16, 16))

    def call(self, inputs):
        x, positions = inputs
        batch, steps = keras.ops.shape(x)[0], keras.ops.shape(x)[1]
        q = keras.ops.reshape(self.query(x), (batch, steps, 4, 8))
        k, v = (keras.ops.reshape(dense(x), (batch, steps, 2, 8)) for dense in (self.key, self.value))
        rows = self.rope.rows(k, positions=positions)
        q, k = self.rope(q, rows=rows), self.rope(k, rows=rows)
        mask = attention_mask(positions, positions, sliding_window=3)
        k, v = keras.ops.repeat(k, 2, axis=2), keras.ops.repeat(v, 2, axis=2)
        scores = keras.ops.einsum("bqhd,bkhd->bhqk", q, k) / 8**0.5
        scores = keras.ops.where(keras.ops.expand_dims(mask, 1), scores, -1e9)
        mixed = keras.ops.einsum("bhqk,bkhd->bqhd", keras.ops.softmax(scores, axis=-1), v)
        return keras.ops.reshape(mixed, (batch, steps, 32))


@pytest.mark.slow
def test_rows_and_masks_serve_from_saved_model_litert_and_onnx(tmp_path):
    from helpers import serve_without_tf_posenc
    from test_runtimes import to_onnx_with_positions, to_tflite_with_positions

    rng = np.random.default_rng(11)
    model = WindowedRotaryAttention()
    cases = {}
    for name, (batch, steps) in {"short": (2, 5), "long": (1, 40)}.items():
        x = rng.normal(size=(batch, steps, 16)).astype("float32")
        p = np.sort(rng.integers(0, 100, (batch, steps)), axis=1).astype("int32")  # past the llama3 context
        cases[name] = (x, p)
    expected = {name: model(list(case)).numpy() for name, case in cases.items()}
    specs = [tf.TensorSpec((None, None, 16), tf.float32), tf.TensorSpec((None, None), tf.int32)]
    model.export(str(tmp_path / "exported"), verbose=False, input_signature=[specs])
    served = serve_without_tf_posenc(tmp_path, {name: list(case) for name, case in cases.items()})
    litert = to_tflite_with_positions(model, tmp_path, exported=tmp_path / "exported")
    onnx = to_onnx_with_positions(model, specs)
    for name, (x, p) in cases.items():
        for runtime, output in (("served", served[name]), ("litert", litert(x, p)), ("onnx", onnx(x, p))):
            assert np.abs(output - expected[name]).max() <= 1e-5, runtime


def test_masks_of_a_functional_model_save_reload_and_check_their_inputs(tmp_path):
    positions = keras.Input((None,), dtype="int32")
    segments = keras.Input((None,), dtype="int32")
    mask = attention_mask(
        positions, positions, sliding_window=2, query_segment_ids=segments, key_segment_ids=segments
    )
    model = keras.Model([positions, segments], mask)
    model.save(tmp_path / "masks.keras")
    reloaded = keras.models.load_model(tmp_path / "masks.keras")
    p, s = np.array([[0, 1, 2, 0, 1]], "int32"), np.array([[1, 1, 1, 2, 2]], "int32")
    expected = reference_mask(p, p, True, 2, None, s, s)
    for network in (model, reloaded):
        np.testing.assert_array_equal(network([p, s]).numpy(), expected)
        with pytest.raises(
            tf.errors.InvalidArgumentError, match=r"`(query|key)_segment_ids` must be non-negative"
        ):
            network([p, -s])
