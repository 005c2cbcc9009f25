"""Transformer-XL's relative positions, as Conformer models use them: a sinusoid of each
(query, key) offset, projected, scored against the query, with two learned biases per head."""

import keras
from keras import ops

from tf_posenc import _columns, _positions, _rows, _validation
from tf_posenc.layers.base import PositionLayer, config_entries
from tf_posenc.layers.score_bias import paired_positions


@keras.saving.register_keras_serializable(package="tf_posenc")
class TransformerXLPositionBias(PositionLayer):
    """Transformer-XL's relative position scores (Dai et al., 2019), as Conformer speech encoders
    compute them: Wav2Vec2-Conformer, Wav2Vec2-BERT, Parakeet, FastSpeech 2's Conformer.

    For a query `q_i` at position `i` and a key `k_j` at `j`, the layer's score adds to `q_i . k_j`
    - `u . k_j`, a learned bias per head against the key (`pos_bias_u`), and
    - `(q_i + v) . W r(i - j)`, the query with a second learned bias (`pos_bias_v`) against the
      projection `W` (`linear_pos`, no bias by default) of the sinusoid of the offset: `r(t)` is
      the paper's row of `t` (`sin(t w_k)`, `cos(t w_k)` interleaved, `w_k =
      max_wavelength^(-2k / hidden_size)`), at negative offsets too,
    all scaled as `q . k` is. transformers builds this with a table of the offsets `L - 1 ..
    -(L - 1)` and a "relative shift" of the scores; here each pair's offset is computed from the
    positions, so padding, any positions and a cache follow one rule, and the rows are tf_posenc's
    exact ones. The weights are each attention layer's own: give each
    `tf_posenc.MultiHeadAttention` its own layer as `position_bias`, or build them with
    `MultiHeadAttention.from_hf_config`. The argument and weight names are transformers'.

    Args:
        num_heads: Integer. The attention layer's heads.
        head_dim: Integer. Its head size.
        hidden_size: Integer. The width of the sinusoid (transformers' `hidden_size`, the
            model's width), which `linear_pos` maps to `num_heads * head_dim`.
        max_wavelength: Float. The sinusoid's base. Defaults to `10000`.
        use_bias: Boolean: whether `linear_pos` has a bias. Defaults to `False`.
        kernel_initializer: Initializer of `linear_pos`. Defaults to `"glorot_uniform"`.
        bias_initializer: Initializer of `pos_bias_u`, `pos_bias_v` and the projection's bias.
            Defaults to `"zeros"` (transformers' initial values).
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        queries: Float tensor `(batch, q_len, num_heads, head_dim)`: an attention layer's projected
            queries.
        keys: Float tensor `(batch, k_len, num_heads, head_dim)`: its projected keys.
        query_positions: Optional integer tensor `(q_len,)` or `(batch, q_len)`, with
            `key_positions`. Defaults to `0 .. q_len - 1`.
        key_positions: Optional integer tensor `(k_len,)` or `(batch, k_len)`. Defaults to
            `0 .. k_len - 1`.

        Returns the unscaled position scores, `(batch, num_heads, q_len, k_len)`.

    Example:

        >>> import tf_posenc
        >>> bias = TransformerXLPositionBias(num_heads=2, head_dim=8, hidden_size=16)
        >>> layer = tf_posenc.MultiHeadAttention(num_heads=2, key_dim=8, position_bias=bias)
        >>> x = keras.ops.ones((1, 5, 16))
        >>> tuple(layer(x, x).shape)
        (1, 5, 16)
        >>> rows = keras.ops.convert_to_numpy(bias.relative_rows([-1, 0, 1]))
        >>> rows[:, :2].astype("float64").round(4).tolist()
        [[-0.8415, 0.5403], [0.0, 1.0], [0.8415, 0.5403]]

    References:
        [Dai et al., 2019](https://arxiv.org/abs/1901.02860),
        [Gulati et al., 2020](https://arxiv.org/abs/2005.08100)
    """

    def __init__(
        self,
        num_heads,
        head_dim,
        hidden_size,
        max_wavelength=10000,
        use_bias=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = _validation.positive_int("num_heads", num_heads)
        self.head_dim = _validation.positive_int("head_dim", head_dim)
        self.hidden_size = _validation.positive_int("hidden_size", hidden_size)
        if self.hidden_size % 2:
            raise ValueError(
                "`hidden_size` must be even: the sinusoid's columns come in (sin, cos) pairs. "
                f"{_validation.received('hidden_size', hidden_size)}"
            )
        self.max_wavelength = _validation.wavelength("max_wavelength", max_wavelength)
        self.use_bias = _validation.boolean("use_bias", use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        frequencies, cosine = _columns.columns(self.hidden_size, self.max_wavelength, "interleave", "paper")
        self._provider = _rows.provider(frequencies, cosine)
        # A negative offset's row: its sines change sign, its cosines do not.
        self._negated = [1.0 if flag else -1.0 for flag in cosine]
        self.linear_pos = keras.layers.EinsumDense(
            "nc,chd->nhd",
            output_shape=(self.num_heads, self.head_dim),
            bias_axes="hd" if self.use_bias else None,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="linear_pos",
        )

    def build(self, input_shape=None):
        shape = (self.num_heads, self.head_dim)
        self.pos_bias_u = self.add_weight(name="pos_bias_u", shape=shape, initializer=self.bias_initializer)
        self.pos_bias_v = self.add_weight(name="pos_bias_v", shape=shape, initializer=self.bias_initializer)
        if not self.linear_pos.built:
            self.linear_pos.build((None, self.hidden_size))
        self.built = True

    def relative_rows(self, offsets):
        """The sinusoid of each integer offset (any sign; `|offset| < 2**31`), `offsets.shape +
        (hidden_size,)`, in the compute dtype: tf_posenc's row of `|offset|`, its sines negated
        where the offset is negative."""
        offsets = ops.convert_to_tensor(offsets, "int32")
        rows = self._provider.rows(_positions.Positions(values=ops.abs(offsets)), None, self.compute_dtype)
        negated = ops.convert_to_tensor(self._negated, rows.dtype)
        return ops.where(ops.expand_dims(offsets < 0, -1), rows * negated, rows)

    def call(self, queries, keys, query_positions=None, key_positions=None):
        for name, tensor in (("queries", queries), ("keys", keys)):
            if len(tensor.shape) != 4 or tuple(tensor.shape[2:]) not in (
                (self.num_heads, self.head_dim),
                (None, None),
                (self.num_heads, None),
                (None, self.head_dim),
            ):
                raise ValueError(
                    f"`{name}` must have shape (batch, len, {self.num_heads}, {self.head_dim}). "
                    f"Received: {name}.shape={tuple(tensor.shape)}"
                )
        query_positions, key_positions = paired_positions(
            query_positions, key_positions, ops.shape(queries)[1], ops.shape(keys)[1]
        )
        return self.scores(queries, keys, query_positions, key_positions)

    def scores(self, queries, keys, query_positions, key_positions):
        """The position scores, unscaled, `(batch, heads, q_len, k_len)`, of int32 positions
        `(batch or 1, len)`: `call` without its checks, for the attention layers."""
        if not self.built:
            self.build()
        dtype = queries.dtype
        u = ops.cast(self.pos_bias_u, dtype)
        v = ops.cast(self.pos_bias_v, dtype)
        content = ops.expand_dims(ops.einsum("hd,bkhd->bhk", u, keys), 2)  # (b, h, 1, k)
        # Every offset the call has, from the smallest to the largest: projected once, scored
        # against every query, then each pair's offset picked.
        # `q_len + k_len - 1` offsets, a size known when the lengths are (XLA and compiled JAX
        # need one): every offset of positions that each run without gaps (contiguous, padded,
        # cached, packed) — more than that is an error, not a wrong score.
        offsets = ops.expand_dims(query_positions, 2) - ops.expand_dims(key_positions, 1)
        q_len, k_len = ops.shape(queries)[1], ops.shape(keys)[1]
        lowest = ops.min(offsets)
        span = q_len + k_len - 1
        excess = ops.max(offsets) - lowest + 1 - span
        message = (
            "The positions' offsets (query - key) must span at most q_len + k_len - 1 values, as "
            "positions without gaps do: Transformer-XL's table has one row per offset of the call."
        )
        # The lowest offset again, from the checked excess: a graph keeps the check, which a
        # product by 0 would let it fold away.
        lowest = ops.max(offsets) + 1 - span - _positions.checked_not_positive(excess, message)
        table = self.linear_pos(self.relative_rows(ops.arange(span, dtype="int32") + lowest))
        position = ops.einsum("bqhd,nhd->bhqn", queries + v, ops.cast(table, dtype))
        batch, heads = ops.shape(queries)[0], ops.shape(queries)[2]
        picked = ops.broadcast_to(ops.expand_dims(offsets - lowest, 1), (batch, heads, q_len, k_len))
        return ops.take_along_axis(position, picked, axis=-1) + content

    def compute_output_spec(self, queries, keys, *args, **kwargs):
        shape = (queries.shape[0], self.num_heads, queries.shape[1], keys.shape[1])
        return keras.KerasTensor(shape, dtype=self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            **config_entries(self, "num_heads", "head_dim", "hidden_size", "max_wavelength", "use_bias"),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
