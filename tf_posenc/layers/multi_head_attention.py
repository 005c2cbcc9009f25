"""Keras's attention layers with the position side of attention: rotations, score biases, a cache."""

import inspect
import math

import keras
from keras import ops

from tf_posenc import (
    _hf_attention,
    _hf_config,
    _hf_conformer,
    _hf_deberta,
    _hf_decomposed,
    _hf_plain,
    _hf_plain_defaults,
    _hf_record_json,
    _kept,
    _positions,
    _validation,
    attention,
)
from tf_posenc.layers.alibi_bias import AlibiBias
from tf_posenc.layers.decomposed_position_bias import DecomposedPositionBias
from tf_posenc.layers.disentangled_position_bias import DisentangledPositionBias
from tf_posenc.layers.head_normalization import HeadNormalization
from tf_posenc.layers.hf_plan import hf_attention_layers
from tf_posenc.layers.relative_position_bias import RelativePositionBias
from tf_posenc.layers.rotary_embedding import RotaryEmbedding
from tf_posenc.layers.transformer_xl_position_bias import TransformerXLPositionBias

# The constructor arguments this module adds to Keras's layers, in their order.
_POSITION_ARGUMENTS = (
    "rope",
    "position_bias",
    "scaling",
    "temperature",
    "chunk_size",
    "logit_soft_cap",
    "query_norm",
    "key_norm",
    "value_norm",
    "output_norm",
    "norm_after_rope",
    "clip_qkv",
    "use_sinks",
    "is_causal",
)


def _optional_layer(name, value, kinds, kinds_text):
    if value is None or isinstance(value, kinds):
        return value
    if isinstance(value, dict):  # a serialized layer, from `get_config`
        return _optional_layer(name, keras.saving.deserialize_keras_object(value), kinds, kinds_text)
    raise ValueError(f"`{name}` must be None or {kinds_text}. {_validation.received(name, value)}")


def _temperature(value):
    if value is None or isinstance(value, attention.Temperature):
        return value
    if isinstance(value, (list, tuple)) and len(value) in (2, 3, 4):
        return attention.Temperature(*value)
    if isinstance(value, dict):
        return attention.Temperature(**value)
    raise ValueError(
        "`temperature` must be None, a `tf_posenc.attention.Temperature`, or its "
        f"(floor_scale, attn_scale[, offset[, slots]]). {_validation.received('temperature', value)}"
    )


# A score the softmax gives no weight, finite so that a query with no key left stays finite.
_MASKED = {"float16": -3e4, "bfloat16": -1e9, "float32": -1e9, "float64": -1e9}


def _newer_keras_arguments(sliding_window, use_gate):
    """Keras's newer arguments, passed only where given, so that older Keras versions build the
    layers."""
    given = {"sliding_window": (sliding_window, None), "use_gate": (use_gate, False)}
    return {name: value for name, (value, default) in given.items() if value is not default}


def _gate_activation(name, gated):
    """The output gate's activation: Keras's `sigmoid`, or another Keras activation by name
    (Laguna's `softplus`), which only a gated layer takes."""
    expected = "`gate_activation` must be the name of a Keras activation, such as 'sigmoid' or 'softplus'."
    try:
        known = isinstance(name, str) and keras.activations.get(name) is not None
    except ValueError:
        known = False
    if not known:
        raise ValueError(f"{expected} {_validation.received('gate_activation', name)}")
    if name != "sigmoid" and not gated:
        raise ValueError(
            "`gate_activation` is the output gate's: pass `use_gate=True` with it. "
            f"{_validation.received('gate_activation', name)}"
        )
    return name


def _differential(value):
    """Differential attention's `lambda_init`, a number in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(
            "`differential` must be None or differential attention's `lambda_init`, a number in [0, 1). "
            f"{_validation.received('differential', value)}"
        )
    return float(value)


def _identity(features):
    return features


def _without_autocast(kwargs):
    """The base layer's arguments with `autocast=False`: Keras's autocast would round float
    positions to a mixed policy's compute dtype on their way in. The call casts the query, key,
    value and cache itself (`_compute_dtype_inputs`). A config saved with `autocast=True` (0.7)
    reloads."""
    return {**kwargs, "autocast": False}


def _checked_attention_mask(attention_mask, batch, query_positions, key_positions):
    """`attention_mask` as a boolean `(batch or 1, q_len or 1, k_len or 1)`: Keras's and
    keras-hub's layers take `(batch, q_len, k_len)`, or `(q_len, k_len)` for every sequence of
    the batch, and broadcast an axis of 1 (BERT's padding mask `(batch, 1, k_len)`)."""
    mask = ops.cast(attention_mask, "bool")
    shape = tuple(mask.shape)
    if len(shape) == 2:
        mask, shape = ops.expand_dims(mask, 0), (1, *shape)
    wanted = (batch, query_positions.shape[1], key_positions.shape[1])
    fits = len(shape) == 3 and all(
        given is None or want is None or given in (want, 1) for given, want in zip(shape, wanted, strict=True)
    )
    if not fits:
        batch_text, queries, keys = ("batch" if size is None else size for size in wanted)
        raise ValueError(
            f"`attention_mask` must have shape ({batch_text}, {queries}, {keys}) or ({queries}, {keys}): "
            "an entry per query and key (with a cache, per cache slot). "
            f"Received: attention_mask.shape={tuple(attention_mask.shape)}"
        )
    return mask


def _rope_in_dtype(rope, kwargs):
    """A plan's rope for a layer built with `kwargs`: the rotation follows the layer's policy, so
    a float64 layer rotates with float64 rows."""
    if "dtype" not in kwargs:
        return rope
    return rope.__class__.from_config({**rope.get_config(), "dtype": kwargs["dtype"], "name": None})


def _rope_where(positions, start):
    """What a rotation is given for these positions: a start where they are defaulted."""
    return {"start_index": start} if positions is None else {"positions": positions}


def _for_rope(positions):
    """Positions `(batch or 1, len)` as a rotation takes them: one row for all as `(len,)`."""
    return positions[0] if positions.shape[0] == 1 else positions


def checked_call_positions(name, positions, *, like, start):
    """`positions` `(len,)` or `(batch, len)`, or `start + arange(len)`, as int32 `(batch or 1,
    len)`; `len` is that of the projected features `like`."""
    length = like.shape[1]
    if positions is None:
        return ops.expand_dims(ops.arange(ops.shape(like)[1], dtype="int32") + start, 0)
    checked = _positions.batched_positions(name, positions)
    if None not in (length, checked.shape[1]) and checked.shape[1] != length:
        raise ValueError(
            f"`{name}` must have one entry per {'query' if name == 'query_positions' else 'key'} "
            f"({length}). Received: {name} with shape {tuple(ops.shape(positions))}"
        )
    return checked


def causal_of(is_causal, use_causal_mask):
    """A call's `use_causal_mask` under the layer's `is_causal` (`True`: always causal)."""
    if is_causal is False and use_causal_mask:
        raise ValueError(
            "The layer is bidirectional (`is_causal=False`: its model attends both ways, as "
            "EmbeddingGemma does): `use_causal_mask` must be False. Received: use_causal_mask=True"
        )
    return use_causal_mask or bool(is_causal)


def checked_cache_call(*, cache, cache_update_index, query_positions, key_positions):
    """The cache arguments of a call: an index writes into a cache, and with a cache the keys'
    positions come with the queries'."""
    if cache_update_index is not None and cache is None:
        raise ValueError(
            "`cache_update_index` writes the call's keys and values into a `cache`: pass both. "
            "Received: cache=None"
        )
    if cache is not None and query_positions is not None and key_positions is None:
        # The call's keys are rotated at `query_positions`; the cached ones' positions are not
        # known to the layer, and their slots are not them.
        raise ValueError(
            "With a `cache`, `query_positions` say where this call's keys are rotated and "
            "`key_positions` where every cached key is, one per slot: pass both, or neither "
            "(slot i at position i). Received: query_positions without key_positions"
        )


def checked_slots(cache_update_index, steps, slots):
    """A call of `steps` written from `cache_update_index` fits the cache's `slots` (checked
    where both are known before the call runs)."""
    if _positions.is_python_int(cache_update_index) and None not in (steps, slots):
        if cache_update_index < 0 or cache_update_index + steps > slots:
            raise ValueError(
                f"`cache` has {slots} slots: a call of {steps} steps from `cache_update_index` must "
                f"fit in them. Received: cache_update_index={cache_update_index}"
            )


def call_mask(*, window, chunk_size, query_positions, key_positions, query_mask, value_mask, key_mask,
              attention_mask, use_causal_mask, segment_ids, batch):  # fmt: skip
    """The boolean `(batch or 1, q_len, k_len)` mask of a call, or `None`: Keras's masks, and
    the causal, window and chunk rules on the positions (`attention.position_rules`, those of
    `tf_posenc.attention_mask`; the positions are checked already)."""
    masks = []
    if use_causal_mask or window is not None or chunk_size is not None:
        # Keras's band |q - k| < W is `attention_mask`'s causal window W with the causal mask,
        # and its bidirectional window W - 1 without it.
        if window is not None and not use_causal_mask:
            window -= 1
        masks.append(
            attention.position_rules(query_positions, key_positions, use_causal_mask, window, chunk_size)
        )
    if segment_ids is not None:
        segments = ops.convert_to_tensor(segment_ids)
        masks.append(
            attention.attention_mask(
                query_positions, key_positions, causal=False, query_segment_ids=segments,
                key_segment_ids=segments,
            )
        )  # fmt: skip
    if query_mask is not None:
        masks.append(ops.expand_dims(ops.cast(query_mask, "bool"), -1))
    for mask in (value_mask, key_mask):
        if mask is not None:
            masks.append(ops.expand_dims(ops.cast(mask, "bool"), -2))
    if attention_mask is not None:
        masks.append(_checked_attention_mask(attention_mask, batch, query_positions, key_positions))
    if not masks:
        return None
    combined = masks[0]
    for mask in masks[1:]:
        combined = ops.logical_and(combined, mask)
    return combined


def masked_softmax(scores, mask, sinks=None):
    """The attention weights of `scores` `(batch, heads, q_len, k_len)` (float32 at least) under a
    boolean `mask` `(batch or 1, q_len, k_len)`: a masked score gets no weight, and a query that
    sees no key weights every key alike. With `sinks` (a logit per head), a column of the head's
    sink joins the softmax and is dropped after it (gpt-oss's, Hy4's)."""
    if mask is not None:
        scores = ops.where(ops.expand_dims(mask, 1), scores, ops.convert_to_tensor(-1e9, scores.dtype))
    if sinks is not None:
        sinks = ops.cast(ops.reshape(sinks, (1, -1, 1, 1)), scores.dtype)
        sinks = ops.broadcast_to(sinks, (*ops.shape(scores)[:-1], 1))
        return ops.softmax(ops.concatenate([scores, sinks], axis=-1), axis=-1)[..., :-1]
    if scores.shape[-1] == 1:  # one key takes all the weight (Keras warns of a softmax over one)
        return ops.ones_like(scores)
    return ops.softmax(scores, axis=-1)


class PositionedAttentionMixin:
    """What `MultiHeadAttention` and `GroupQueryAttention` add to Keras's layers: the checks of
    the new arguments, the positions of a call, and attention computed from them. A subclass
    gives `_heads` (query heads), `_kv_heads`, `_head_dim`, `_scale_default`, `_window`,
    `_gated`, `_dropout_rate` and `_expand_kv`; Keras's layer (next in the method order) computes
    a call without positions."""

    def _init_positions(self, *, rope, position_bias, scaling, temperature, chunk_size, logit_soft_cap,
                        query_norm, key_norm, value_norm, output_norm, norm_after_rope, clip_qkv, use_sinks,
                        is_causal, gate_activation, rotate_inputs, differential):  # fmt: skip
        self.rope = _optional_layer("rope", rope, (RotaryEmbedding,), "a `RotaryEmbedding`")
        if self.rope is not None and self._head_dim % 2:
            raise ValueError(
                f"A `rope` rotates pairs of features: the head size must be even. Received: "
                f"{self._head_dim_name}={self._head_dim}"
            )
        self.position_bias = _optional_layer(
            "position_bias",
            position_bias,
            (
                AlibiBias,
                RelativePositionBias,
                DisentangledPositionBias,
                TransformerXLPositionBias,
                DecomposedPositionBias,
            ),
            "an `AlibiBias`, `RelativePositionBias`, `DisentangledPositionBias`, "
            "`TransformerXLPositionBias` or `DecomposedPositionBias`",
        )
        if self.position_bias is not None and self.position_bias.num_heads != self._heads:
            # A bias without heads would fail at the first call; one shared by layers of other
            # head counts cannot serve them all, so the layer does not fill it in.
            raise ValueError(
                f"`position_bias` must bias the layer's {self._heads} query heads: give it "
                f"`num_heads={self._heads}`. Received: position_bias.num_heads={self.position_bias.num_heads}"
            )
        self.scaling = None if scaling is None else _validation.positive_number("scaling", scaling)
        self.temperature = _temperature(temperature)
        self.chunk_size = None if chunk_size is None else _validation.positive_int("chunk_size", chunk_size)
        self.logit_soft_cap = (
            None if logit_soft_cap is None else _validation.positive_number("logit_soft_cap", logit_soft_cap)
        )
        layer = (keras.layers.Layer,)
        self.query_norm = _optional_layer("query_norm", query_norm, layer, "a Keras layer")
        self.key_norm = _optional_layer("key_norm", key_norm, layer, "a Keras layer")
        self.value_norm = _optional_layer("value_norm", value_norm, layer, "a Keras layer")
        self.output_norm = _optional_layer("output_norm", output_norm, layer, "a Keras layer")
        self.norm_after_rope = _validation.boolean("norm_after_rope", norm_after_rope)
        if self.norm_after_rope and self.query_norm is None and self.key_norm is None:
            raise ValueError(
                "`norm_after_rope` says where `query_norm` and `key_norm` apply: pass one of them. "
                "Received: query_norm=None, key_norm=None"
            )
        self.clip_qkv = None if clip_qkv is None else _validation.positive_number("clip_qkv", clip_qkv)
        self.use_sinks = _validation.boolean("use_sinks", use_sinks)
        self.is_causal = None if is_causal is None else _validation.boolean("is_causal", is_causal)
        self.gate_activation = _gate_activation(gate_activation, self._gated())
        self.rotate_inputs = _validation.boolean("rotate_inputs", rotate_inputs)
        if self.rotate_inputs and self.rope is None:
            raise ValueError(
                "`rotate_inputs` says where the `rope` turns: pass a `rope` with it. Received: rope=None"
            )
        self.differential = None if differential is None else _differential(differential)
        if self.differential is not None and (self._heads % 2 or self._kv_heads % 2):
            raise ValueError(
                "Differential attention pairs heads: the query and key-value heads must be even in number. "
                f"Received: {self._heads} query heads and {self._kv_heads} key-value heads"
            )

    def _compute_dtype_inputs(self, *tensors):
        """The floating inputs in the compute dtype, as Keras's autocast gives them; positions,
        masks and indices as they are."""
        dtype = self.compute_dtype
        return tuple(
            ops.cast(x, dtype)
            if hasattr(x, "dtype") and keras.backend.is_float_dtype(keras.backend.standardize_dtype(x.dtype))
            and keras.backend.standardize_dtype(x.dtype) != dtype
            else x
            for x in tensors
        )  # fmt: skip

    def _position_config(self):
        """The new arguments as JSON: layers serialized, a temperature as its list."""
        config = {}
        for name in _POSITION_ARGUMENTS:
            value = getattr(self, name)
            if isinstance(value, keras.layers.Layer):
                # Within a save (Keras's object-sharing scope), a second serialization of the same
                # layer carries its `shared_object_id`: written so in every attention layer that
                # holds it, a layer shared by several (T5's bias, one rope) reloads as one layer
                # with its weights. Outside a save, both serializations are the same config.
                keras.saving.serialize_keras_object(value)
                value = keras.saving.serialize_keras_object(value)
            elif isinstance(value, attention.Temperature):
                value = list(value)
            config[name] = value
        return config

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        if self._gated() and self.gate_activation != "sigmoid":  # Keras's gate is a sigmoid's
            self._gate_dense.activation = keras.activations.get(self.gate_activation)
        self._build_positions()

    def compute_output_spec(self, query, value, key=None, query_mask=None, value_mask=None, key_mask=None,
                            attention_mask=None, return_attention_scores=False, training=None,
                            use_causal_mask=False, query_positions=None, key_positions=None, cache=None,
                            cache_update_index=None, segment_ids=None):  # fmt: skip
        spec = super().compute_output_spec(query, value, key)
        return self._call_spec(spec, query, value, key, return_attention_scores, cache)

    def get_config(self):
        config = {
            **super().get_config(),
            **self._position_config(),
            "gate_activation": self.gate_activation,
            "rotate_inputs": self.rotate_inputs,
            "differential": self.differential,
        }
        module = getattr(self, "_hf_module", None)
        if module is not None:
            # What `from_hf_config` read, so that a reloaded layer takes transformers' weights.
            config["hf_module"] = _hf_record_json.to_json(module)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        module = config.pop("hf_module", None)
        layer = super().from_config(config)
        if module is not None:
            layer._hf_module = _hf_record_json.from_json(module)
        return layer

    def _disentangled(self):
        return isinstance(self.position_bias, DisentangledPositionBias)

    def _score_scale(self):
        """The softmax scale of `q . k` and of a bias that scores content (DeBERTa's): `scaling`,
        or `1 / sqrt(head_dim)`, or with DeBERTa's terms `1 / sqrt(head_dim * (1 + terms))`."""
        if self.scaling is not None:
            return self.scaling
        if self._disentangled():
            return 1.0 / math.sqrt(self._head_dim * self.position_bias.scale_factor)
        return self._scale_default

    def _positions_in_use(self):
        """Whether a call needs this module's route rather than Keras's own: a position argument,
        or differential attention (whose heads Keras's call does not combine)."""
        in_use = any(getattr(self, name) not in (None, False) for name in _POSITION_ARGUMENTS)
        return in_use or self.differential is not None

    def _build_positions(self):
        """Builds the position layers' weights with the layer's (they are its weights)."""
        if self.position_bias is not None and not self.position_bias.built:
            self.position_bias.build()
        if self._disentangled():
            self._build_disentangled()
        if (
            isinstance(self.position_bias, (TransformerXLPositionBias, DecomposedPositionBias))
            and self.position_bias.head_dim != self._head_dim
        ):
            raise ValueError(
                f"`position_bias` must score the layer's heads of size {self._head_dim}: give it "
                f"`head_dim={self._head_dim}`. Received: position_bias.head_dim={self.position_bias.head_dim}"
            )
        if self.use_sinks:
            # gpt-oss's `sinks`: a logit per head that takes part in the softmax and weights no value.
            self.sinks = self.add_weight(name="sinks", shape=(self._heads,), initializer="zeros")
        if self.differential is not None:
            # DiffLlama's `lambda_q1`, `lambda_k1`, `lambda_q2`, `lambda_k2`, drawn as its are.
            for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                initializer = keras.initializers.RandomNormal(stddev=0.1, seed=self.seed)
                setattr(
                    self, name, self.add_weight(name=name, shape=(self._head_dim,), initializer=initializer)
                )
        norms = (
            (self.query_norm, self._heads, self._head_dim),
            (self.key_norm, self._kv_heads, self._head_dim),
            (self.value_norm, self._kv_heads, self._head_dim),
            # With differential attention, over each pair of heads' 2 * head_dim features.
            (self.output_norm, *((self._heads // 2, 2 * self._head_dim) if self.differential is not None
                                 else (self._heads, self._head_dim))),
        )  # fmt: skip
        for norm, heads, size in norms:
            if norm is not None and not norm.built:
                norm.build((None, None, heads, size))

    def _build_disentangled(self):
        """DeBERTa's position projections of the table: the layer's own query and key projections
        (`share_att_key`), which take inputs of the table's width, or `pos_key` / `pos_query`."""
        bias = self.position_bias
        if bias.share_att_key:
            for name, dense in (("query", self._query_dense), ("key", self._key_dense)):
                width = dense.kernel.shape[0]
                if width != bias.hidden_size:
                    raise ValueError(
                        f"With `share_att_key`, the layer projects the position table "
                        f"({bias.hidden_size} wide) with its {name} projection: its {name} inputs must "
                        f"be {bias.hidden_size} wide. "
                        f"Received: {name} inputs of width {width}"
                    )
            return
        for term, name in (("c2p", "pos_key"), ("p2c", "pos_query")):
            if term in bias.pos_att_type and getattr(self, f"_{name}_dense", None) is None:
                dense = keras.layers.EinsumDense(
                    "abc,cde->abde",
                    output_shape=(None, self._heads, self._head_dim),
                    bias_axes="de",
                    name=name,
                    **self._get_common_kwargs_for_sublayer(),
                )
                dense.build((None, None, bias.hidden_size))
                setattr(self, f"_{name}_dense", dense)

    def _disentangled_bias(self, queries, keys, query_positions, key_positions):
        """DeBERTa's c2p and p2c scores of the call's queries and keys, scaled as `q . k`."""
        bias = self.position_bias
        table = ops.expand_dims(bias.embeddings(), 0)
        if bias.share_att_key:
            project = {"c2p": self._key_dense, "p2c": self._query_dense}
        else:
            project = {
                "c2p": getattr(self, "_pos_key_dense", None),
                "p2c": getattr(self, "_pos_query_dense", None),
            }
        projected = {term: project[term](table)[0] for term in bias.pos_att_type}
        if bias.share_att_key and "c2p" in projected:  # the key projection's heads, repeated
            projected["c2p"] = self._expand_kv(projected["c2p"][None])[0]
        scores = bias.scores(
            queries, keys, projected.get("c2p"), projected.get("p2c"), query_positions, key_positions
        )
        return scores * ops.convert_to_tensor(self._score_scale(), scores.dtype)

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
        use_causal_mask = causal_of(self.is_causal, use_causal_mask)
        query, value, key, cache = self._compute_dtype_inputs(query, value, key, cache)
        given = (query_positions, key_positions, cache, cache_update_index, segment_ids)
        if not self._positions_in_use() and all(argument is None for argument in given):
            return super().call(
                query, value, key=key, query_mask=query_mask, value_mask=value_mask, key_mask=key_mask,
                attention_mask=attention_mask, return_attention_scores=return_attention_scores,
                training=training, use_causal_mask=use_causal_mask,
            )  # fmt: skip
        checked_cache_call(
            cache=cache, cache_update_index=cache_update_index, query_positions=query_positions,
            key_positions=key_positions,
        )  # fmt: skip
        # Keras fills `query_mask`, `value_mask` and `key_mask` from the inputs' masks. With a cache
        # the keys are its slots, which the positions mask; the call's own value mask is not theirs.
        key = value if key is None else key
        if cache is not None:
            value_mask = key_mask = None
        # The masks are applied below, to the scores: the projections must not see them (a new
        # tensor of the same values carries none).
        query, value, key = (ops.copy(x) if hasattr(x, "_keras_mask") else x for x in (query, value, key))
        if self.rotate_inputs:
            # Wav2Vec2-Conformer's rotary: the query and key inputs turn, viewed as the layer's
            # heads, before their projections; the values' input does not.
            if cache is not None:
                raise ValueError(
                    "A layer with `rotate_inputs` turns its inputs before projecting them, so it takes no "
                    "`cache` of projected keys. Received: a cache"
                )
            query = self._turned_input("query", query, query_positions)
            key = self._turned_input("key", key, key_positions)
        gate = self._gate_dense(query) if self._gated() else None
        queries = self._query_dense(query)
        keys, values = self._key_dense(key), self._value_dense(value)
        query_norm = self.query_norm or _identity
        key_norm = self.key_norm or _identity
        if not self.norm_after_rope:
            queries, keys = query_norm(queries), key_norm(keys)
            query_norm = key_norm = _identity
        if self.clip_qkv is not None:  # OLMo's and DBRX's clamp; OLMoE's follows its norms
            bound = ops.convert_to_tensor(self.clip_qkv, queries.dtype)
            queries, keys, values = (ops.clip(x, -bound, bound) for x in (queries, keys, values))
        if self.value_norm is not None:  # Gemma 3n's: each value head, before caching
            values = self.value_norm(values)
        start = 0 if cache_update_index is None else cache_update_index
        # Defaulted positions reach the rotation as a start: its contiguous rows, which the layers
        # of a step in one graph share.
        query_where = _rope_where(query_positions, start)
        key_where = _rope_where(key_positions, 0)
        # Self-attention's keys sit at the queries' positions (defaulted, or the same tensor
        # given for both): one set of rows serves both.
        defaulted = query_positions is None and key_positions is None
        shared = key_positions is not None and key_positions is query_positions
        same = (defaulted or shared) and cache_update_index is None
        query_positions = self._checked_positions(
            "query_positions", query_positions, like=queries, start=start
        )
        if query_where.get("positions") is not None:
            query_where["positions"] = _for_rope(query_positions)
        rotate = None
        if self.rope is not None and not self.rotate_inputs:
            rows = self.rope.rows(queries, **query_where)

            def rotate(features):
                return ops.cast(self.rope(features, rows=rows), features.dtype)

            queries = rotate(queries)
        queries = query_norm(queries)
        if cache is not None:
            # The keys are rotated (and normed, where the norm follows the rotation) before caching.
            if rotate is not None or key_norm is not _identity:
                rotate_keys = rotate or _identity

                def prepare(features):
                    return key_norm(rotate_keys(features))

            else:
                prepare = None
            keys, values, cache = self._with_cache(
                cache, cache_update_index=cache_update_index, keys=keys, values=values, prepare=prepare
            )
            key_positions = self._checked_positions("key_positions", key_positions, like=keys, start=0)
        else:
            same = same and keys.shape[1] == queries.shape[1] is not None
            key_positions = self._checked_positions("key_positions", key_positions, like=keys, start=0)
            if key_where.get("positions") is not None:
                key_where["positions"] = _for_rope(key_positions)
            if self.rope is not None and not self.rotate_inputs:
                keys = rotate(keys) if same else ops.cast(self.rope(keys, **key_where), keys.dtype)
            keys = key_norm(keys)
        if self.temperature is not None:
            where = query_positions
            if self.temperature.slots:  # Llama 4's: the slots the call writes, `start + arange(len)`
                where = self._checked_positions("query_positions", None, like=queries, start=start)
            scale = attention.attention_temperature(where, self.temperature)
            queries = queries * ops.cast(ops.expand_dims(ops.expand_dims(scale, -1), -1), queries.dtype)
        mask = self._mask(
            query_positions=query_positions, key_positions=key_positions, query_mask=query_mask,
            value_mask=value_mask, key_mask=key_mask, attention_mask=attention_mask,
            use_causal_mask=use_causal_mask, segment_ids=segment_ids, batch=queries.shape[0],
        )  # fmt: skip
        if self.differential is not None:
            values = self._differential_values(values)
        keys, values = self._expand_kv(keys), self._expand_kv(values)
        bias = None
        if self._disentangled():
            bias = self._disentangled_bias(queries, keys, query_positions, key_positions)
        elif isinstance(self.position_bias, TransformerXLPositionBias):
            bias = self.position_bias.scores(queries, keys, query_positions, key_positions)
            bias = bias * ops.convert_to_tensor(self._score_scale(), bias.dtype)
        elif isinstance(self.position_bias, DecomposedPositionBias):
            # Of the query before the softmax scale, as ViTDet's and SAM's: added to the scaled q . k.
            bias = self.position_bias.scores(queries, query_positions, key_positions)
        elif self.position_bias is not None:
            bias = ops.cast(
                self._bias(
                    query_positions=query_positions,
                    key_positions=key_positions,
                    start=start,
                    defaulted=defaulted,
                ),
                queries.dtype,
            )
        output, scores = self._attend(
            queries,
            keys,
            values,
            mask=mask,
            bias=bias,
            return_scores=return_attention_scores,
            training=training,
        )
        if self.differential is not None:
            output = self._differential_output(output)
        elif self.output_norm is not None:  # BitNet's `attn_sub_norm`, before the output projection
            output = self.output_norm(output)
        output = self._output_dense(output if gate is None else ops.multiply(output, gate))
        if cache is not None:
            return (output, scores, cache) if return_attention_scores else (output, cache)
        return (output, scores) if return_attention_scores else output

    def _checked_positions(self, name, positions, *, like, start):
        return checked_call_positions(name, positions, like=like, start=start)

    def _differential_values(self, values):
        """DiffLlama's values: the key-value heads' two halves, each tiled over both halves of
        the heads, side by side (`(batch, length, kv_heads, 2 * head_dim)`)."""
        half = self._kv_heads // 2
        first, second = values[:, :, :half], values[:, :, half:]
        tiled = [ops.concatenate([part, part], axis=2) for part in (first, second)]
        return ops.concatenate(tiled, axis=-1)

    def _differential_output(self, output):
        """Differential attention's heads (Ye et al., 2024; DiffLlama): head `h` of the first half
        minus lambda times head `h` of the second, normed over their `2 * head_dim` features
        (`output_norm`) and scaled by `1 - lambda_init`."""
        half = self._heads // 2
        lambda_ = (
            ops.exp(ops.sum(self.lambda_q1 * self.lambda_k1))
            - ops.exp(ops.sum(self.lambda_q2 * self.lambda_k2))
            + self.differential
        )
        combined = output[:, :, :half] - ops.cast(lambda_, output.dtype) * output[:, :, half:]
        if self.output_norm is not None:
            combined = self.output_norm(combined)
        combined = combined * ops.convert_to_tensor(1.0 - self.differential, combined.dtype)
        shape = ops.shape(output)
        return ops.reshape(combined, (shape[0], shape[1], self._heads, self._head_dim))

    def _turned_input(self, role, inputs, positions):
        """`inputs` `(batch, length, width)` turned by the rope at `positions`, viewed as the
        layer's heads of `width / heads` features each."""
        width = inputs.shape[-1]
        if width is None or width % (2 * self._heads):
            raise ValueError(
                f"With `rotate_inputs` the {role} inputs turn as {self._heads} heads of pairs: their width "
                f"must be a multiple of {2 * self._heads}. Received: {role} inputs of width {width}"
            )
        heads = ops.reshape(inputs, (-1, ops.shape(inputs)[1], self._heads, width // self._heads))
        name = f"{role}_positions"
        checked = self._checked_positions(name, positions, like=heads, start=0)
        where = _rope_where(positions, 0)
        if where.get("positions") is not None:
            where["positions"] = _for_rope(checked)
        return ops.reshape(ops.cast(self.rope(heads, **where), inputs.dtype), ops.shape(inputs))

    def _with_cache(self, cache, *, cache_update_index, keys, values, prepare):
        """keras-hub's `CachedMultiHeadAttention` convention: `cache` `(batch, 2, slots, kv_heads,
        head_dim)`, slot `i` holding position `i`; the call's keys (`prepare`d first: rotated, and
        normed where the norm follows the rotation) and values are written from
        `cache_update_index` on."""
        shape = tuple(cache.shape)
        wanted = (2, None, self._kv_heads, self._head_dim)
        given = shape[1:] if len(shape) == 5 else None
        if given is None or any(
            w is not None and g is not None and g != w for g, w in zip(given, wanted, strict=True)
        ):
            raise ValueError(
                f"`cache` must have shape (batch, 2, slots, {self._kv_heads}, {self._head_dim}): keys "
                f"and values of {self._kv_heads} heads of size {self._head_dim}. "
                f"Received: cache.shape={shape}"
            )
        key_cache, value_cache = cache[:, 0], cache[:, 1]
        if cache_update_index is None:  # read only (cross-attention over a filled cache)
            return key_cache, value_cache, cache
        checked_slots(cache_update_index, keys.shape[1], shape[2])
        if prepare is not None:
            keys = prepare(keys)
        start = [0, cache_update_index, 0, 0]
        key_cache = ops.slice_update(key_cache, start, ops.cast(keys, key_cache.dtype))
        value_cache = ops.slice_update(value_cache, start, ops.cast(values, value_cache.dtype))
        return key_cache, value_cache, ops.stack([key_cache, value_cache], axis=1)

    def _mask(self, **arguments):
        return call_mask(window=self._window(), chunk_size=self.chunk_size, **arguments)

    def _bias(self, *, query_positions, key_positions, start, defaulted):
        """The score bias of the positions. In a graph, the layers of a decoding step that share a
        bias layer and default their positions from one `cache_update_index` share its bias, as
        they share the rotation's rows (`_kept.PerGraph`)."""
        shape = (query_positions.shape[1], key_positions.shape[1])
        if defaulted and _kept.in_graph(start) and None not in shape:
            bias_layer = self.position_bias
            return _kept.SHARED_BIASES.get(
                start,
                _kept.SharedBiasKey(bias_layer, bias_layer.dtype_policy.name, shape, _kept.device()),
                lambda: self.position_bias.bias(query_positions, key_positions),
            )
        return self.position_bias.bias(query_positions, key_positions)

    def _attend(self, queries, keys, values, *, mask, bias, return_scores, training):
        scale = self._score_scale()
        if mask is not None and not self.use_sinks:
            # transformers fills masked scores with the dtype's minimum, so a query that sees no
            # key gets equal scores and uniform weights over all keys. Such a row here sees every
            # key with zero scores (its query and bias zeroed): uniform on every backend and route,
            # where a finite fill added to a bias, or a backend's own rule, would not be. With
            # sinks, transformers' fill leaves the weight on the sink, as the explicit route does.
            blind = ops.logical_not(ops.any(mask, axis=-1, keepdims=True))
            mask = ops.logical_or(mask, blind)
            queries = ops.where(ops.expand_dims(blind, -1), ops.zeros_like(queries), queries)
            if bias is not None:
                bias = ops.where(ops.expand_dims(blind, 1), ops.zeros_like(bias), bias)
        explicit = (
            return_scores
            or self.logit_soft_cap is not None
            or self.use_sinks
            or self._dropout_rate() > 0.0
            or self.differential is not None  # values twice as wide as the keys
        )
        if not explicit:
            mask = None if mask is None else ops.expand_dims(mask, 1)
            if bias is not None and mask is not None:
                # One of them: PyTorch's `dot_product_attention` takes a bias or a mask, not both.
                masked = ops.cast(_MASKED[keras.backend.standardize_dtype(bias.dtype)], bias.dtype)
                bias, mask = ops.where(mask, bias, masked), None
            if keras.backend.standardize_dtype(queries.dtype) == "float64":
                # Keras's TensorFlow `dot_product_attention` casts a Python scale through float32
                # (a relative 1e-8 on every score); a float64 scale multiplies the queries here.
                queries, scale = queries * ops.convert_to_tensor(scale, queries.dtype), 1.0
            output = ops.dot_product_attention(
                queries,
                keys,
                values,
                bias=bias,
                mask=mask,
                scale=scale,
                flash_attention=self._flash_attention,
            )
            return output, None
        scores = ops.einsum("bqnh,bknh->bnqk", queries, keys) * ops.convert_to_tensor(scale, queries.dtype)
        if bias is not None:
            scores = scores + bias
        if self.logit_soft_cap is not None:
            cap = ops.convert_to_tensor(self.logit_soft_cap, scores.dtype)
            scores = ops.tanh(scores / cap) * cap
        # The softmax in float32 at least, as Keras's `dot_product_attention` computes it (the
        # fused route above), whatever the compute dtype.
        scores = ops.cast(scores, keras.backend.result_type(scores.dtype, "float32"))
        weights = ops.cast(masked_softmax(scores, mask, self.sinks if self.use_sinks else None), values.dtype)
        if self._dropout_rate() > 0.0:
            weights = self._dropout_layer(weights, training=training)
        return ops.einsum("bnqk,bknh->bqnh", weights, values), weights

    def _call_spec(self, spec, query, value, key, return_attention_scores, cache):
        scores_spec = keras.KerasTensor(
            (
                query.shape[0],
                self._heads,
                query.shape[1],
                None if cache is not None else (value if key is None else key).shape[1],
            ),
            dtype=self.compute_dtype,
        )
        outputs = [spec]
        if return_attention_scores:
            outputs.append(scores_spec)
        if cache is not None:
            outputs.append(keras.KerasTensor(cache.shape, dtype=cache.dtype))
        return tuple(outputs) if len(outputs) > 1 else spec


@keras.saving.register_keras_serializable(package="tf_posenc")
class MultiHeadAttention(PositionedAttentionMixin, keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention` with positions: rotations, score biases and a cache.

    Every argument of Keras's layer (3.15) keeps Keras's meaning, and with none of the arguments
    below a call is Keras's own (the same weights, paths and outputs): switch by changing the
    import. The new arguments put positions into attention, computed exactly by tf_posenc's
    layers, and the masks follow the positions (`tf_posenc.attention_mask`), so left padding,
    packing and a cache follow one rule.

    `sliding_window` keeps Keras's meaning, a band `|q - k| < sliding_window` (with
    `use_causal_mask`, the `sliding_window` keys up to and including the query's own) — on the
    positions here, not the indices. transformers' rule, which `tf_posenc.attention_mask` follows,
    keeps `q - W < k <= q`: the same keys for a causal layer.

    Keras's arguments come first, with Keras's meaning (`num_heads`, `key_dim`, `value_dim`,
    `dropout`, `use_bias`, `output_shape`, `attention_axes`, `sliding_window`, `flash_attention`,
    the initializers, regularizers and constraints, `use_gate`, `seed`); the new ones are
    keyword-only.

    Args:
        rope: Optional `RotaryEmbedding`: rotates each head's queries and keys at their
            positions. Defaults to `None`.
        position_bias: Optional position bias layer, added to the scores (its weights are this
            layer's; one may be shared by every layer): `AlibiBias` and `RelativePositionBias`
            (T5) bias by the query and key positions; `DisentangledPositionBias` (DeBERTa-v2/v3)
            adds its content-to-position terms, projected by this layer; `TransformerXLPositionBias`
            (Conformer) its relative scores with the biases u and v; `DecomposedPositionBias`
            (SAM, ViTDet) its row and column terms of the query. Defaults to `None`.
        scaling: Optional positive number: the softmax scale of `q . k`. Defaults to `None`
            (Keras's `1 / sqrt(key_dim)`).
        temperature: Optional `tf_posenc.attention.Temperature` (or its `(floor_scale,
            attn_scale[, offset[, slots]])`): Llama 4's and Ministral 3's query scale by
            position, at the queries' positions or (`slots=True`, Llama 4's) at the cache slots
            the call writes, `cache_update_index + arange(len)`. Defaults to `None`.
        chunk_size: Optional positive integer: queries attend to keys of their own chunk of
            positions (Llama 4). Defaults to `None`.
        logit_soft_cap: Optional positive number: scores become `cap * tanh(score / cap)`
            before the softmax (Gemma 2). Defaults to `None`.
        query_norm: Optional Keras layer applied to each head's queries `(batch, len, heads,
            key_dim)` before rotation (Qwen3, Gemma 3, OLMo 2). Defaults to `None`.
        key_norm: Optional Keras layer, the same for the keys. Defaults to `None`.
        value_norm: Optional Keras layer applied to each head's values before caching (Gemma
            3n's RMS norm without scale). Defaults to `None`.
        output_norm: Optional Keras layer applied to the heads' outputs `(batch, len, heads,
            value_dim)` before the output projection (and its gate): BitNet's `attn_sub_norm`, an
            RMS norm over all heads' features. Defaults to `None`.
        norm_after_rope: Boolean: apply `query_norm` and `key_norm` after the rotation, not
            before it (HunYuan, Llama 4's L2 norm). Defaults to `False`.
        clip_qkv: Optional positive number: the query, key and value projections are clipped to
            `[-clip_qkv, clip_qkv]`, after the query and key norms that precede the rotation
            (OLMo's, OLMoE's and DBRX's `clip_qkv`). Defaults to `None`.
        use_sinks: Boolean: a learned logit per head (weight `sinks`, `(num_heads,)`) joins each
            query's softmax and weights no value (gpt-oss's attention sinks). Defaults to
            `False`.
        is_causal: Optional boolean (transformers' attribute of its attention modules): `True`
            masks every call causally, `use_causal_mask` or not; `False` says the model attends
            both ways and refuses `use_causal_mask=True`; `None` leaves it to each call, as
            Keras does. Defaults to `None`.
        gate_activation: String: the activation of Keras's output gate (`use_gate`), a Keras
            activation's name: Keras's `"sigmoid"`, or Laguna's `"softplus"`. Defaults to
            `"sigmoid"`.
        rotate_inputs: Boolean: the `rope` turns the query and key inputs, viewed as
            `num_heads` heads, before their projections, not the projected queries and keys
            (Wav2Vec2-Conformer's `position_embeddings_type="rotary"`); the value input does
            not turn, and the layer takes no cache. Defaults to `False`.
        differential: Optional number in [0, 1): differential attention's `lambda_init`
            (DiffLlama's, `0.8 - 0.6 * exp(-0.3 * layer_index)`). The heads pair up, `h` with
            `h + num_heads / 2`: both attend with the same weights over the value heads' two
            halves side by side, and their outputs combine as the first minus lambda times the
            second, lambda being `exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) +
            lambda_init` (four learned weights of `head_dim`), then `output_norm` over the pair's
            features, times `1 - lambda_init`. Defaults to `None`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        query, value, key, query_mask, value_mask, key_mask, attention_mask,
            return_attention_scores, training, use_causal_mask: Keras's.
        query_positions: Optional integer tensor `(q_len,)` or `(batch, q_len)`. Defaults to
            `0 .. q_len - 1`, or `cache_update_index + arange(q_len)` with a cache.
        key_positions: Optional integer tensor `(k_len,)` or `(batch, k_len)`. Defaults to
            `0 .. k_len - 1` (a cache's slot `i` holds position `i`).
        cache: Optional tensor `(batch, 2, slots, num_heads, key_dim)`, keras-hub's
            `CachedMultiHeadAttention` convention: the keys (already rotated) and values of every
            slot. With a cache the call returns `(output, cache)`.
        cache_update_index: Optional integer or scalar integer tensor: the slot the call's first
            step is written to. Without it the cache is read, not written.
        segment_ids: Optional integer tensor `(batch, len)`: packed documents attend within their
            own segment (0 is padding), for self-attention.

    Example:

        >>> import tf_posenc
        >>> layer = MultiHeadAttention(num_heads=2, key_dim=8, rope=tf_posenc.RotaryEmbedding())
        >>> x = keras.ops.ones((1, 5, 16))
        >>> tuple(layer(x, x, use_causal_mask=True).shape)
        (1, 5, 16)
        >>> cache = keras.ops.zeros((1, 2, 8, 2, 8))
        >>> output, cache = layer(x[:, :1], x[:, :1], cache=cache, cache_update_index=5, use_causal_mask=True)
        >>> tuple(output.shape), tuple(cache.shape)
        ((1, 1, 16), (1, 2, 8, 2, 8))
    """

    _head_dim_name = "key_dim"

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_shape=None,
        attention_axes=None,
        sliding_window=None,
        flash_attention=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        use_gate=False,
        seed=None,
        *,
        rope=None,
        position_bias=None,
        scaling=None,
        temperature=None,
        chunk_size=None,
        logit_soft_cap=None,
        query_norm=None,
        key_norm=None,
        value_norm=None,
        output_norm=None,
        norm_after_rope=False,
        clip_qkv=None,
        use_sinks=False,
        is_causal=None,
        gate_activation="sigmoid",
        rotate_inputs=False,
        differential=None,
        **kwargs,
    ):
        keras_arguments = {
            "value_dim": value_dim, "dropout": dropout, "use_bias": use_bias, "output_shape": output_shape,
            "attention_axes": attention_axes, "flash_attention": flash_attention,
            "kernel_initializer": kernel_initializer, "bias_initializer": bias_initializer,
            "kernel_regularizer": kernel_regularizer, "bias_regularizer": bias_regularizer,
            "activity_regularizer": activity_regularizer, "kernel_constraint": kernel_constraint,
            "bias_constraint": bias_constraint, "seed": seed,
        }  # fmt: skip
        keras_arguments.update(_newer_keras_arguments(sliding_window, use_gate))
        super().__init__(num_heads, key_dim, **keras_arguments, **_without_autocast(kwargs))
        self._init_positions(
            rope=rope, position_bias=position_bias, scaling=scaling, temperature=temperature,
            chunk_size=chunk_size, logit_soft_cap=logit_soft_cap, query_norm=query_norm,
            key_norm=key_norm, value_norm=value_norm, output_norm=output_norm,
            norm_after_rope=norm_after_rope, clip_qkv=clip_qkv, use_sinks=use_sinks, is_causal=is_causal,
            gate_activation=gate_activation, rotate_inputs=rotate_inputs, differential=differential,
        )  # fmt: skip
        if self._positions_in_use() and attention_axes not in (None, 1, (1,), [1]):
            used = ", ".join(
                f"`{name}`" for name in _POSITION_ARGUMENTS if getattr(self, name) not in (None, False)
            )
            raise ValueError(
                "Positions run along axis 1 (`(batch, len, features)` inputs): `attention_axes` must be "
                f"None or 1 with {used}. {_validation.received('attention_axes', attention_axes)}"
            )

    @property
    def _heads(self):
        return self._num_heads

    @property
    def _kv_heads(self):
        return self._num_heads

    @property
    def _head_dim(self):
        return self._key_dim

    @property
    def _scale_default(self):
        return self._inverse_sqrt_key_dim

    def _window(self):
        return getattr(self, "_sliding_window", None)

    def _gated(self):
        return getattr(self, "_use_gate", False)

    def _dropout_rate(self):
        return self._dropout

    def _expand_kv(self, tensor):
        return tensor

    def _with_cache(self, cache, **arguments):
        if self._value_dim != self._key_dim:
            raise ValueError(
                "A `cache` holds keys and values of one size: `value_dim` must equal `key_dim`. "
                f"Received: key_dim={self._key_dim}, value_dim={self._value_dim}"
            )
        return super()._with_cache(cache, **arguments)

    @classmethod
    def from_hf_config(cls, config, layer_index, **kwargs):
        """The self-attention of encoder layer `layer_index` of a Hugging Face transformers
        encoder, as transformers 5.25 has it:

        - **Encoders whose attention is plain** (BERT, RoBERTa, XLM-R, ELECTRA, CamemBERT,
          DistilBERT, Data2Vec-Text, ERNIE, RemBERT, X-MOD, ...: the types of
          `tf_posenc/_hf_plain_defaults.py`, printed from their modules), whose positions are a
          learned table added at the input (`hf_position_ids`), or ESM-2's rotation of queries
          and keys (`position_embedding_type="rotary"`): `num_attention_heads` heads of
          `hidden_size // num_attention_heads` (DistilBERT's `n_heads` and `dim`), projections
          with biases, the softmax scale `1 / sqrt(head_dim)`, and the output projection
          (BERT's `attention.output.dense`; its LayerNorm of the residual follows the layer).
          Whether it masks causally is the call's mask. A module whose code reads more (Shaw's
          relative keys, LayoutLMv3's position biases, MPNet's relative bias, BigBird's blocks)
          is refused, naming it.

        And encoders whose positions act inside attention, bidirectional:

        - **DeBERTa-v2/v3 and SEW-D** (`deberta-v2`, `sew-d`): `DisentangledSelfAttention` and the
          output projection `attention.output.dense`; `num_attention_heads` heads of
          `attention_head_size` (or `hidden_size // num_attention_heads`), projections with
          biases, the softmax scale `1 / sqrt(head_dim * (1 + len(pos_att_type)))`, and, with
          `relative_attention`, a `DisentangledPositionBias` as `position_bias`. Pass the
          encoder's one bias to every layer (`position_bias=bias`, from
          `DisentangledPositionBias.from_hf_config`): it holds the table all layers share. The
          residual LayerNorm of `attention.output` follows the layer in your block, as in BERT.
        - **Conformer speech encoders** (`wav2vec2-conformer`, `wav2vec2-bert` and
          `seamless_m4t` with `position_embeddings_type="relative"`, `parakeet_encoder`,
          `nemotron_asr_streaming_encoder`, or a config holding one as `encoder_config`: Parakeet
          CTC/TDT, Canary, Cohere ASR, Nemotron streaming ASR): the self-attention module with its
          own `TransformerXLPositionBias` (`linear_pos` / `relative_k_proj`, `pos_bias_u` /
          `bias_u`, `pos_bias_v` / `bias_v`), scale `1 / sqrt(head_dim)`.
        - **SAM-style and ViTDet vision encoders** (`sam_vision_model`, `sam_hq_vision_model`,
          `got_ocr2_vision`, `slanext_vision`, `pp_formulanet_vision`, `vitdet`, or a config holding
          one as `vision_config`: SAM, SAM-HQ, GOT-OCR 2, SLANeXt, PP-FormulaNet): the layer's
          attention (its window's, or the whole grid's in a global layer) with a
          `DecomposedPositionBias` for the grid its tables are learned for. Its tokens are the
          grid's cells (or a window's) row by row. For another grid (a resized image), pass
          `position_bias=DecomposedPositionBias(heads, head_dim, input_size, grid_size=...)`.

        Relative attention of other kinds (Shaw's `relative_key`, Gemma's chunked audio
        attention, XLNet, Funnel, DeBERTa v1) is refused by name. Load the weights with
        `tf_posenc.load_hf_attention_weights`. Decoders' attention is
        `GroupQueryAttention.from_hf_config`'s.

        Args:
            config: A config dict, a transformers config, a `config.json` or its folder.
            layer_index: Integer. The encoder layer (each has its own weights; all are built
                alike).
            **kwargs: Further constructor arguments (`position_bias`, `dtype`, `name`, or one to
                override).

        Example:

            >>> import tf_posenc
            >>> config = {"model_type": "deberta-v2", "hidden_size": 32, "num_attention_heads": 4,
            ...           "num_hidden_layers": 2, "relative_attention": True, "position_buckets": 16,
            ...           "pos_att_type": ["p2c", "c2p"], "share_att_key": True}
            >>> bias = tf_posenc.DisentangledPositionBias.from_hf_config(config)
            >>> layers = [MultiHeadAttention.from_hf_config(config, i, position_bias=bias) for i in range(2)]
            >>> layers[1].position_bias is bias, layers[0].key_dim
            (True, 8)
            >>> parakeet = {"model_type": "parakeet_encoder", "hidden_size": 32, "num_attention_heads": 4,
            ...             "num_key_value_heads": 4, "num_hidden_layers": 2}
            >>> layer = MultiHeadAttention.from_hf_config(parakeet, 1)
            >>> type(layer.position_bias).__name__, layer.position_bias.head_dim
            ('TransformerXLPositionBias', 8)
        """
        if kwargs.get("position_bias", 0) is None:  # "the one the config gives"
            kwargs = {name: value for name, value in kwargs.items() if name != "position_bias"}
        model_type = _hf_config.as_dict(config).get("model_type")
        read = next((read for types, read in _ENCODER_ATTENTION if model_type in types), None)
        if read is None and model_type in _hf_plain_defaults.REFUSED:
            raise ValueError(
                f"The attention module of model_type={model_type!r} needs a mechanism `MultiHeadAttention` "
                f"does not have: {_hf_plain_defaults.REFUSED[model_type]}."
            )
        if read is None:
            raise ValueError(
                "`config` must be an encoder whose attention is plain, with learned positions added at its "
                f"input ({', '.join(_hf_plain.TYPES)}), or "
                "one whose positions act inside attention: DeBERTa-v2/v3 or SEW-D "
                f"({sorted(_hf_deberta.DEFAULTS)}), or a Conformer speech encoder "
                f"({sorted(_hf_conformer.DEFAULTS)}, "
                "or a config holding one as `encoder_config`), or a SAM-style vision encoder "
                f"({sorted(_hf_decomposed.DEFAULTS)}). Decoders' attention is "
                f"`GroupQueryAttention.from_hf_config`'s. Received: model_type={model_type!r}"
            )
        module, arguments, bias = read(config, layer_index)
        if arguments.get("rope") is not None:
            arguments["rope"] = _rope_in_dtype(arguments["rope"], kwargs)
        given = kwargs.get("position_bias")
        if bias is None and given is not None:
            raise ValueError(
                f"`position_bias` must be None: the attention of model_type={module.model_type!r} has no "
                f"relative positions in this config. {_validation.received('position_bias', given)}"
            )
        if bias is not None:
            make, fits, expected = bias
            if given is None and make is None:
                # A table every layer shares, held outside the layer's own weights: one built here
                # would be random, and the layer's weights would load beside it without a word.
                raise ValueError(
                    f"The layers of model_type={module.model_type!r} share one relative position table, "
                    "held by the encoder (`encoder.rel_embeddings`): build it once with `bias = "
                    "tf_posenc.DisentangledPositionBias.from_hf_config(config)`, load it with "
                    "`tf_posenc.load_hf_attention_weights(bias, weights, prefix)` under the encoder's "
                    'prefix (such as "deberta.encoder."), and pass `position_bias=bias` to every layer. '
                    "Received: position_bias=None"
                )
            if given is None:
                options = {"dtype": kwargs["dtype"]} if "dtype" in kwargs else {}
                arguments["position_bias"] = make(**options)
            elif not fits(given):
                raise ValueError(
                    f"`position_bias` must be {expected}. {_validation.received('position_bias', given)}"
                )
        layer = cls(module.heads, module.head_dim, **{**arguments, **kwargs})
        layer._hf_module = module  # what `load_hf_attention_weights` loads
        return layer


def _deberta_attention(config, layer_index):
    """DeBERTa-v2's or SEW-D's module, the layer's arguments, and its position bias (no way to
    make it: the encoder's is shared and must be given; whether a given one fits, what it must
    be), or None without relative attention."""
    module = _hf_deberta.read(config)
    _hf_config.encoder_layer_index(layer_index, _hf_config.as_dict(config).get("num_hidden_layers"))
    arguments = {"use_bias": True, "is_causal": False}
    if not module.bias_arguments:
        # No position terms: the scale still counts `pos_att_type`, as transformers' does.
        arguments["scaling"] = 1.0 / math.sqrt(module.head_dim * (1 + len(module.pos_att_type)))
        return module, arguments, None

    def fits(given):
        return isinstance(given, DisentangledPositionBias) and all(
            getattr(given, name) == value for name, value in module.bias_arguments.items()
        )

    expected = (
        "the encoder's `DisentangledPositionBias`, as `DisentangledPositionBias.from_hf_config(config)` "
        "builds it"
    )
    return module, arguments, (None, fits, expected)  # none made here: the encoder's is given


def _conformer_attention(config, layer_index):
    """A Conformer encoder's module, the layer's arguments, and its own position bias."""
    module = _hf_conformer.read(config)
    whole = _hf_config.as_dict(config)
    if whole.get("model_type") != module.model_type:  # a parent's `encoder_config`
        whole = _hf_config.as_dict(whole.get("encoder_config") or {})
    _hf_config.encoder_layer_index(layer_index, whole.get("num_hidden_layers"))
    arguments = {"use_bias": module.biases, "is_causal": False}
    if module.rotary_base is not None:  # its hidden states turn before the projections
        arguments["rope"] = RotaryEmbedding(max_wavelength=module.rotary_base)
        arguments["rotate_inputs"] = True
    if not module.relative:
        return module, arguments, None

    def fits(given):
        return isinstance(given, TransformerXLPositionBias) and (
            given.num_heads,
            given.head_dim,
            given.hidden_size,
        ) == (module.heads, module.head_dim, module.hidden_size)

    def make(**options):
        return TransformerXLPositionBias(module.heads, module.head_dim, module.hidden_size, **options)

    expected = (
        f"a `TransformerXLPositionBias` of num_heads={module.heads}, head_dim={module.head_dim} and "
        f"hidden_size={module.hidden_size}"
    )
    return module, arguments, (make, fits, expected)


def _decomposed_attention(config, layer_index):
    """A SAM-style or ViTDet layer's module, the layer's arguments, and its position bias for the
    grid its tables are learned for (a given one may have another `grid_size`)."""
    module = _hf_decomposed.read(config, layer_index)
    arguments = {"use_bias": True, "is_causal": False}  # `proj` has a bias, whatever `qkv_bias`
    if not module.relative:
        return module, arguments, None

    def fits(given):
        return isinstance(given, DecomposedPositionBias) and (given.head_dim, given.input_size) == (
            module.head_dim,
            module.input_size,
        )

    def make(**options):
        return DecomposedPositionBias(module.heads, module.head_dim, module.input_size, **options)

    expected = (
        f"a `DecomposedPositionBias` of head_dim={module.head_dim} and input_size={module.input_size} "
        f"(layer {layer_index}'s tables), with `grid_size` the calls' grid"
    )
    return module, arguments, (make, fits, expected)


def _plain_attention(config, layer_index):
    """An encoder's attention without positions inside it (BERT's): its module and the layer's
    arguments. Whether it masks causally is the call's (`is_causal` None): BERT's own code takes
    the mask it is given, as a decoder too."""
    module = _hf_plain.read(config, layer_index)
    # transformers' `scaling`, given: the layer then computes as the other read modules do (the
    # softmax scale exact in float64, a query with no visible key weighting every key alike).
    arguments = {"use_bias": True, "scaling": module.head_dim**-0.5}
    if module.rotary:
        # ESM-2 scales its queries by `head_dim ** -0.5` before it rotates them (its `scaling` is
        # 1.0): the same scores, as the rotation is linear. Its rotation and its bidirectional
        # plan are the config's, as `hf_attention_layers` reads them.
        entry = hf_attention_layers(config)[layer_index]
        arguments.update(rope=entry.rope, is_causal=entry.causal)
    return module, arguments, None


# The encoders `MultiHeadAttention.from_hf_config` reads, by model type.
_ENCODER_ATTENTION = (
    (_hf_plain.TYPES, _plain_attention),
    (_hf_deberta.TYPES, _deberta_attention),
    (_hf_conformer.TYPES, _conformer_attention),
    (_hf_decomposed.TYPES, _decomposed_attention),
)


@keras.saving.register_keras_serializable(package="tf_posenc")
class GroupQueryAttention(PositionedAttentionMixin, keras.layers.GroupQueryAttention):
    """`keras.layers.GroupQueryAttention` with positions: rotations, score biases and a cache.

    Keras's arguments keep Keras's meaning, and with none of the new ones a call is Keras's own.
    The new constructor and call arguments are `MultiHeadAttention`'s; the cache holds
    `num_key_value_heads` heads, `(batch, 2, slots, num_key_value_heads, head_dim)`, and keys
    rotate before they are repeated for the query heads.

    Keras's arguments come first, with Keras's meaning (`head_dim`, `num_query_heads`,
    `num_key_value_heads`, `dropout`, `use_bias`, `sliding_window`, `flash_attention`, the
    initializers, regularizers and constraints, `use_gate`, `seed`); then, keyword-only,
    `MultiHeadAttention`'s `rope`, `position_bias`, `scaling` (defaulting to
    `1 / sqrt(head_dim)`), `temperature`, `chunk_size`, `logit_soft_cap`, `query_norm`,
    `key_norm`, `value_norm`, `output_norm`, `norm_after_rope`, `clip_qkv`, `use_sinks`,
    `is_causal`, `gate_activation`, `rotate_inputs` and `differential`.
    Keras's `use_gate` is the output gate of Qwen3-Next and Qwen3.5 (`sigmoid` of a projection
    of the query input, multiplying each head's output).

    Args:
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        As `MultiHeadAttention`'s.

    Example:

        >>> import tf_posenc
        >>> layer = GroupQueryAttention(8, 4, 2, rope=tf_posenc.RotaryEmbedding())
        >>> x = keras.ops.ones((1, 5, 16))
        >>> tuple(layer(x, x, use_causal_mask=True).shape)
        (1, 5, 16)
    """

    _head_dim_name = "head_dim"

    def __init__(
        self,
        head_dim,
        num_query_heads,
        num_key_value_heads,
        dropout=0.0,
        use_bias=True,
        sliding_window=None,
        flash_attention=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        use_gate=False,
        seed=None,
        *,
        rope=None,
        position_bias=None,
        scaling=None,
        temperature=None,
        chunk_size=None,
        logit_soft_cap=None,
        query_norm=None,
        key_norm=None,
        value_norm=None,
        output_norm=None,
        norm_after_rope=False,
        clip_qkv=None,
        use_sinks=False,
        is_causal=None,
        gate_activation="sigmoid",
        rotate_inputs=False,
        differential=None,
        **kwargs,
    ):
        keras_arguments = {
            "dropout": dropout, "use_bias": use_bias, "flash_attention": flash_attention,
            "kernel_initializer": kernel_initializer, "bias_initializer": bias_initializer,
            "kernel_regularizer": kernel_regularizer, "bias_regularizer": bias_regularizer,
            "activity_regularizer": activity_regularizer, "kernel_constraint": kernel_constraint,
            "bias_constraint": bias_constraint, "seed": seed,
        }  # fmt: skip
        keras_arguments.update(_newer_keras_arguments(sliding_window, use_gate))
        super().__init__(
            head_dim, num_query_heads, num_key_value_heads, **keras_arguments, **_without_autocast(kwargs)
        )
        self._init_positions(
            rope=rope, position_bias=position_bias, scaling=scaling, temperature=temperature,
            chunk_size=chunk_size, logit_soft_cap=logit_soft_cap, query_norm=query_norm,
            key_norm=key_norm, value_norm=value_norm, output_norm=output_norm,
            norm_after_rope=norm_after_rope, clip_qkv=clip_qkv, use_sinks=use_sinks, is_causal=is_causal,
            gate_activation=gate_activation, rotate_inputs=rotate_inputs, differential=differential,
        )  # fmt: skip

    @property
    def _heads(self):
        return self.num_query_heads

    @property
    def _kv_heads(self):
        return self.num_key_value_heads

    @property
    def _head_dim(self):
        return self.head_dim

    @property
    def _scale_default(self):
        return self._inverse_sqrt_head_dim

    def _window(self):
        return getattr(self, "sliding_window", None)

    def _gated(self):
        return getattr(self, "use_gate", False)

    def _dropout_rate(self):
        return self.dropout

    def _expand_kv(self, tensor):
        return ops.repeat(tensor, self.num_repeats, axis=2)

    @classmethod
    def from_hf_config(cls, config, layer_index, **kwargs):
        """The attention of decoder layer `layer_index` of a Hugging Face transformers model.

        The whole attention module as the model's transformers 5.25 code has it: from
        `tf_posenc.hf_attention_layers(config)[layer_index]` the rope, window, chunk,
        temperature and softmax scale; from the model type's record and the config, the head
        counts and size, which projections have a bias (a projection without one is loaded with
        zeros), the query and key norms (`HeadNormalization`, before or after the rotation),
        Gemma 3n's value norm, `clip_qkv`, the soft cap, sinks and the output gate. Load the
        checkpoint's weights with `tf_posenc.load_hf_attention_weights`, which knows the module's
        names and fused layouts. A module with a mechanism the layer does not have (the porting
        page lists them) is a `ValueError` naming it. The layer knows whether its model is
        causal (`is_causal`): a decoder's masks causally whether or not a call passes
        `use_causal_mask=True`; a bidirectional one (EmbeddingGemma, Gemma 4's
        `use_bidirectional_attention="all"`) refuses it.

        Args:
            config: As for `tf_posenc.hf_attention_layers`.
            layer_index: Integer. The decoder layer.
            **kwargs: Further constructor arguments (`dtype`, `name`, or one to override).

        Example:

            >>> config = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4,
            ...           "num_key_value_heads": 2, "num_hidden_layers": 2, "rope_theta": 500000.0}
            >>> layer = GroupQueryAttention.from_hf_config(config, 0)
            >>> layer.head_dim, layer.num_query_heads, layer.num_key_value_heads, layer.rope.max_wavelength
            (8, 4, 2, 500000.0)
        """
        read = _hf_config.read(config)
        plan = hf_attention_layers(config)
        if not _positions.is_python_int(layer_index) or not 0 <= layer_index < len(plan):
            raise ValueError(
                f"`layer_index` must be a decoder layer of the config, 0 .. {len(plan) - 1}. "
                f"{_validation.received('layer_index', layer_index)}"
            )
        entry = plan[layer_index]
        if not entry.self_attention:
            raise ValueError(
                f"Layer {layer_index} is not self-attention (a linear-attention, state-space, convolution or "
                "cross-attention layer): no position reaches it, and it is no `GroupQueryAttention`."
            )
        if _hf_config.is_latent_attention(read):
            raise ValueError(
                f"The layers of model_type={read.get('model_type')!r} are latent attention (DeepSeek's MLA), "
                "not `GroupQueryAttention`: build them with `MultiHeadLatentAttention.from_hf_config`."
            )
        if entry.kv_shared_layer_index is not None:
            raise ValueError(
                f"Layer {layer_index} attends to the keys and values of layer {entry.kv_shared_layer_index} "
                "(Gemma 3n's and 4's shared layers): build it with `cache=` that layer's cache and no "
                "`cache_update_index`; `from_hf_config` builds layers with keys of their own."
            )
        kinds = _hf_config.layer_types_of(read)
        layer_type = kinds[layer_index] if layer_index < len(kinds) else None
        sizes = _hf_attention.layer_sizes(read, layer_index, layer_type)
        heads = sizes.get("num_attention_heads") or read["num_attention_heads"]
        head_dim = sizes.get("head_dim") or read.get("head_dim") or read["hidden_size"] // heads
        kv_heads = (
            sizes.get("num_key_value_heads")
            or _hf_attention.config_value(read, "num_key_value_heads")
            or heads
        )
        module = _hf_attention.module_record(read, heads, kv_heads, head_dim, entry, layer_type, layer_index)
        rope = None if entry.rope is None else _rope_in_dtype(entry.rope, kwargs)
        scaling = entry.scaling
        if module.score_scale is not None:
            scaling = (module.head_dim**-0.5 if scaling is None else scaling) * module.score_scale
        arguments = {
            "use_bias": bool(module.biases),
            "rope": rope,
            "scaling": scaling,
            "temperature": entry.temperature,
            "chunk_size": entry.chunk_size,
            "logit_soft_cap": module.soft_cap,
            "clip_qkv": module.clip_qkv,
            "use_sinks": module.sinks,
            "is_causal": entry.causal,
        }
        if module.gate is not None:
            if "use_gate" not in inspect.signature(keras.layers.GroupQueryAttention.__init__).parameters:
                raise ValueError(
                    f"The attention of model_type={module.model_type!r} gates its output, which needs "
                    f"Keras's `use_gate` (Keras 3.14 and later). Received: Keras {keras.__version__}"
                )
            arguments["use_gate"] = True
            arguments["gate_activation"] = module.gate_activation
        if entry.sliding_window is not None:
            # transformers' causal window (q - W < k <= q) is Keras's band of W with the causal
            # mask; its bidirectional one (|q - k| <= W) is Keras's band of W + 1.
            arguments["sliding_window"] = entry.sliding_window + (0 if entry.causal else 1)
        if module.differential is not None:  # DiffLlama's: its `groupnorm`, RMS without a scale
            options = {"dtype": kwargs["dtype"]} if "dtype" in kwargs else {}
            arguments["differential"] = module.differential
            arguments["output_norm"] = HeadNormalization(
                method="rms", epsilon=module.epsilon, scale=False, name="output_norm", **options
            )
        if module.output_norm is not None:  # over all heads' features, a scale per feature
            name, epsilon = module.output_norm
            options = {"dtype": kwargs["dtype"]} if "dtype" in kwargs else {}
            arguments["output_norm"] = HeadNormalization(
                method="rms", epsilon=epsilon, axis=(-2, -1), name="output_norm", **options
            )
        norm = module.norm
        if norm is not None:
            options = {
                "method": norm.method, "epsilon": module.epsilon, "axis": norm.axis,
                "per_head": norm.per_head, "scale": norm.scale, "center": norm.center,
            }  # fmt: skip
            if "dtype" in kwargs:
                options["dtype"] = kwargs["dtype"]
            arguments["query_norm"] = HeadNormalization(**options, name="query_norm")
            arguments["key_norm"] = HeadNormalization(**options, name="key_norm")
            arguments["norm_after_rope"] = norm.after_rope
            if norm.values:
                options.update(method="rms", axis=-1, per_head=False, scale=False, center=False)
                arguments["value_norm"] = HeadNormalization(**options, name="value_norm")
        layer = cls(module.head_dim, heads, module.kv_heads, **{**arguments, **kwargs})
        layer._hf_module = module  # what `load_hf_attention_weights` loads
        return layer
