"""ViTDet's and SAM's decomposed relative positions: a query scored against a learned row of its
vertical offset and one of its horizontal offset to each key of a 2-D grid."""

import keras
import numpy as np
from keras import ops

from tf_posenc import _positions, _validation
from tf_posenc.layers.base import PositionLayer, config_entries
from tf_posenc.layers.score_bias import paired_positions


def linear_resize_weights(source, target):
    """torch's `interpolate(mode="linear", align_corners=False)` from `source` rows to `target`,
    as a float64 `(target, source)` matrix: output `i` reads `s = max((i + 0.5) * source / target -
    0.5, 0)` between rows `floor(s)` and `floor(s) + 1` (the last row at the end); the identity
    when the sizes agree."""
    where = np.maximum((np.arange(target) + 0.5) * source / target - 0.5, 0.0)
    first = np.floor(where).astype(np.int64)
    fraction = where - first
    weights = np.zeros((target, source))
    np.add.at(weights, (np.arange(target), first), 1.0 - fraction)
    np.add.at(weights, (np.arange(target), np.minimum(first + 1, source - 1)), fraction)
    return weights


def _grid(name, value):
    pair = tuple(value) if isinstance(value, (list, tuple)) else (value, value)
    if len(pair) != 2:
        raise ValueError(
            f"`{name}` must be an integer or a pair (height, width). {_validation.received(name, value)}"
        )
    return tuple(_validation.positive_int(name, side) for side in pair)


@keras.saving.register_keras_serializable(package="tf_posenc")
class DecomposedPositionBias(PositionLayer):
    """ViTDet's decomposed relative positions (Li et al., 2022), as SAM's and its descendants'
    vision encoders use them: a query at grid cell `(y, x)` scores, against a key at `(y', x')`,
    `q . Rh[y - y'] + q . Rw[x - x']`, from two learned tables shared by the heads.

    The tables `rel_pos_h` `(2 * height - 1, head_dim)` and `rel_pos_w` `(2 * width - 1, head_dim)`
    are learned for the grid `input_size` (SAM's `image_size // patch_size` in its global
    layers, its `window_size` in its windowed ones). On another grid, `grid_size`, each table is
    resized to `2 * side - 1` rows as transformers' `get_rel_pos` resizes it (torch's linear
    interpolation, `align_corners=False`), an exact float64 matrix. The query is the projected one
    before the softmax scale, as in transformers: the bias is added to the scaled `q . k`. Give
    the layer to a `tf_posenc.MultiHeadAttention` as `position_bias`; its tokens are the grid's
    cells in row-major order (positions `y * width + x`), or any of them given as positions.
    Used by SAM, SAM-HQ, ViTDet (and ViTMatte's backbone), GOT-OCR 2, SLANeXt, PP-FormulaNet,
    DeepSeek-OCR 2 and SegGPT. The weights' names are transformers'.

    Args:
        num_heads: Integer. The attention layer's heads (the tables serve them all).
        head_dim: Integer. Its head size.
        input_size: Integer or `(height, width)`: the grid the tables are learned for.
        grid_size: Optional integer or `(height, width)`: the grid of the layer's calls, when it
            is not `input_size` (a resized image's). Defaults to `input_size`.
        embeddings_initializer: Initializer of the tables. Defaults to `"zeros"` (transformers'
            initial values for SAM).
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        queries: Float tensor `(batch, q_len, num_heads, head_dim)`: an attention layer's
            projected queries.
        query_positions: Optional integer tensor `(q_len,)` or `(batch, q_len)`, with
            `key_positions`: each query's cell `y * width + x`. Defaults to the whole grid.
        key_positions: Optional integer tensor `(k_len,)` or `(batch, k_len)`. Defaults to the
            whole grid.

        Returns the position scores `(batch, num_heads, q_len, k_len)`.

    Example:

        >>> import tf_posenc
        >>> bias = DecomposedPositionBias(num_heads=2, head_dim=8, input_size=14, grid_size=(4, 6))
        >>> layer = tf_posenc.MultiHeadAttention(num_heads=2, key_dim=8, position_bias=bias)
        >>> x = keras.ops.ones((1, 24, 16))  # a 4 x 6 grid, row by row
        >>> tuple(layer(x, x).shape), tuple(bias.tables()[0].shape)
        ((1, 24, 16), (7, 8))

    References:
        [Li et al., 2022](https://arxiv.org/abs/2203.16527)
    """

    def __init__(
        self, num_heads, head_dim, input_size, grid_size=None, embeddings_initializer="zeros", **kwargs
    ):
        super().__init__(**kwargs)
        self.num_heads = _validation.positive_int("num_heads", num_heads)
        self.head_dim = _validation.positive_int("head_dim", head_dim)
        self.input_size = _grid("input_size", input_size)
        self.grid_size = self.input_size if grid_size is None else _grid("grid_size", grid_size)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self._resize = [
            None if learned == side else linear_resize_weights(2 * learned - 1, 2 * side - 1)
            for learned, side in zip(self.input_size, self.grid_size, strict=True)
        ]

    def build(self, input_shape=None):
        height, width = self.input_size
        self.rel_pos_h = self.add_weight(
            name="rel_pos_h", shape=(2 * height - 1, self.head_dim), initializer=self.embeddings_initializer
        )
        self.rel_pos_w = self.add_weight(
            name="rel_pos_w", shape=(2 * width - 1, self.head_dim), initializer=self.embeddings_initializer
        )
        self.built = True

    def tables(self):
        """The tables of the call's grid, `(2 * grid_height - 1, head_dim)` and `(2 * grid_width
        - 1, head_dim)`, in the compute dtype: row `offset + side - 1` holds an offset's row."""
        if not self.built:
            self.build()
        dtype = self.compute_dtype
        return tuple(
            ops.cast(table, dtype)
            if resize is None
            else ops.matmul(ops.convert_to_tensor(resize.astype(dtype)), ops.cast(table, dtype))
            for table, resize in zip((self.rel_pos_h, self.rel_pos_w), self._resize, strict=True)
        )

    def call(self, queries, query_positions=None, key_positions=None):
        if len(queries.shape) != 4 or tuple(queries.shape[2:]) not in (
            (self.num_heads, self.head_dim),
            (None, self.head_dim),
        ):
            raise ValueError(
                f"`queries` must have shape (batch, len, {self.num_heads}, {self.head_dim}). "
                f"Received: queries.shape={tuple(queries.shape)}"
            )
        cells = self.grid_size[0] * self.grid_size[1]
        if query_positions is None and queries.shape[1] not in (None, cells):
            raise ValueError(
                f"Without positions the queries are the {self.grid_size[0]} x {self.grid_size[1]} grid's "
                f"{cells} cells (`grid_size`). Received: queries.shape={tuple(queries.shape)}"
            )
        pair = paired_positions(query_positions, key_positions, cells, cells)
        limit = _positions.Limit(cells, "grid_size")
        query_positions, key_positions = (
            _positions.checked_values(name, positions, limit)
            for name, positions in zip(("query_positions", "key_positions"), pair, strict=True)
        )
        return self.scores(queries, query_positions, key_positions)

    def scores(self, queries, query_positions, key_positions):
        """The position scores `(batch, heads, q_len, k_len)` of int32 cells `(batch or 1,
        len)`: `call` without its checks, for the attention layers."""
        width = self.grid_size[1]
        batch, heads = ops.shape(queries)[0], ops.shape(queries)[2]
        shape = (batch, heads, ops.shape(queries)[1], ops.shape(key_positions)[1])
        total = 0
        for table, side, coordinate in zip(
            self.tables(), self.grid_size, (lambda p: p // width, lambda p: p % width), strict=True
        ):
            rows = ops.einsum("bqhd,rd->bhqr", queries, ops.cast(table, queries.dtype))
            offsets = ops.expand_dims(coordinate(query_positions), 2) - ops.expand_dims(
                coordinate(key_positions), 1
            )
            picked = ops.broadcast_to(ops.expand_dims(offsets + (side - 1), 1), shape)
            total = total + ops.take_along_axis(rows, picked, axis=-1)
        return total

    def compute_output_spec(self, queries, *args, **kwargs):
        length = queries.shape[1]
        return keras.KerasTensor((queries.shape[0], self.num_heads, length, length), dtype=self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            **config_entries(self, "num_heads", "head_dim"),
            "input_size": list(self.input_size),
            "grid_size": list(self.grid_size),
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        }
