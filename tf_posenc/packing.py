"""Positions and attention masks for packed batches and sequences split across devices.

Packing puts several documents in one row, marked by segment ids (one id per document, 0 for
padding): positions restart at every document (`positions_from_segment_ids`) and attention
stays inside it (`segment_attention_mask`). Context parallelism gives each of `num_shards`
devices a part of the sequence: `context_parallel_order` is the order of the tokens that makes
the parts contiguous, and `context_parallel_positions` the positions one device holds, so that
every layer's `positions=` gets the numbers the whole sequence would give it. Every function is
written in `keras.ops` (graphs, XLA, JAX, SavedModel, TensorFlow Lite and ONNX alike), or in
NumPy where all its inputs are Python ints.
"""

import numbers

import keras  # noqa: F401 (the examples below use it)
import numpy as np
from keras import ops

from tf_posenc import _validation, attention
from tf_posenc._positions import checked_segment_ids

CONTEXT_PARALLEL_SCHEMES = ("zigzag", "contiguous")


# Comparisons are `ops.equal` and friends, not `==`: on the symbolic tensors of a functional
# model, `==` compares the objects themselves.


def _column_index(values):
    """Each entry's column, shaped like `values`: from the values, so that no length (maybe
    unknown until the graph runs) is needed."""
    return ops.cumsum(ops.ones_like(values), axis=1) - 1


def _running_max(values, index):
    """The running maximum along axis 1 of `values` (int32, `(batch, seq_len)`), by doubling
    look-backs (Hillis and Steele's scan): after step `s`, each entry holds the maximum of the
    `2**(s + 1)` entries ending at it (clipped at the row's start). Gathers, not slices, so that
    a length known only at run time needs no arithmetic on it: log2(seq_len) steps for a known
    length, 31 (enough for any int32 length) otherwise. `index` is each entry's column."""
    static_length = values.shape[1]
    steps = max(static_length - 1, 0).bit_length() if static_length is not None else 31
    for step in range(steps):
        earlier = ops.take_along_axis(values, ops.maximum(index - 2**step, 0), axis=1)
        values = ops.maximum(values, earlier)
    return values


def positions_from_segment_ids(segment_ids):
    """Positions for packed batches: they restart at 0 at every document.

    Args:
        segment_ids: Integer tensor of shape `(batch, seq_len)`: the document of each token,
            0 for padding. A document is a run of equal non-zero ids (ids may repeat in other
            runs of the row).

    Returns:
        An int32 tensor of the same shape: each token's index within its document; padding
        gets 0. Pass it as `positions=` to `PositionalEncoding`, `PositionalEmbedding` or
        `RotaryEmbedding`, and `segment_attention_mask(segment_ids)` to the attention.

    Example:

        >>> keras.ops.convert_to_numpy(positions_from_segment_ids([[1, 1, 1, 2, 2, 0, 0]]))
        array([[0, 1, 2, 0, 1, 0, 0]], dtype=int32)
    """
    segment_ids = checked_segment_ids(segment_ids)
    index = _column_index(segment_ids)
    previous = ops.take_along_axis(segment_ids, ops.maximum(index - 1, 0), axis=1)
    starts = ops.logical_or(ops.not_equal(segment_ids, previous), ops.equal(index, 0))
    document_start = _running_max(ops.where(starts, index, 0), index)
    return ops.where(ops.equal(segment_ids, 0), 0, index - document_start)


def segment_attention_mask(segment_ids, causal=False):
    """The attention mask that keeps each token's attention inside its own document.

    Args:
        segment_ids: Integer tensor of shape `(batch, seq_len)`, 0 for padding (as for
            `positions_from_segment_ids`).
        causal: Boolean. Whether a token also sees only the tokens before it and itself.
            Defaults to `False`.

    Returns:
        A boolean tensor of shape `(batch, seq_len, seq_len)`, true where query `i` may attend
        to key `j`: the shape `keras.layers.MultiHeadAttention(attention_mask=...)` takes.
        Padding tokens attend to nothing (their outputs are not meaningful; leave them out of
        the loss).

    Example:

        >>> mask = segment_attention_mask([[1, 1, 2, 0]])
        >>> keras.ops.convert_to_numpy(mask)[0].astype(int)
        array([[1, 1, 0, 0],
               [1, 1, 0, 0],
               [0, 0, 1, 0],
               [0, 0, 0, 0]])
    """
    _validation.boolean("causal", causal)
    segment_ids = checked_segment_ids(segment_ids)
    # The token's own column is its position: `attention_mask`'s segment and causal rules.
    index = _column_index(segment_ids)
    return attention.attention_mask(
        index, index, causal=causal, query_segment_ids=segment_ids, key_segment_ids=segment_ids
    )


def _check_split(seq_len, num_shards, scheme):
    seq_len = _validation.positive_int("seq_len", seq_len)
    num_shards = _validation.positive_int("num_shards", num_shards)
    scheme = _validation.one_of("scheme", scheme, CONTEXT_PARALLEL_SCHEMES)
    chunks = 2 * num_shards if scheme == "zigzag" else num_shards
    if seq_len % chunks:
        raise ValueError(
            f"`seq_len` must split into {chunks} equal chunks for scheme={scheme!r} over "
            f"{num_shards} shards. Received: seq_len={seq_len}, num_shards={num_shards}"
        )
    return seq_len, num_shards, scheme, seq_len // chunks


def context_parallel_positions(seq_len, shard_index, num_shards, scheme="zigzag"):
    """The positions of the tokens one of `num_shards` devices holds, in the order it holds them.

    With `scheme="zigzag"` (Megatron-LM's and MaxText's load balancing for causal attention)
    the sequence is cut into `2 * num_shards` equal chunks and shard `r` holds chunks `r` and
    `2 * num_shards - r - 1`; with `"contiguous"`, shard `r` holds the `r`-th of `num_shards`
    equal slices.

    Args:
        seq_len: Integer. The length of the whole sequence.
        shard_index: Integer or scalar integer tensor (for example `jax.lax.axis_index` inside
            `shard_map`): which shard, from 0.
        num_shards: Integer. How many shards share the sequence.
        scheme: `"zigzag"` or `"contiguous"`. Defaults to `"zigzag"`.

    Returns:
        `seq_len // num_shards` positions: an int32 NumPy array for an int `shard_index`, else
        an int32 tensor. Pass them as `positions=` to the layers on that shard.

    Example:

        >>> context_parallel_positions(8, 1, num_shards=2)
        array([2, 3, 4, 5], dtype=int32)
    """
    seq_len, num_shards, scheme, chunk = _check_split(seq_len, num_shards, scheme)
    if isinstance(shard_index, numbers.Integral) and not isinstance(shard_index, bool):
        if not 0 <= shard_index < num_shards:
            raise ValueError(
                f"`shard_index` must be in [0, {num_shards}). "
                f"{_validation.received('shard_index', shard_index)}"
            )
        shard_index = int(shard_index)
    else:
        shard_index = ops.cast(shard_index, "int32")
    starts = [shard_index * chunk]
    if scheme == "zigzag":
        starts.append((2 * num_shards - 1 - shard_index) * chunk)
    pieces = [start + np.arange(chunk, dtype=np.int32) for start in starts]
    if isinstance(shard_index, int):
        return np.concatenate(pieces).astype(np.int32)
    return ops.concatenate(pieces, axis=0)


def context_parallel_order(seq_len, num_shards, scheme="zigzag"):
    """The order of a sequence's tokens that makes each shard's tokens contiguous.

    `x[:, order]` cut into `num_shards` equal slices gives shard `r` the tokens at
    `context_parallel_positions(seq_len, r, num_shards, scheme)`; `np.argsort(order)` puts the
    gathered outputs back in sequence order.

    Returns:
        An int32 NumPy array of length `seq_len`, a permutation of `0 .. seq_len - 1`.

    Example:

        >>> context_parallel_order(8, num_shards=2)
        array([0, 1, 6, 7, 2, 3, 4, 5], dtype=int32)
    """
    seq_len, num_shards, scheme, _ = _check_split(seq_len, num_shards, scheme)
    shards = [context_parallel_positions(seq_len, shard, num_shards, scheme) for shard in range(num_shards)]
    return np.concatenate(shards).astype(np.int32)
