"""The position side of attention: masks from positions, Llama 4's temperature, Inkling's log
scale, and each decoder layer's positions from a Hugging Face config.

A mask here is a rule on the tokens' own positions, not on their slots: the positions a call
rotates with (`start_index`, `positions_from_mask`, `positions_from_segment_ids`, a cache's
slots) decide what a query sees, so left padding, packing and a key/value cache filled up to its
index take one rule. The rules are transformers' (`masking_utils`, 5.24). Every function is
written in `keras.ops` (graphs, XLA, JAX, SavedModel, TensorFlow Lite and ONNX alike).
"""

from typing import NamedTuple

import keras
from keras import ops

from tf_posenc import _hf_config, _positions, _validation


def _same_batch(named):
    """Raises unless the known batch sizes of `named` (name -> tensor, or None) agree, sizes of
    1 aside (they broadcast)."""
    sizes = {name: tensor.shape[0] for name, tensor in named.items() if tensor is not None}
    known = {size for size in sizes.values() if size not in (None, 1)}
    if len(known) > 1:
        listed = ", ".join(f"{name} with batch {size}" for name, size in sizes.items())
        raise ValueError(f"The masks' arguments must have one batch size (or 1). Received: {listed}")


def _matching(name, tensor, like, like_name):
    """`tensor` of shape `like.shape` (static sizes compared; unknown ones checked by the graph)."""
    if len(tensor.shape) != 2:
        raise ValueError(
            f"`{name}` must have shape (batch, seq_len), as `{like_name}`. Received: {name} with shape "
            f"{tuple(tensor.shape)}"
        )
    for axis in (0, 1):
        size, wanted = tensor.shape[axis], like.shape[axis]
        if None not in (size, wanted) and size != wanted and not (axis == 0 and wanted == 1):
            raise ValueError(
                f"`{name}` must have the shape of `{like_name}`, {tuple(like.shape)}. Received: {name} "
                f"with shape {tuple(tensor.shape)}"
            )
    if isinstance(tensor, keras.KerasTensor):
        return tensor
    return _positions.same_size(tensor, 1, like, 1, f"`{name}` must have the length of `{like_name}`.")


def position_rules(queries, keys, causal, sliding_window, chunk_size):
    """Internal: the causal, window and chunk rules of `attention_mask` on checked positions
    `(batch or 1, len)`, as a boolean `(batch, q_len, k_len)`; the one place they are written
    (the attention layers call it too)."""
    # expand_dims, not [..., None]: TensorFlow Lite has no builtin for that slice.
    q, k = ops.expand_dims(queries, 2), ops.expand_dims(keys, 1)
    # Comparisons are `ops.greater` and friends, not `>`: on the symbolic tensors of a
    # functional model, `>` compares the objects themselves.
    keep = ops.less_equal(k, q) if causal else ops.ones_like(k - q, dtype="bool")  # (batch, q_len, k_len)
    if sliding_window is not None:
        if causal:
            keep = ops.logical_and(keep, ops.greater(k, q - sliding_window))
        else:  # differences, not sums: q + W may not fit an int32
            distance = ops.abs(k - q)
            keep = ops.logical_and(keep, ops.less_equal(distance, sliding_window))
    if chunk_size is not None:
        keep = ops.logical_and(
            keep, ops.equal(ops.floor_divide(k, chunk_size), ops.floor_divide(q, chunk_size))
        )
    return keep


def attention_mask(
    query_positions,
    key_positions,
    *,
    causal=True,
    sliding_window=None,
    chunk_size=None,
    query_segment_ids=None,
    key_segment_ids=None,
    key_mask=None,
):
    """The boolean attention mask of queries and keys at the given positions (True = attend).

    The rules are transformers' (`masking_utils` in 5.24), on each token's own position `q` (a
    query) and `k` (a key):

    * `causal=True` keeps `k <= q`.
    * `sliding_window=W` keeps `q - W < k <= q`: `W` keys, the query's own included
      (Mistral, Gemma 2 and 3, Qwen2, gpt-oss, Cohere2). With `causal=False` it keeps
      `|q - k| <= W`, transformers' bidirectional window (`sliding_window_bidirectional_overlay`;
      Gemma 3's bidirectional mode keeps `|q - k| < W // 2 + 1`, the same as `W // 2` here).
      Keras's own `MultiHeadAttention(sliding_window=W)` (3.15) keeps `|q - k| < W`, one key
      fewer on each side: its band is `causal=False, sliding_window=W - 1` here.
    * `chunk_size=C` keeps keys in the query's chunk, `k // C == q // C` (Llama 4; positions
      count from each row's first real token, as transformers' chunks do).
    * Segment ids keep keys of the query's own document; id 0 is padding, which attends to
      nothing and is attended by nothing (the rule `packing.segment_attention_mask` is built
      on).
    * `key_mask` keeps the keys it marks: for example the cache slots written so far, or a
      padding mask. The positions of the keys it leaves out are not read, so they may be
      anything (a ring buffer's unused slots at -1).

    Args:
        query_positions: Integer tensor `(q_len,)` or `(batch, q_len)`: each query's position.
        key_positions: Integer tensor `(k_len,)` or `(batch, k_len)`: each key's position (for a
            cache, the position each slot holds).
        causal: Boolean. Defaults to `True`.
        sliding_window: Optional positive integer. Defaults to `None`.
        chunk_size: Optional positive integer. Defaults to `None`.
        query_segment_ids: Optional integer tensor `(batch, q_len)`, with `key_segment_ids`.
        key_segment_ids: Optional integer tensor `(batch, k_len)`, with `query_segment_ids`.
        key_mask: Optional boolean (or 0/1) tensor `(k_len,)` or `(batch, k_len)`.

    Returns:
        A boolean tensor `(batch, q_len, k_len)` (batch 1 where every argument is
        unbatched): what `keras.layers.MultiHeadAttention(attention_mask=...)` and
        `keras.ops.dot_product_attention(mask=...)` (after `expand_dims(mask, 1)` for the
        heads) take.

    Example:

        >>> # Step 2 of a decoding over a cache of 4 slots, with a window of 2.
        >>> mask = attention_mask([2], [0, 1, 2, 3], sliding_window=2, key_mask=[1, 1, 1, 0])
        >>> keras.ops.convert_to_numpy(mask).astype(int)
        array([[[0, 1, 1, 0]]])
    """
    _validation.boolean("causal", causal)
    if sliding_window is not None:
        _validation.positive_int("sliding_window", sliding_window)
    if chunk_size is not None:
        _validation.positive_int("chunk_size", chunk_size)
    if (query_segment_ids is None) != (key_segment_ids is None):
        raise ValueError(
            "Pass `query_segment_ids` and `key_segment_ids` together. Received: "
            f"query_segment_ids={'None' if query_segment_ids is None else 'given'}, "
            f"key_segment_ids={'None' if key_segment_ids is None else 'given'}"
        )
    queries = _positions.batched_positions("query_positions", query_positions)
    if key_mask is not None:
        key_mask = ops.convert_to_tensor(key_mask)
        if len(key_mask.shape) == 1:
            key_mask = ops.expand_dims(key_mask, 0)
        given = ops.convert_to_tensor(key_positions)
        if len(given.shape) == 1:
            given = ops.expand_dims(given, 0)
        if len(given.shape) == 2:
            key_mask = ops.cast(_matching("key_mask", key_mask, given, "key_positions"), "bool")
            # A slot the mask leaves out may hold any position (a ring buffer's unused slots at -1).
            key_positions = ops.where(key_mask, given, ops.zeros_like(given))
    keys = _positions.batched_positions("key_positions", key_positions)
    if query_segment_ids is not None:
        query_segment_ids = _matching(
            "query_segment_ids",
            _positions.checked_segment_ids(query_segment_ids, "query_segment_ids"),
            queries,
            "query_positions",
        )
        key_segment_ids = _matching(
            "key_segment_ids",
            _positions.checked_segment_ids(key_segment_ids, "key_segment_ids"),
            keys,
            "key_positions",
        )
    _same_batch(
        {
            "query_positions": queries,
            "key_positions": keys,
            "query_segment_ids": query_segment_ids,
            "key_segment_ids": key_segment_ids,
            "key_mask": key_mask,
        }
    )
    keep = position_rules(queries, keys, causal, sliding_window, chunk_size)
    if query_segment_ids is not None:
        same = ops.equal(ops.expand_dims(query_segment_ids, 2), ops.expand_dims(key_segment_ids, 1))
        real = ops.logical_and(
            ops.not_equal(ops.expand_dims(query_segment_ids, 2), 0),
            ops.not_equal(ops.expand_dims(key_segment_ids, 1), 0),
        )
        keep = ops.logical_and(keep, ops.logical_and(same, real))
    if key_mask is not None:
        keep = ops.logical_and(keep, ops.expand_dims(key_mask, 1))
    return keep


class Temperature(NamedTuple):
    """A query scale by position (Llama 4's layers without rotation, every layer of Ministral
    3): the arguments of `attention_temperature` after `positions`, and which positions an
    attention layer scales by: the queries' (`slots=False`, Ministral 3's position ids) or the
    cache slots a call writes (`slots=True`: Llama 4's `past_seen_tokens + arange(seq_len)`,
    which count left padding)."""

    floor_scale: float
    attn_scale: float
    offset: int = 1
    slots: bool = False


def attention_temperature(positions, floor_scale, attn_scale=None, offset=1, slots=False):
    """Llama 4's query scale for its layers without rotation (temperature tuning), and
    Ministral 3's for all its layers.

    `log(floor((p + offset) / floor_scale) + 1) * attn_scale + 1` for each position `p`,
    computed in float32 as transformers 5.24's `Llama4TextAttention` (`offset=1`) and
    Ministral 3's `get_llama_4_attn_scale` (`offset=0`, `floor_scale` its
    `original_max_position_embeddings`, `attn_scale` its `llama_4_scaling_beta`, at the position
    ids) compute it, except the floor, which for an integer `floor_scale` is exact integer
    arithmetic (transformers divides in float32, which is the same below 2**24). For Llama 4,
    transformers takes `p` from the cache, not from the tokens:
    `past_seen_tokens + arange(seq_len)` (`Llama4TextAttention.forward`), the slots a call
    writes, which count left padding and are the same in every row. To match it, pass those
    slots (`start_index + arange(seq_len)`), not the positions of `positions_from_mask`, which
    restart at each row's first real token.

    Args:
        positions: Integer tensor of any shape: the queries' positions.
        floor_scale: Positive number (Llama 4: `8192`), or a whole `Temperature` record (a
            plan's `temperature`), whose fields are then the other arguments.
        attn_scale: Number (Llama 4: `0.1`); given by the record when `floor_scale` is one.
        offset: `0` or `1`: added to each position before the floor. Defaults to `1`
            (Llama 4).
        slots: Boolean, the record's `slots`: which positions an attention layer passes (the
            cache slots a call writes, for Llama 4). The scale is of the `positions` given here
            either way; accepted so that `attention_temperature(positions, *plan.temperature)`
            keeps working. Defaults to `False`.

    Returns:
        A float32 tensor of the shape of `positions`; multiply the queries by it (for
        `(batch, seq_len, heads, head_dim)` queries, after `expand_dims` twice at the end).

    Example:

        >>> scale = attention_temperature([0, 8190, 8191, 3 * 8192 - 1], 8192, 0.1)
        >>> [round(float(value), 6) for value in keras.ops.convert_to_numpy(scale)]
        [1.0, 1.0, 1.069315, 1.138629]
        >>> record = Temperature(8192, 0.1, offset=1, slots=True)  # a plan's `temperature`
        >>> by_record = attention_temperature([8191], record)
        >>> bool(keras.ops.all(by_record == attention_temperature([8191], *record)))  # 0.7's call
        True
    """
    if isinstance(floor_scale, Temperature):
        if attn_scale is not None:
            raise ValueError(
                "`floor_scale` is a whole `Temperature` record, which gives `attn_scale` too: pass one or "
                f"the other. {_validation.received('attn_scale', attn_scale)}"
            )
        floor_scale, attn_scale, offset, slots = floor_scale
    if attn_scale is None:
        raise ValueError(
            "`attn_scale` is needed with a number as `floor_scale` (or pass a `Temperature` record). "
            "Received: attn_scale=None"
        )
    _validation.boolean("slots", slots)
    floor_scale = _validation.number_at_least("floor_scale", floor_scale, 0, strict=True)
    attn_scale = _validation.number_at_least("attn_scale", attn_scale, float("-inf"))
    if isinstance(offset, bool) or offset not in (0, 1):
        raise ValueError(
            f"`offset` must be 0 or 1. Received: offset={offset!r} (of type {type(offset).__name__})"
        )
    positions = _positions.checked_values("positions", positions)
    if floor_scale.is_integer():
        # floor((p + 1) / s) without forming p + 1, which may not fit an int32.
        scale = int(floor_scale)
        steps = ops.floor_divide(positions, scale)
        if offset:
            steps = steps + ops.cast(ops.equal(positions % scale, scale - 1), "int32")
        steps = ops.cast(steps, "float32")
    else:
        steps = ops.floor((ops.cast(positions, "float32") + float(offset)) / floor_scale)
    return ops.log1p(steps) * attn_scale + 1.0


def attention_log_scale(positions, log_scaling_alpha=0.1, log_scaling_n_floor=128000):
    """Inkling's scale of its full-attention layers' queries and relative-position states by
    position: `1 + log_scaling_alpha * log(max((p + 1) / log_scaling_n_floor, 1))`.

    Computed in float32 as transformers 5.25's `Inkling2LogScale` computes it (`p + 1` formed as
    an integer, then divided, clamped and logged in float32), so a port gets its bits; no
    position passes through a narrower float. Positions up to `log_scaling_n_floor - 1` get 1.
    `InklingRelativeBias(log_scaling=True)` applies it to its states itself.

    Args:
        positions: Integer tensor of any shape: the queries' positions (Inkling's
            `position_ids`).
        log_scaling_alpha: Number. Defaults to `0.1` (Inkling 2's `log_scaling_alpha`).
        log_scaling_n_floor: Positive number. Defaults to `128000` (its
            `log_scaling_n_floor`).

    Returns:
        A float32 tensor of the shape of `positions`; multiply the queries by it after their
        norm (for `(batch, seq_len, heads, head_dim)` queries, after `expand_dims` twice at the
        end), as Inkling's `Inkling2LogScaledL2Clip` does.

    Example:

        >>> scale = attention_log_scale([0, 127999, 255999, 1048575])
        >>> [round(float(value), 6) for value in keras.ops.convert_to_numpy(scale)]
        [1.0, 1.0, 1.069315, 1.210316]
    """
    alpha = _validation.number_at_least("log_scaling_alpha", log_scaling_alpha, float("-inf"))
    n_floor = _validation.number_at_least("log_scaling_n_floor", log_scaling_n_floor, 0, strict=True)
    positions = _positions.checked_values("positions", positions)
    # Below 2**31 - 1, so p + 1 fits an int32; one rounding to float32, as transformers' `.float()`.
    ratio = ops.cast(positions + 1, "float32") / n_floor
    return ops.log(ops.maximum(ratio, 1.0)) * alpha + 1.0


class AttentionLayer(NamedTuple):
    """The position side of one decoder layer's attention, as `hf_attention_layers` reads it.

    `rope`: the `RotaryEmbedding` its queries and keys rotate with (one object per distinct
    rotation), or `None` for a layer without rotation. `sliding_window`, `chunk_size` and
    `causal`: the arguments of `attention_mask` for this layer. `temperature`: `None`, or the
    `Temperature` whose `attention_temperature(positions, floor_scale, attn_scale, offset)`
    scales its (rotated) queries, at the cache's slots where its `slots` is set (Llama 4). `scaling`: the
    softmax scale of `q . k`, transformers' `self.scaling` of the layer's attention module
    (`keras.ops.dot_product_attention(scale=...)`). `kv_shared_layer_index`: `None` for a layer
    that computes its own keys and values, or the index of the layer whose keys and values
    (already rotated) it attends to, rotating only its queries (Gemma 3n's last layers).
    `self_attention`: `False` for a layer that no position reaches (a linear-attention,
    state-space, recurrent or convolution block of a hybrid model, or Mllama's cross-attention
    to the image); its other fields are then `None`.
    """

    rope: object
    sliding_window: int | None
    chunk_size: int | None
    temperature: Temperature | None
    causal: bool = True
    scaling: float | None = None
    kv_shared_layer_index: int | None = None
    self_attention: bool = True


def attention_layers_with(rope_class, config, **kwargs):
    """`hf_attention_layers` with the `RotaryEmbedding` class of a Keras family: the factory
    that both families' `hf_attention_layers` call (`tf_posenc.tf_keras` passes its own class).

    Args:
        rope_class: The `RotaryEmbedding` class whose layers the entries hold.
        config: As for `hf_attention_layers`.
        **kwargs: As for `hf_attention_layers`.
    """
    config = _hf_config.read_plan(config)
    ropes = {}
    layers = []
    for entry in _hf_config.attention_layers(config):
        rope = None
        if entry.rotates:
            if entry.rope_key not in ropes:
                arguments = _hf_config.rotary_arguments(config, entry.rope_key)
                ropes[entry.rope_key] = rope_class(**{**arguments, **kwargs})
            rope = ropes[entry.rope_key]
        temperature = None if entry.temperature is None else Temperature(*entry.temperature)
        layers.append(
            AttentionLayer(
                rope,
                entry.sliding_window,
                entry.chunk_size,
                temperature,
                entry.causal,
                entry.scaling,
                entry.kv_shared_layer_index,
                entry.self_attention,
            )
        )
    return layers
