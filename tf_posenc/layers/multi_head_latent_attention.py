"""DeepSeek's multi-head latent attention (MLA): a compressed latent for keys and values, a
rotated key part shared by every head, and a cache of the latent."""

import math

import keras
from keras import ops

from tf_posenc import _hf_config, _hf_latent, _hf_record_json, _rope_types, _validation, attention
from tf_posenc.layers.hf_plan import hf_attention_layers
from tf_posenc.layers.multi_head_attention import (
    _for_rope,
    _optional_layer,
    _rope_in_dtype,
    _rope_where,
    _temperature,
    call_mask,
    causal_of,
    checked_cache_call,
    checked_call_positions,
    checked_slots,
    masked_softmax,
)
from tf_posenc.layers.rotary_embedding import RotaryEmbedding


def _rms(features, scale, epsilon):
    """transformers' RMSNorm: the statistics in float32 at least, the result in the features'
    dtype times the learned scale."""
    dtype = keras.backend.standardize_dtype(features.dtype)
    wide = ops.cast(features, keras.backend.result_type(dtype, "float32"))
    variance = ops.mean(ops.square(wide), axis=-1, keepdims=True)
    normed = ops.cast(wide / ops.sqrt(variance + epsilon), dtype)
    return normed * ops.cast(scale, dtype)


# The plan of a layer that rotates nothing, as `hf_attention_layers` gives a rotating one's.
_UNROTATED = attention.AttentionLayer(
    rope=None, sliding_window=None, chunk_size=None, temperature=None, causal=True, scaling=None,
    self_attention=True, kv_shared_layer_index=None,
)  # fmt: skip

# Output gates: one per head (`g_proj`: Ling 3.0's, dots.llm3's), one per value feature
# (`gate_proj`: Hy4's), or per value feature from the query latent (`q_gate_proj`: A.X K2's).
_GATES = ("head", "feature", "query")


@keras.saving.register_keras_serializable(package="tf_posenc")
class MultiHeadLatentAttention(keras.layers.Layer):
    """Multi-head latent attention (DeepSeek-V2 and V3's MLA), with its decoupled rotation.

    Keys and values come from one latent per token: `kv_a_proj_with_mqa` projects the input to
    `kv_lora_rank` latent features (RMS-normed) and `qk_rope_head_dim` features of one key
    shared by every head, which is the only part of a key that rotates. `kv_b_proj` expands the
    latent to each head's `qk_nope_head_dim` key features, which do not rotate, and its
    `v_head_dim` value features. Each query head has `qk_nope_head_dim` features that meet the
    expanded keys and `qk_rope_head_dim` that rotate and meet the shared key. The arguments and
    weights keep transformers' names and meaning (`DeepseekV3Attention`, 5.25).

    With a `cache`, the layer keeps what DeepSeek's inference keeps: per token the normed latent
    and the rotated shared key, `kv_lora_rank + qk_rope_head_dim` numbers (576 at DeepSeek-V3's
    sizes, against 40,960 for its expanded keys and values). A call with a cache attends in the
    latent space: `kv_b_proj`'s key part is absorbed into the queries and its value part applied
    after the weighted sum, so nothing is expanded per cached token. Without a cache the latent
    is expanded, as transformers computes it; the two are the same attention.

    Positions and masks follow `GroupQueryAttention`'s rules: `query_positions` and
    `key_positions` (defaulted from `cache_update_index`), `use_causal_mask`, `attention_mask`,
    `sliding_window` (Keras's band), and a query that sees no key weights every key alike.

    Args:
        num_heads: Positive integer. Query heads (transformers' `num_attention_heads`).
        kv_lora_rank: Positive integer. Features of the latent of keys and values.
        qk_nope_head_dim: Non-negative integer. Features of each query and key head that do not
            rotate.
        qk_rope_head_dim: Positive even integer. Features of each query head and of the shared
            key that rotate.
        v_head_dim: Positive integer. Features of each value head.
        q_lora_rank: Optional positive integer. The query's own latent (`q_a_proj`, its RMS
            norm `q_a_layernorm`, then `q_b_proj`); `None` projects the query in one step
            (`q_proj`, DeepSeek-V2-Lite's). Defaults to `None`.
        dropout: Float. Dropout of the attention weights in training. Defaults to `0.0`.
        use_bias: Boolean. Biases of `q_a_proj` (or `q_proj`), `kv_a_proj_with_mqa` and
            `o_proj` (transformers' `attention_bias`). Defaults to `False`.
        latent_norm_epsilon: Non-negative float. The epsilon of the latent norms
            (`q_a_layernorm`, `kv_a_layernorm`, and `k_rope_only_layernorm`): transformers'
            modules build them with 1e-6, or a few with the config's `rms_norm_eps`. Defaults to
            `1e-6`.
        sliding_window: Optional positive integer: Keras's band `|q - k| < sliding_window` on
            the positions. Defaults to `None`.
        kernel_initializer: Initializer of the projections' kernels. Defaults to
            `"glorot_uniform"`.
        bias_initializer: Initializer of their biases. Defaults to `"zeros"`.
        seed: Optional integer. The dropout's seed.
        rope: Optional `RotaryEmbedding` of width `qk_rope_head_dim` (its `layout` says half or
            interleaved pairs: transformers' `rope_interleave`). `None` rotates nothing.
        scaling: Optional positive float multiplying `q . k`. Defaults to
            `(qk_nope_head_dim + qk_rope_head_dim) ** -0.5`, times YaRN's `mscale` squared when
            `rope` is YaRN with `mscale_all_dim` (transformers' `yarn_apply_mscale`).
        temperature: Optional `tf_posenc.attention.Temperature`: Llama 4's query scale by
            position (Mistral 4's).
        gate: Optional output gate, the sigmoid of a projection of the query input multiplying
            each head's output: `"head"` (one per head, `g_proj`: Ling 3.0, dots.llm3),
            `"feature"` (one per value feature, `gate_proj`: Hy4), or `"query"` (one per value
            feature, projected with the query from the normed and the raw query latent by one
            `q_gate_proj`: A.X K2). Defaults to `None`.
        use_sinks: Boolean: a learned logit per head that takes part in the softmax and weights
            no value (`sinks`: Hy4). Defaults to `False`.
        key_rope_norm: Boolean: RMS-normalize the shared key's rotary features before they rotate
            (`k_rope_only_layernorm`: dots.llm3). Defaults to `False`.
        latent_scaling: Boolean: multiply the normed query latent by
            `sqrt(width / q_lora_rank)` and the normed key-value latent by
            `sqrt(width / kv_lora_rank)` (LongCat-Flash, dots.llm3). Defaults to `False`.
        index_n_heads: Optional positive integer: DeepSeek Sparse Attention's indexer, with this
            many heads (`indexer.wq_b` from the query latent, `indexer.wk` and its LayerNorm
            `indexer.k_norm`, `indexer.weights_proj`). Each query attends to the `index_topk`
            keys of highest score `sum_h w_h relu(q_h . k / sqrt(index_head_dim))` among those
            its mask leaves; at a tie for the last place the earliest keys are kept. Needs
            `q_lora_rank`. Defaults to `None` (no indexer).
        index_head_dim: Positive integer. The indexer's head size. Defaults to `128`.
        index_topk: Positive integer. The keys each query keeps. Defaults to `2048`.
        index_layout: `"half"` or `"interleave"`: the indexer's own rotation layout (DeepSeek-V3.2
            rotates halves there, GLM-5 interleaved pairs). Defaults to `"half"`.
        index_rope_first: Boolean: the indexer's heads rotate their first `qk_rope_head_dim`
            features (DeepSeek-V3.2), or their last (Hy4). Defaults to `True`.
        index_norm_epsilon: Non-negative float. The epsilon of `indexer.k_norm`. Defaults to
            `1e-6`.
        is_causal: Optional boolean: `True` masks causally whether or not a call asks.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        query: Tensor `(batch, q_len, width)`.
        value: Tensor `(batch, k_len, width)`: the tokens whose latent gives keys and values
            (`query` again in self-attention).
        key: Optional; `None` or `value` itself (keys and values share the latent).
        attention_mask: Optional boolean `(batch, q_len, k_len)` or `(q_len, k_len)`; with a
            cache, per cache slot.
        return_attention_scores: Boolean: also return the weights `(batch, heads, q_len, k_len)`.
        training: Boolean: dropout on or off.
        use_causal_mask: Boolean: mask causally on the positions.
        query_positions: Optional integer positions `(q_len,)` or `(batch, q_len)`. Defaults to
            `cache_update_index + arange(q_len)`.
        key_positions: Optional integer positions of the keys (with a cache, of every slot).
            Defaults to `arange(k_len)`.
        cache: Optional `(batch, slots, cache_width)`: `kv_lora_rank + qk_rope_head_dim`, and
            `index_head_dim` more with an indexer.
        cache_update_index: Optional integer: the slot the call's first token is written to.

    Returns:
        The output `(batch, q_len, width)`; with `return_attention_scores`, also the weights;
        with a `cache`, also the updated cache, last.

    Example:

        >>> import tf_posenc
        >>> layer = MultiHeadLatentAttention(4, kv_lora_rank=16, qk_nope_head_dim=8,
        ...     qk_rope_head_dim=4, v_head_dim=8, q_lora_rank=12,
        ...     rope=tf_posenc.RotaryEmbedding(layout="interleave"))
        >>> x = keras.ops.ones((1, 5, 32))
        >>> cache = keras.ops.zeros((1, 8, 16 + 4))
        >>> output, cache = layer(x, x, cache=cache, cache_update_index=0, use_causal_mask=True)
        >>> tuple(output.shape), tuple(cache.shape)
        ((1, 5, 32), (1, 8, 20))
    """

    def __init__(
        self,
        num_heads,
        kv_lora_rank,
        qk_nope_head_dim,
        qk_rope_head_dim,
        v_head_dim,
        q_lora_rank=None,
        dropout=0.0,
        use_bias=False,
        latent_norm_epsilon=1e-6,
        sliding_window=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        *,
        rope=None,
        scaling=None,
        temperature=None,
        gate=None,
        use_sinks=False,
        key_rope_norm=False,
        latent_scaling=False,
        index_n_heads=None,
        index_head_dim=128,
        index_topk=2048,
        index_layout="half",
        index_rope_first=True,
        index_norm_epsilon=1e-6,
        is_causal=None,
        **kwargs,
    ):
        # The call casts its inputs itself: Keras's autocast would round float positions.
        super().__init__(**{**kwargs, "autocast": False})
        self.num_heads = _validation.positive_int("num_heads", num_heads)
        self.kv_lora_rank = _validation.positive_int("kv_lora_rank", kv_lora_rank)
        self.qk_nope_head_dim = _validation.non_negative_int("qk_nope_head_dim", qk_nope_head_dim)
        self.qk_rope_head_dim = _validation.positive_int("qk_rope_head_dim", qk_rope_head_dim)
        if self.qk_rope_head_dim % 2:
            raise ValueError(
                "`qk_rope_head_dim` must be even: a rotation turns pairs of features. "
                f"{_validation.received('qk_rope_head_dim', qk_rope_head_dim)}"
            )
        self.v_head_dim = _validation.positive_int("v_head_dim", v_head_dim)
        self.q_lora_rank = (
            None if q_lora_rank is None else _validation.positive_int("q_lora_rank", q_lora_rank)
        )
        self.dropout = _validation.number_at_least("dropout", dropout, 0)
        if self.dropout >= 1:
            raise ValueError(f"`dropout` must be in [0, 1). {_validation.received('dropout', dropout)}")
        self.use_bias = _validation.boolean("use_bias", use_bias)
        self.latent_norm_epsilon = _validation.number_at_least("latent_norm_epsilon", latent_norm_epsilon, 0)
        self.sliding_window = (
            None if sliding_window is None else _validation.positive_int("sliding_window", sliding_window)
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.rope = _optional_layer("rope", rope, (RotaryEmbedding,), "a `RotaryEmbedding`")
        if self.rope is not None and self.rope.partial_rotary_factor != 1.0:
            raise ValueError(
                "`rope` rotates the whole `qk_rope_head_dim` part of each head: its "
                "`partial_rotary_factor` must be 1.0. "
                f"Received: rope.partial_rotary_factor={self.rope.partial_rotary_factor}"
            )
        if self.rope is not None:
            arguments = {name: getattr(self.rope, name) for name in _rope_types.ARGUMENTS}
            try:  # M-RoPE's sections, for one: they must fit the rotating part
                _rope_types.checked_head(arguments, self.qk_rope_head_dim, "for `qk_rope_head_dim`")
            except ValueError as error:
                raise ValueError(
                    f"`rope` must rotate the `qk_rope_head_dim` ({self.qk_rope_head_dim}) features of a "
                    f"head. Received: a rope that cannot ({error})"
                ) from None
        self.scaling = None if scaling is None else _validation.positive_number("scaling", scaling)
        self.temperature = _temperature(temperature)
        self.gate = None if gate is None else _validation.one_of("gate", gate, _GATES)
        if self.gate == "query" and self.q_lora_rank is None:
            raise ValueError(
                '`gate="query"` projects the query and its gate from the query latent: give `q_lora_rank`. '
                "Received: q_lora_rank=None"
            )
        self.use_sinks = _validation.boolean("use_sinks", use_sinks)
        self.key_rope_norm = _validation.boolean("key_rope_norm", key_rope_norm)
        self.latent_scaling = _validation.boolean("latent_scaling", latent_scaling)
        self.index_n_heads = (
            None if index_n_heads is None else _validation.positive_int("index_n_heads", index_n_heads)
        )
        self.index_head_dim = _validation.positive_int("index_head_dim", index_head_dim)
        self.index_topk = _validation.positive_int("index_topk", index_topk)
        self.index_layout = _validation.one_of("index_layout", index_layout, ("half", "interleave"))
        self.index_rope_first = _validation.boolean("index_rope_first", index_rope_first)
        self.index_norm_epsilon = _validation.number_at_least("index_norm_epsilon", index_norm_epsilon, 0)
        if self.index_n_heads is not None:
            if self.q_lora_rank is None:
                raise ValueError(
                    "The indexer projects its queries from the query latent: give `q_lora_rank`. "
                    "Received: q_lora_rank=None"
                )
            if self.rope is not None and self.index_head_dim < self.qk_rope_head_dim:
                raise ValueError(
                    f"The indexer rotates `qk_rope_head_dim` ({self.qk_rope_head_dim}) features of each of "
                    f"its heads: `index_head_dim` must be at least that. "
                    f"{_validation.received('index_head_dim', index_head_dim)}"
                )
        if self.rope is not None and self.index_n_heads is not None:
            # The indexer's rotation: the same frequencies, in the indexer's layout.
            self._index_rope = RotaryEmbedding.from_config(
                {**self.rope.get_config(), "layout": self.index_layout, "name": None}
            )
        self.is_causal = None if is_causal is None else _validation.boolean("is_causal", is_causal)
        self._dropout_layer = keras.layers.Dropout(self.dropout, seed=seed)

    @property
    def qk_head_dim(self):
        """Features of each query head: `qk_nope_head_dim + qk_rope_head_dim`."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def cache_width(self):
        """The last dimension of a cache: per token the latent and the rotated shared key, and
        the indexer's rotated key where the layer has one."""
        index = 0 if self.index_n_heads is None else self.index_head_dim
        return self.kv_lora_rank + self.qk_rope_head_dim + index

    def _score_scale(self):
        if self.scaling is not None:
            return self.scaling
        if self.rope is None:
            return self.qk_head_dim**-0.5
        factor = _rope_types.yarn_softmax_factor(self.rope._options.scaling_factor, self.rope.mscale_all_dim)
        return self.qk_head_dim**-0.5 * factor

    def _dense(self, name, units, bias, input_width):
        dense = keras.layers.Dense(
            units,
            use_bias=bias,
            kernel_initializer=self.kernel_initializer.__class__.from_config(
                self.kernel_initializer.get_config()
            ),
            bias_initializer=self.bias_initializer.__class__.from_config(self.bias_initializer.get_config()),
            dtype=self.dtype_policy,
            name=name,
        )
        dense.build((None, None, input_width))
        return dense

    def _norm_scale(self, name, width):
        # In float32 at least: not rounded to a mixed policy's compute dtype.
        return self.add_weight(name=name, shape=(width,), initializer="ones", autocast=False)

    def build(self, query_shape, value_shape, key_shape=None):
        width, value_width = query_shape[-1], value_shape[-1]
        if self.rope is not None and self.rope._rotated_width(self.qk_rope_head_dim) != self.qk_rope_head_dim:
            raise ValueError(
                f"`rope` must rotate all `qk_rope_head_dim` ({self.qk_rope_head_dim}) features. "
                f"Received: a rope rotating {self.rope._rotated_width(self.qk_rope_head_dim)} of them"
            )
        heads, q_width = self.num_heads, self.num_heads * self.qk_head_dim
        if self.q_lora_rank is None:
            self.q_proj = self._dense("q_proj", q_width, self.use_bias, width)
        else:
            self.q_a_proj = self._dense("q_a_proj", self.q_lora_rank, self.use_bias, width)
            self.q_a_layernorm = self._norm_scale("q_a_layernorm", self.q_lora_rank)
            if self.gate == "query":
                per_head = self.qk_head_dim + self.v_head_dim
                self.q_gate_proj = self._dense("q_gate_proj", heads * per_head, False, 2 * self.q_lora_rank)
            else:
                self.q_b_proj = self._dense("q_b_proj", q_width, False, self.q_lora_rank)
        self.kv_a_proj_with_mqa = self._dense(
            "kv_a_proj_with_mqa", self.kv_lora_rank + self.qk_rope_head_dim, self.use_bias, value_width
        )
        self.kv_a_layernorm = self._norm_scale("kv_a_layernorm", self.kv_lora_rank)
        if self.key_rope_norm:
            self.k_rope_only_layernorm = self._norm_scale("k_rope_only_layernorm", self.qk_rope_head_dim)
        self.kv_b_proj = self._dense(
            "kv_b_proj", heads * (self.qk_nope_head_dim + self.v_head_dim), False, self.kv_lora_rank
        )
        if self.gate == "head":
            self.g_proj = self._dense("g_proj", heads, False, width)
        elif self.gate == "feature":
            self.gate_proj = self._dense("gate_proj", heads * self.v_head_dim, False, width)
        if self.use_sinks:
            self.sinks = self.add_weight(name="sinks", shape=(heads,), initializer="zeros", autocast=False)
        if self.index_n_heads is not None:
            size = self.index_head_dim
            self.indexer_wq_b = self._dense(
                "indexer_wq_b", self.index_n_heads * size, False, self.q_lora_rank
            )
            self.indexer_wk = self._dense("indexer_wk", size, False, value_width)
            self.indexer_k_norm = keras.layers.LayerNormalization(
                epsilon=self.index_norm_epsilon, dtype=self.dtype_policy, name="indexer_k_norm"
            )
            self.indexer_k_norm.build((None, None, size))
            self.indexer_weights_proj = self._dense("indexer_weights_proj", self.index_n_heads, False, width)
        self.o_proj = self._dense("o_proj", width, self.use_bias, heads * self.v_head_dim)
        self.built = True

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "kv_lora_rank": self.kv_lora_rank,
            "qk_nope_head_dim": self.qk_nope_head_dim,
            "qk_rope_head_dim": self.qk_rope_head_dim,
            "v_head_dim": self.v_head_dim,
            "q_lora_rank": self.q_lora_rank,
            "dropout": self.dropout,
            "use_bias": self.use_bias,
            "latent_norm_epsilon": self.latent_norm_epsilon,
            "sliding_window": self.sliding_window,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "seed": self.seed,
            "rope": None if self.rope is None else keras.saving.serialize_keras_object(self.rope),
            "scaling": self.scaling,
            "temperature": None if self.temperature is None else list(self.temperature),
            "gate": self.gate,
            "use_sinks": self.use_sinks,
            "key_rope_norm": self.key_rope_norm,
            "latent_scaling": self.latent_scaling,
            "index_n_heads": self.index_n_heads,
            "index_head_dim": self.index_head_dim,
            "index_topk": self.index_topk,
            "index_layout": self.index_layout,
            "index_rope_first": self.index_rope_first,
            "index_norm_epsilon": self.index_norm_epsilon,
            "is_causal": self.is_causal,
            **(
                {}
                if getattr(self, "_hf_module", None) is None
                else {"hf_module": _hf_record_json.to_json(self._hf_module)}
            ),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        module = config.pop("hf_module", None)
        layer = super().from_config(config)
        if module is not None:  # what `from_hf_config` read, so that a reloaded layer takes weights
            layer._hf_module = _hf_record_json.from_json(module)
        return layer

    def _queries(self, query):
        """The queries `(batch, q_len, heads, qk_head_dim)`, the query latent the indexer reads
        (or None), and A.X K2's gate `(batch, q_len, heads, v_head_dim)` (or None)."""
        batch, length = ops.shape(query)[0], ops.shape(query)[1]
        latent = gate = None
        if self.q_lora_rank is None:
            projected = self.q_proj(query)
        else:
            raw = self.q_a_proj(query)
            latent = _rms(raw, self.q_a_layernorm, self.latent_norm_epsilon)
            if self.latent_scaling:
                latent = latent * ops.convert_to_tensor(
                    math.sqrt(query.shape[-1] / self.q_lora_rank), latent.dtype
                )
            if self.gate == "query":
                both = self.q_gate_proj(ops.concatenate([latent, raw], axis=-1))
                both = ops.reshape(both, (batch, length, self.num_heads, self.qk_head_dim + self.v_head_dim))
                projected, gate = both[..., : self.qk_head_dim], both[..., self.qk_head_dim :]
                return projected, latent, gate
            projected = self.q_b_proj(latent)
        return ops.reshape(projected, (batch, length, self.num_heads, self.qk_head_dim)), latent, gate

    def _latent(self, value):
        """The normed latent `(batch, len, kv_lora_rank)` and the shared key's rotary part
        `(batch, len, 1, qk_rope_head_dim)`, not rotated yet."""
        compressed = self.kv_a_proj_with_mqa(value)
        latent = _rms(compressed[..., : self.kv_lora_rank], self.kv_a_layernorm, self.latent_norm_epsilon)
        if self.latent_scaling:
            latent = latent * ops.convert_to_tensor(
                math.sqrt(value.shape[-1] / self.kv_lora_rank), latent.dtype
            )
        k_rot = compressed[..., self.kv_lora_rank :]
        if self.key_rope_norm:
            k_rot = _rms(k_rot, self.k_rope_only_layernorm, self.latent_norm_epsilon)
        return latent, ops.expand_dims(k_rot, 2)

    def _up_projection(self, dtype):
        """`kv_b_proj`'s kernel as `(kv_lora_rank, heads, qk_nope_head_dim + v_head_dim)`."""
        kernel = ops.cast(self.kv_b_proj.kernel, dtype)
        return ops.reshape(
            kernel, (self.kv_lora_rank, self.num_heads, self.qk_nope_head_dim + self.v_head_dim)
        )

    def _index_rotate(self, features, rows):
        """The indexer's heads `(..., heads, index_head_dim)` with their `qk_rope_head_dim`
        rotating features (first or last) rotated by `rows` of the indexer's rope."""
        if self.rope is None:
            return features
        width = self.qk_rope_head_dim
        if self.index_rope_first:
            turning, rest = features[..., :width], features[..., width:]
        else:
            rest, turning = features[..., :-width], features[..., -width:]
        turned = ops.cast(self._index_rope(turning, rows=rows), features.dtype)
        parts = [turned, rest] if self.index_rope_first else [rest, turned]
        return ops.concatenate(parts, axis=-1)

    def _index_rows(self, features, where):
        return (
            None
            if self.rope is None
            else self._index_rope.rows(features[..., : self.qk_rope_head_dim], **where)
        )

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        query_positions=None,
        key_positions=None,
        cache=None,
        cache_update_index=None,
        segment_ids=None,
    ):
        if key is not None and key is not value:
            raise ValueError(
                "Latent attention takes its keys and values from one latent of `value`: `key` must be "
                "None or `value` itself. Received: a `key` other than `value`"
            )
        use_causal_mask = causal_of(self.is_causal, use_causal_mask)
        checked_cache_call(
            cache=cache, cache_update_index=cache_update_index, query_positions=query_positions,
            key_positions=key_positions,
        )  # fmt: skip
        dtype = self.compute_dtype
        query, value = (
            ops.cast(x, dtype) if keras.backend.standardize_dtype(x.dtype) != dtype else x
            for x in map(ops.convert_to_tensor, (query, value))
        )
        if cache is not None:
            value_mask = key_mask = None
        queries, query_latent, query_gate = self._queries(query)
        q_nope, q_rot = queries[..., : self.qk_nope_head_dim], queries[..., self.qk_nope_head_dim :]
        latent, k_rot = self._latent(value)
        indexing = self.index_n_heads is not None
        if indexing:
            size = self.index_head_dim
            index_queries = self.indexer_wq_b(query_latent)
            index_queries = ops.reshape(
                index_queries, (ops.shape(query)[0], ops.shape(query)[1], self.index_n_heads, size)
            )
            index_keys = ops.expand_dims(self.indexer_k_norm(self.indexer_wk(value)), 2)
        start = 0 if cache_update_index is None else cache_update_index
        query_where = _rope_where(query_positions, start)
        key_where = _rope_where(key_positions, 0)
        defaulted = query_positions is None and key_positions is None
        same = (defaulted or (key_positions is not None and key_positions is query_positions)) and (
            cache_update_index is None
        )
        query_positions = checked_call_positions(
            "query_positions", query_positions, like=queries, start=start
        )
        if query_where.get("positions") is not None:
            query_where["positions"] = _for_rope(query_positions)
        rows = index_rows = None
        if self.rope is not None:
            rows = self.rope.rows(q_rot, **query_where)
            q_rot = ops.cast(self.rope(q_rot, rows=rows), dtype)
            if indexing:
                index_rows = self._index_rows(index_queries, query_where)
                index_queries = self._index_rotate(index_queries, index_rows)
        if cache is not None:
            if rows is not None:
                k_rot = ops.cast(self.rope(k_rot, rows=rows), dtype)
                if indexing:
                    index_keys = self._index_rotate(index_keys, index_rows)
            written = [latent, k_rot[:, :, 0]] + ([index_keys[:, :, 0]] if indexing else [])
            cached, cache = self._with_cache(cache, cache_update_index, written)
            latent, k_rot = cached[0], cached[1]
            index_keys = cached[2] if indexing else None
            key_positions = checked_call_positions("key_positions", key_positions, like=latent, start=0)
        else:
            same = same and latent.shape[1] == queries.shape[1] is not None
            key_positions = checked_call_positions("key_positions", key_positions, like=latent, start=0)
            if self.rope is not None:
                key_rows, key_index_rows = rows, index_rows
                if not same:
                    if key_where.get("positions") is not None:
                        key_where["positions"] = _for_rope(key_positions)
                    key_rows = self.rope.rows(k_rot, **key_where)
                    if indexing:
                        key_index_rows = self._index_rows(index_keys, key_where)
                k_rot = ops.cast(self.rope(k_rot, rows=key_rows), dtype)
                if indexing:
                    index_keys = self._index_rotate(index_keys, key_index_rows)
            k_rot = k_rot[:, :, 0]
            index_keys = index_keys[:, :, 0] if indexing else None
        if self.temperature is not None:
            where = query_positions
            if self.temperature.slots:
                where = checked_call_positions("query_positions", None, like=queries, start=start)
            scale = ops.cast(attention.attention_temperature(where, self.temperature), dtype)
            scale = ops.expand_dims(ops.expand_dims(scale, -1), -1)
            q_nope, q_rot = q_nope * scale, q_rot * scale
        mask = call_mask(
            window=self.sliding_window, chunk_size=None, query_positions=query_positions,
            key_positions=key_positions, query_mask=query_mask, value_mask=value_mask, key_mask=key_mask,
            attention_mask=attention_mask, use_causal_mask=use_causal_mask, segment_ids=segment_ids,
            batch=queries.shape[0],
        )  # fmt: skip
        if indexing:
            selected = self._selection(query, index_queries, index_keys, mask)
            mask = selected if mask is None else ops.logical_and(mask, selected)
        up = self._up_projection(dtype)
        key_up, value_up = up[..., : self.qk_nope_head_dim], up[..., self.qk_nope_head_dim :]
        if cache is not None:  # in the latent space: nothing expanded per cached token
            absorbed = ops.einsum("bqhn,rhn->bqhr", q_nope, key_up)
            scores = ops.einsum("bqhr,bkr->bhqk", absorbed, latent)
        else:
            k_nope = ops.einsum("bkr,rhn->bkhn", latent, key_up)
            scores = ops.einsum("bqhn,bkhn->bhqk", q_nope, k_nope)
        scores = scores + ops.einsum("bqhd,bkd->bhqk", q_rot, k_rot)
        weights = self._weights(scores, mask, training)
        if cache is not None:
            mixed = ops.einsum("bhqk,bkr->bqhr", weights, latent)
            output = ops.einsum("bqhr,rhv->bqhv", mixed, value_up)
        else:
            values = ops.einsum("bkr,rhv->bkhv", latent, value_up)
            output = ops.einsum("bhqk,bkhv->bqhv", weights, values)
        output = self._gated(output, query, query_gate)
        shape = ops.shape(output)
        output = self.o_proj(ops.reshape(output, (shape[0], shape[1], self.num_heads * self.v_head_dim)))
        results = [output]
        if return_attention_scores:
            results.append(weights)
        if cache is not None:
            results.append(cache)
        return tuple(results) if len(results) > 1 else output

    def _gated(self, output, query, query_gate):
        """The heads' outputs times the sigmoid of their gate, where the layer has one."""
        if self.gate is None:
            return output
        if self.gate == "query":
            gate = query_gate
        else:
            dense = self.g_proj if self.gate == "head" else self.gate_proj
            per_head = 1 if self.gate == "head" else self.v_head_dim
            gate = dense(query)
            gate = ops.reshape(gate, (ops.shape(query)[0], ops.shape(query)[1], self.num_heads, per_head))
        wide = keras.backend.result_type(gate.dtype, "float32")
        return output * ops.cast(ops.sigmoid(ops.cast(gate, wide)), output.dtype)

    def _selection(self, query, index_queries, index_keys, mask):
        """DeepSeek Sparse Attention's indexer: the `index_topk` keys of highest index score
        `sum_h w_h relu(q_h . k * index_head_dim ** -0.5)` among those the mask leaves each
        query, as a boolean `(batch, q_len, k_len)`. A tie at the k-th score goes to the
        earliest keys."""
        wide = keras.backend.result_type(index_queries.dtype, "float32")
        scores = ops.einsum("bqnd,bkd->bqnk", ops.cast(index_queries, wide), ops.cast(index_keys, wide))
        scores = ops.relu(scores * ops.convert_to_tensor(self.index_head_dim**-0.5, wide))
        head_weights = ops.cast(self.indexer_weights_proj(query), wide) * ops.convert_to_tensor(
            self.index_n_heads**-0.5, wide
        )
        index = ops.einsum("bqn,bqnk->bqk", head_weights, scores)
        lowest = ops.convert_to_tensor(float("-inf"), wide)
        if mask is not None:
            index = ops.where(mask, index, lowest)
        keys = index.shape[-1]
        count = self.index_topk if keys is None else min(self.index_topk, keys)
        kth = ops.top_k(index, count, sorted=True)[0][..., -1:]
        above = ops.greater(index, kth)
        tied = ops.equal(index, kth)
        room = count - ops.sum(ops.cast(above, "int32"), axis=-1, keepdims=True)
        earliest = ops.less_equal(ops.cumsum(ops.cast(tied, "int32"), axis=-1), room)
        return ops.logical_or(above, ops.logical_and(tied, earliest))

    def _weights(self, scores, mask, training):
        """The softmax of the scaled scores, in float32 at least; a query that sees no key
        weights every key alike (transformers' fill with the dtype's minimum), or with sinks
        gives its weight to the sink."""
        dtype = scores.dtype
        scores = ops.cast(scores, keras.backend.result_type(dtype, "float32"))
        scores = scores * ops.convert_to_tensor(self._score_scale(), scores.dtype)
        weights = masked_softmax(scores, mask, self.sinks if self.use_sinks else None)
        weights = ops.cast(weights, dtype)
        if self.dropout > 0.0:
            weights = self._dropout_layer(weights, training=training)
        return weights

    def _with_cache(self, cache, cache_update_index, written):
        """The call's `written` features (latent, rotated key, indexer key) put into `cache`
        from `cache_update_index` (read only without it); the cached features, split as
        `written`, and the new cache."""
        shape = tuple(cache.shape)
        if len(shape) != 3 or shape[2] not in (None, self.cache_width):
            parts = f"the latent ({self.kv_lora_rank}) and the rotated shared key ({self.qk_rope_head_dim})"
            if self.index_n_heads is not None:
                parts += f" and the indexer's key ({self.index_head_dim})"
            raise ValueError(
                f"`cache` must have shape (batch, slots, {self.cache_width}): per token {parts}. "
                f"Received: cache.shape={shape}"
            )
        cache = ops.convert_to_tensor(cache)
        if cache_update_index is not None:
            checked_slots(cache_update_index, written[0].shape[1], shape[1])
            update = ops.cast(ops.concatenate(written, axis=-1), cache.dtype)
            cache = ops.slice_update(cache, [0, cache_update_index, 0], update)
        cached = ops.cast(cache, written[0].dtype)
        parts, offset = [], 0
        for features in written:
            width = features.shape[-1]
            parts.append(cached[..., offset : offset + width])
            offset += width
        return parts, cache

    def compute_output_spec(self, query, value, key=None, query_mask=None, value_mask=None, key_mask=None,
                            attention_mask=None, return_attention_scores=False, training=None,
                            use_causal_mask=False, query_positions=None, key_positions=None, cache=None,
                            cache_update_index=None, segment_ids=None):  # fmt: skip
        outputs = [keras.KerasTensor(query.shape, dtype=self.compute_dtype)]
        if return_attention_scores:
            keys = None if cache is not None else value.shape[1]
            outputs.append(
                keras.KerasTensor(
                    (query.shape[0], self.num_heads, query.shape[1], keys), dtype=self.compute_dtype
                )
            )
        if cache is not None:
            outputs.append(keras.KerasTensor(cache.shape, dtype=cache.dtype))
        return tuple(outputs) if len(outputs) > 1 else outputs[0]

    @classmethod
    def from_hf_config(cls, config, layer_index, **kwargs):
        """The latent attention of decoder layer `layer_index` of a Hugging Face transformers
        model (DeepSeek-V2, V3 and V3.2, and the models built on their attention).

        The whole module as the model's transformers 5.25 code has it: from
        `tf_posenc.hf_attention_layers(config)[layer_index]` the rope (half or interleaved, as
        the config and the module say), window, temperature and softmax scale (with YaRN's
        `mscale_all_dim`); from the model type's printed record and the config, the sizes (a
        layer's own in `per_layer_config`), biases, the latent norms' epsilon, output gates,
        sinks, the norm of the shared rotary key, the latents' `sqrt(hidden / rank)` and
        DeepSeek Sparse Attention's indexer. Load the checkpoint's weights with
        `tf_posenc.load_hf_attention_weights`. A module with a mechanism the layer does not
        have is a `ValueError` naming it.

        Args:
            config: As for `tf_posenc.hf_attention_layers`.
            layer_index: Integer. The decoder layer.
            **kwargs: Further constructor arguments (`dtype`, `name`, or one to override).

        Example:

            >>> config = {"model_type": "deepseek_v3", "hidden_size": 32, "num_attention_heads": 4,
            ...           "num_key_value_heads": 4, "num_hidden_layers": 2, "q_lora_rank": 12,
            ...           "kv_lora_rank": 16, "qk_nope_head_dim": 12, "qk_rope_head_dim": 4,
            ...           "v_head_dim": 8}
            >>> layer = MultiHeadLatentAttention.from_hf_config(config, 0)
            >>> layer.kv_lora_rank, layer.qk_rope_head_dim, layer.rope.layout, layer.cache_width
            (16, 4, 'interleave', 20)
        """
        whole = _hf_config.as_dict(config)
        if _hf_latent.is_latent(whole.get("model_type")) and not _hf_latent.rotates(whole["model_type"]):
            # Kimi Linear's: nothing rotates, so no rotary plan; the layer types say which attend.
            read, types = whole, _hf_latent.unrotated_layer_types(whole)
            entry = _UNROTATED
        else:
            read = _hf_config.read(config)
            types = None
        model_type = read.get("model_type")
        if not _hf_latent.is_latent(model_type):
            raise ValueError(
                f"`config` must be that of a model with latent attention (DeepSeek's MLA; docs/attention.md "
                f"lists them). Received: model_type={model_type!r}"
            )
        if types is None:
            plan = hf_attention_layers(config)
            _hf_latent.checked_layer_index(layer_index, len(plan))
            entry = plan[layer_index]
            types = _hf_config.layer_types_of(read)
        else:
            _hf_latent.checked_layer_index(layer_index, len(types))
        if not entry.self_attention or (types and types[layer_index] == "linear_attention"):
            raise ValueError(
                f"Layer {layer_index} is not self-attention (a linear-attention layer): no position reaches "
                "it, and it is no `MultiHeadLatentAttention`."
            )
        layer_type = types[layer_index] if types else None
        module = _hf_latent.module(read, layer_index, layer_type)
        rope = (
            None if entry.rope is None or module.qk_rope_head_dim == 0 else _rope_in_dtype(entry.rope, kwargs)
        )
        if rope is not None and rope.partial_rotary_factor != 1.0:
            # A factor of the whole head (dots.llm3's sliding layers: `head_dim` times it rotate):
            # the same frequencies rotate the `qk_rope_head_dim` part whole.
            whole = _hf_latent.layer_config(read, layer_index).get("head_dim") or module.qk_rope_head_dim
            if (
                rope.denominator_dim is not None
                or int(whole * rope.partial_rotary_factor) != module.qk_rope_head_dim
            ):
                raise ValueError(
                    f"The rotation of layer {layer_index} turns {int(whole * rope.partial_rotary_factor)} "
                    f"features, not the layer's `qk_rope_head_dim` ({module.qk_rope_head_dim})."
                )
            rope = rope.__class__.from_config(
                {**rope.get_config(), "partial_rotary_factor": 1.0, "name": None}
            )
        arguments = {
            "q_lora_rank": module.q_lora_rank,
            "dropout": module.dropout,
            "use_bias": module.bias,
            "latent_norm_epsilon": module.epsilon,
            "rope": rope,
            # The layer's default is DeepSeek's (with YaRN's mscale); dots.llm3's and Kimi
            # Linear's modules scale by the head size alone.
            "scaling": None
            if module.yarn_mscale
            else (module.qk_nope_head_dim + module.qk_rope_head_dim) ** -0.5,
            "temperature": entry.temperature,
            "gate": module.gate,
            "use_sinks": module.sinks,
            "key_rope_norm": module.key_rope_norm,
            "latent_scaling": module.latent_scaling,
            "is_causal": entry.causal,
        }
        if entry.sliding_window is not None:
            arguments["sliding_window"] = entry.sliding_window  # transformers' causal window: Keras's band
        if module.indexer is not None:
            indexer = module.indexer
            arguments.update(
                index_n_heads=indexer.n_heads, index_head_dim=indexer.head_dim, index_topk=indexer.topk,
                index_layout=indexer.layout, index_rope_first=indexer.rope_first,
                index_norm_epsilon=indexer.epsilon,
            )  # fmt: skip
        layer = cls(
            module.heads, module.kv_lora_rank, module.qk_nope_head_dim, module.qk_rope_head_dim,
            module.v_head_dim, **{**arguments, **kwargs},
        )  # fmt: skip
        layer._hf_module = module  # what `load_hf_attention_weights` loads
        return layer
