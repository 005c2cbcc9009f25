"""DeBERTa-v2/v3's disentangled attention: content-to-position and position-to-content scores."""

import keras
import numpy as np
from keras import ops

from tf_posenc import _hf_deberta, _positions, _validation, deberta
from tf_posenc.layers.base import PositionLayer, config_entries
from tf_posenc.layers.score_bias import paired_positions

_TERMS = ("c2p", "p2c")


def _distance_buckets(position_buckets, max_position, span):
    """The bucket of each distance `0 .. D` (`deberta_relative_positions`' float32 arithmetic),
    where every distance from `D` on lands past the table either way (`bucket >= span`), or, for
    the smallest bucket counts, in the bucket `D`'s: a call takes `min(distance, D)`."""
    if position_buckets <= 0:
        return np.arange(span + 1)
    mid = position_buckets // 2
    if mid == 1:  # log spacing by `mid - 1 = 0`: every distance past 1 shares bucket 1
        return np.arange(2)
    limit = 2 * max(max_position, span) + 2
    while True:
        table = deberta._log_buckets(np.arange(limit + 1), position_buckets, max_position)
        if table[-1] >= span:
            return table[: int(np.argmax(table >= span)) + 1]
        limit *= 2


@keras.saving.register_keras_serializable(package="tf_posenc")
class DisentangledPositionBias(PositionLayer):
    """DeBERTa-v2/v3's relative positions: a table of relative embeddings, shared by every
    attention layer of the encoder, from which each layer scores content against position.

    For a query at position `i` and a key at `j`, the relative position `i - j` (DeBERTa's sign)
    falls in a bucket `r` (log-spaced from `position_buckets // 2` on, as
    `tf_posenc.deberta_relative_positions` gives it), and the index `clip(r + span, 0, 2 * span -
    1)` picks a row of the table `rel_embeddings`, `(2 * span, hidden_size)` (`span` is
    `position_buckets`, or without buckets `max_relative_positions`), LayerNorm'd when
    `norm_rel_ebd="layer_norm"`. An attention layer projects the table into position keys and
    queries (with its own key and query projections when `share_att_key`, else with
    projections of its own, `pos_key` and `pos_query`) and adds to `q . k`:
    - `"c2p"`: the query against the position key of the pair's index, `q_i . pk[idx(i, j)]`;
    - `"p2c"`: the key against the position query of the same index, `k_j . pq[idx(i, j)]`,
    all three scaled by `1 / sqrt(head_dim * (1 + len(pos_att_type)))`.

    Give one layer to every `tf_posenc.MultiHeadAttention` of the encoder as its
    `position_bias` (it is their shared weights), or build them with
    `MultiHeadAttention.from_hf_config`. The arguments are transformers' config keys, with
    their meaning (keras-hub's DeBERTa-v3 calls `position_buckets` `bucket_size`, and builds
    only `share_att_key=True` with both terms and the LayerNorm).

    Args:
        num_heads: Integer. The attention layers' heads.
        hidden_size: Integer. The width of the table's rows: the attention layers' input width.
        position_buckets: Integer: the number of buckets per direction, or `-1` (any value
            below 1) for one row per offset up to `max_relative_positions`. Defaults to `256`
            (DeBERTa-v3's).
        max_relative_positions: Integer: the farthest offset the log buckets reach (without
            buckets, the table's half-width), or `-1` for `max_position_embeddings`. Defaults to
            `-1`.
        max_position_embeddings: Integer. Defaults to `512`.
        pos_att_type: List of `"c2p"` and/or `"p2c"`: the terms scored. Defaults to
            `["p2c", "c2p"]`.
        share_att_key: Boolean: the attention layers project the table with their own query and
            key projections, not with `pos_query` and `pos_key` of their own. Defaults to
            `True`.
        norm_rel_ebd: `"layer_norm"` (the table passes a LayerNorm, weights `layer_norm`) or
            `"none"`. Defaults to `"layer_norm"`.
        layer_norm_eps: Float. Defaults to `1e-7`.
        embeddings_initializer: Initializer of the table. Defaults to `"random_normal"`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        queries: Float tensor `(batch, q_len, num_heads, head_dim)`: an attention layer's
            projected queries.
        keys: Float tensor `(batch, k_len, num_heads, head_dim)`: its projected keys.
        position_keys: Float tensor `(2 * span, num_heads, head_dim)`: the table projected as
            keys; needed for `"c2p"`.
        position_queries: Float tensor `(2 * span, num_heads, head_dim)`: the table projected
            as queries; needed for `"p2c"`.
        query_positions: Optional integer tensor `(q_len,)` or `(batch, q_len)`, with
            `key_positions`. Defaults to `0 .. q_len - 1`.
        key_positions: Optional integer tensor `(k_len,)` or `(batch, k_len)`. Defaults to
            `0 .. k_len - 1`.

        Returns the unscaled position scores, `(batch, num_heads, q_len, k_len)`.

    Example:

        >>> import tf_posenc
        >>> bias = DisentangledPositionBias(num_heads=2, hidden_size=16, position_buckets=8,
        ...                                 max_relative_positions=32)
        >>> keras.ops.convert_to_numpy(bias.relative_positions([0], [0, 1, 3, 9, 40]))[0, 0].tolist()
        [0, -1, -3, -6, -8]
        >>> layer = tf_posenc.MultiHeadAttention(num_heads=2, key_dim=8, position_bias=bias)
        >>> x = keras.ops.ones((1, 5, 16))
        >>> tuple(layer(x, x).shape)
        (1, 5, 16)
    """

    def __init__(
        self,
        num_heads,
        hidden_size,
        position_buckets=256,
        max_relative_positions=-1,
        max_position_embeddings=512,
        pos_att_type=("p2c", "c2p"),
        share_att_key=True,
        norm_rel_ebd="layer_norm",
        layer_norm_eps=1e-7,
        embeddings_initializer="random_normal",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = _validation.positive_int("num_heads", num_heads)
        self.hidden_size = _validation.positive_int("hidden_size", hidden_size)
        self.position_buckets = _validation.integer("position_buckets", position_buckets)
        self.max_relative_positions = _validation.integer("max_relative_positions", max_relative_positions)
        self.max_position_embeddings = _validation.positive_int(
            "max_position_embeddings", max_position_embeddings
        )
        terms = _hf_deberta._pos_att_type(pos_att_type)
        if not terms:
            raise ValueError(
                '`pos_att_type` must hold "c2p" and/or "p2c": without a term the layer adds nothing. '
                f"{_validation.received('pos_att_type', pos_att_type)}"
            )
        self.pos_att_type = list(terms)
        self.share_att_key = _validation.boolean("share_att_key", share_att_key)
        self.norm_rel_ebd = _validation.one_of("norm_rel_ebd", norm_rel_ebd, ("layer_norm", "none"))
        self.layer_norm_eps = _validation.positive_number("layer_norm_eps", layer_norm_eps)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        # transformers' `max_relative_positions < 1` means `max_position_embeddings`; the table's
        # half-width is the bucket count where there are buckets.
        self._max_position = (
            self.max_relative_positions if self.max_relative_positions >= 1 else self.max_position_embeddings
        )
        if self.position_buckets > 0 and not 1 <= self.position_buckets // 2 < self._max_position - 1:
            raise ValueError(
                "Log buckets need `position_buckets` of at least 2 and a farthest offset "
                "(`max_relative_positions`, or `max_position_embeddings` without it) above "
                "`position_buckets // 2 + 1`. Received: "
                f"position_buckets={self.position_buckets}, "
                f"max_relative_positions={self.max_relative_positions}, "
                f"max_position_embeddings={self.max_position_embeddings}"
            )
        self.span = self.position_buckets if self.position_buckets > 0 else self._max_position
        self._distance_buckets = _distance_buckets(self.position_buckets, self._max_position, self.span)
        self.layer_norm = None
        if self.norm_rel_ebd == "layer_norm":
            self.layer_norm = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_eps, dtype=self.dtype_policy, name="layer_norm"
            )

    @property
    def scale_factor(self):
        """`1 + len(pos_att_type)`: the softmax scale is `1 / sqrt(head_dim * scale_factor)`."""
        return 1 + len(self.pos_att_type)

    def build(self, input_shape=None):
        self.rel_embeddings = self.add_weight(
            name="rel_embeddings",
            shape=(2 * self.span, self.hidden_size),
            initializer=self.embeddings_initializer,
        )
        if self.layer_norm is not None and not self.layer_norm.built:
            self.layer_norm.build((2 * self.span, self.hidden_size))
        self.built = True

    def embeddings(self):
        """The table the attention layers project, `(2 * span, hidden_size)`, LayerNorm'd where
        `norm_rel_ebd="layer_norm"`, in the compute dtype."""
        if not self.built:
            self.build()
        table = self.rel_embeddings
        if self.layer_norm is not None:
            table = self.layer_norm(table)
        return ops.cast(table, self.compute_dtype)

    def relative_positions(self, query_positions, key_positions):
        """The bucket of each (query, key) pair's relative position `query - key`, int32 `(batch
        or 1, q_len, k_len)`: `tf_posenc.deberta_relative_positions` at any positions, clipped
        where the table ends either way."""
        queries = _positions.batched_positions("query_positions", query_positions)
        keys = _positions.batched_positions("key_positions", key_positions)
        relative = ops.expand_dims(queries, 2) - ops.expand_dims(keys, 1)
        last = len(self._distance_buckets) - 1
        distance = ops.minimum(ops.abs(relative), last)
        buckets = ops.take(ops.convert_to_tensor(self._distance_buckets.astype("int32")), distance, axis=0)
        return ops.sign(relative) * buckets

    def _indices(self, query_positions, key_positions):
        """The table row of each pair: `clip(bucket + span, 0, 2 * span - 1)`."""
        buckets = self.relative_positions(query_positions, key_positions)
        return ops.clip(buckets + self.span, 0, 2 * self.span - 1)

    def call(self, queries, keys, position_keys=None, position_queries=None, query_positions=None,
             key_positions=None):  # fmt: skip
        for name, tensor in (("queries", queries), ("keys", keys)):
            if len(tensor.shape) != 4 or tensor.shape[2] not in (None, self.num_heads):
                raise ValueError(
                    f"`{name}` must have shape (batch, len, {self.num_heads}, head_dim). "
                    f"Received: {name}.shape={tuple(tensor.shape)}"
                )
        needed = {"c2p": ("position_keys", position_keys), "p2c": ("position_queries", position_queries)}
        for term in self.pos_att_type:
            name, tensor = needed[term]
            if tensor is None:
                raise ValueError(f'`{name}` must be given for the "{term}" term. Received: {name}=None')
            if tuple(tensor.shape)[:2] != (2 * self.span, self.num_heads):
                raise ValueError(
                    f"`{name}` must have shape ({2 * self.span}, {self.num_heads}, head_dim): the table "
                    f"projected. Received: {name}.shape={tuple(tensor.shape)}"
                )
        query_positions, key_positions = paired_positions(
            query_positions, key_positions, ops.shape(queries)[1], ops.shape(keys)[1]
        )
        return self.scores(queries, keys, position_keys, position_queries, query_positions, key_positions)

    def scores(self, queries, keys, position_keys, position_queries, query_positions, key_positions):
        """The position scores, unscaled, `(batch, heads, q_len, k_len)`: `call` without its
        checks, for the attention layers."""
        indices = ops.expand_dims(self._indices(query_positions, key_positions), 1)  # (b, 1, q, k)
        batch, heads = ops.shape(queries)[0], ops.shape(queries)[2]
        q_len, k_len = ops.shape(queries)[1], ops.shape(keys)[1]
        total = None
        if "c2p" in self.pos_att_type:
            # Each query against every row, then each (query, key) pair's row picked.
            rows = ops.einsum("bqhd,rhd->bhqr", queries, ops.cast(position_keys, queries.dtype))
            picked = ops.broadcast_to(indices, (batch, heads, q_len, k_len))
            total = ops.take_along_axis(rows, picked, axis=-1)
        if "p2c" in self.pos_att_type:
            rows = ops.einsum("bkhd,rhd->bhkr", keys, ops.cast(position_queries, keys.dtype))
            picked = ops.broadcast_to(ops.transpose(indices, (0, 1, 3, 2)), (batch, heads, k_len, q_len))
            term = ops.transpose(ops.take_along_axis(rows, picked, axis=-1), (0, 1, 3, 2))
            total = term if total is None else total + term
        return total

    def compute_output_spec(self, queries, keys, *args, **kwargs):
        shape = (queries.shape[0], self.num_heads, queries.shape[1], keys.shape[1])
        return keras.KerasTensor(shape, dtype=self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            **config_entries(
                self, "num_heads", "hidden_size", "position_buckets", "max_relative_positions",
                "max_position_embeddings", "pos_att_type", "share_att_key", "norm_rel_ebd", "layer_norm_eps",
            ),
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        }  # fmt: skip

    @classmethod
    def from_hf_config(cls, config, **kwargs):
        """The relative embeddings of a DeBERTa-v2/v3 or SEW-D encoder (`encoder.rel_embeddings`
        and `encoder.LayerNorm`), from its transformers config: `position_buckets`,
        `max_relative_positions`, `max_position_embeddings`, `pos_att_type` (a list, or an older
        config's `"p2c|c2p"`), `share_att_key`, `norm_rel_ebd` and `layer_norm_eps`, with the
        config class's defaults where a key is absent. A config without `relative_attention` or
        without a term has no such table: a `ValueError` (its attention layers take no
        `position_bias`). Load the weights with `tf_posenc.load_hf_attention_weights(layer,
        weights, "deberta.encoder.")`.

        Args:
            config: A config dict, a transformers config, a `config.json` or its folder.
            **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

        Example:

            >>> config = {"model_type": "deberta-v2", "hidden_size": 32, "num_attention_heads": 4,
            ...           "relative_attention": True, "position_buckets": 256,
            ...           "pos_att_type": "p2c|c2p", "share_att_key": True, "norm_rel_ebd": "layer_norm"}
            >>> bias = DisentangledPositionBias.from_hf_config(config)
            >>> bias.span, bias.pos_att_type, bias.max_position_embeddings
            (256, ['p2c', 'c2p'], 512)
        """
        module = _hf_deberta.read(config)
        if not module.bias_arguments:
            raise ValueError(
                f"This {module.model_type!r} config has no relative embeddings: it needs "
                "`relative_attention=True` and a `pos_att_type`. Received: "
                f"relative_attention={module.relative_attention}, pos_att_type={list(module.pos_att_type)}"
            )
        return cls(**module.bias_arguments, **kwargs)
