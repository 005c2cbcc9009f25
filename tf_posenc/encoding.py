"""The sinusoidal encoding as NumPy tables: the formula of the documents, computed in float64.

PE(pos, 2i) = sin(pos / max_wavelength**(2i / d_model))
PE(pos, 2i + 1) = cos(pos / max_wavelength**(2i / d_model))

`positional_encoding`, `sincos_2d`, `sincos_3d` and `get_angles` compute in float64 from integer
positions and round once to the requested dtype: they are the float64 references, and the tables
the documents print. The layers compute their rows on the exact integer route instead
(`tf_posenc._rows`, the same in every runtime); the two agree to the route's bound (2**-24 in
float32, `_rows.row_error_bound`) and hold the same bits almost everywhere (an entry that close
to a rounding boundary may round the other way). What each column holds is written once, in
`tf_posenc._columns`.
"""

import numbers

import keras
import ml_dtypes
import numpy as np

from tf_posenc import _columns, _validation

# The column builders and the rope types' maths live in their own modules; these are their
# public names.
from tf_posenc._columns import columns  # noqa: F401
from tf_posenc._rope_types import (  # noqa: F401
    EXTENT_DEPENDENT_ROPE_TYPES,
    ROPE_TYPES,
    rotary_attention_factor,
    rotary_frequencies,
)
from tf_posenc._tensorflow import tf

# Rows computed per step by `positional_encoding`, so that the float64 scratch
# space stays small however long the table is.
_ROWS_PER_CHUNK = 4096

CONVENTIONS = _validation.CONVENTIONS


def get_angles(position, i, d_model, max_wavelength=10000):
    """Angles `position / max_wavelength**(2 * (i // 2) / d_model)` in float64.

    Columns `2k` and `2k + 1` share one frequency, so sine and cosine of the same
    angle sit side by side. Broadcasts like NumPy: `position` of shape `(P, 1)`
    and `i` of shape `(1, D)` give angles of shape `(P, D)`.

    Args:
        position: Integer array of positions.
        i: Integer array of column indices.
        d_model: Integer. Width of the encoding.
        max_wavelength: Number. The base of the geometric progression of
            wavelengths. Defaults to `10000`.

    Returns:
        A float64 NumPy array, the broadcast of `position` against `i`.

    Example:

        >>> get_angles(np.arange(3)[:, np.newaxis], np.arange(4)[np.newaxis, :], 4).round(2).tolist()
        [[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.01, 0.01], [2.0, 2.0, 0.02, 0.02]]
    """
    d_model = _validation.positive_int("d_model", d_model)
    max_wavelength = _validation.wavelength("max_wavelength", max_wavelength)
    return np.asarray(position, dtype=np.float64) * _columns.angle_rates(i, d_model, max_wavelength)


def sinusoids(positions, d_model, max_wavelength=10000, layout=None, convention="paper", min_timescale=1.0):
    """Encoding rows for integer `positions`, as a float64 array of shape `positions.shape + (d_model,)`."""
    rates, cosine = _columns.columns(d_model, max_wavelength, layout, convention, min_timescale)
    angles = np.asarray(positions, dtype=np.float64)[..., np.newaxis] * rates
    return np.where(cosine, np.cos(angles), np.sin(angles))


def sinusoid_rows(start, stop, d_model, dtype="float32", **options):
    """Rows `start .. stop - 1` as a NumPy array of `dtype`, shape `(stop - start, d_model)`.

    The float64 values are computed a few thousand rows at a time, so the scratch
    space stays small next to the result however many rows are asked for. `options` are
    those of `columns`.
    """
    name = keras.backend.standardize_dtype(dtype)
    rows = np.empty((stop - start, d_model), dtype=ml_dtypes.bfloat16 if name == "bfloat16" else name)
    for first in range(start, stop, _ROWS_PER_CHUNK):
        last = min(first + _ROWS_PER_CHUNK, stop)
        rows[first - start : last - start] = sinusoids(np.arange(first, last), d_model, **options)
    return rows


def _axis_table(positions, width, scale):
    rates, cosine = _columns.grid_columns(width, scale)
    angles = np.asarray(positions, np.float64)[..., None] * rates
    return np.where(cosine, np.cos(angles), np.sin(angles))


def sincos_2d(embed_dim, grid_size, cls_token=False, *, base_size=None, interpolation_scale=1.0):
    """The 2-D sine-cosine table of a grid of patches, in float64: MAE's, and diffusers'.

    Patch `n` sits at row `n // width` and column `n % width`. As in MAE's and diffusers'
    `get_2d_sincos_pos_embed`, the first half of the width encodes the column and the second
    half the row, each half with the paper's frequencies for its width in the concat layout
    (sines, then cosines). With `base_size` (diffusers: PixArt-alpha, SD3) an axis of `n`
    patches has the positions `arange(n) / (n / base_size) / interpolation_scale`; without it
    (MAE), `arange(n) / interpolation_scale`. Each position is exact (diffusers rounds it to
    float32 first, up to 2**-24 of its size).

    Args:
        embed_dim: Integer, a multiple of 4. Width of the table.
        grid_size: Integer (a square grid), or `(height, width)`.
        cls_token: Boolean. Whether to add a leading zero row for a class token.
        base_size: Optional number. diffusers' `base_size`: the grid size whose positions are
            `0 .. base_size - 1`. Defaults to `None`.
        interpolation_scale: Positive number. Divides every position. Defaults to `1.0`.

    Returns:
        A float64 NumPy array of shape `(height * width [+ 1], embed_dim)`.

    Example:

        >>> sincos_2d(8, 2, cls_token=True).shape
        (5, 8)
        >>> sincos_2d(8, (2, 3), base_size=16).shape
        (6, 8)
    """
    embed_dim = _validation.multiple_of("embed_dim", embed_dim, 4, _validation.GRID_2D_WIDTH)
    height, width = _validation.grid_shape("grid_size", grid_size, 2)
    _validation.grid_2d_options(cls_token, base_size, interpolation_scale)
    row_scale, column_scale = _columns.grid_scales((height, width), base_size, interpolation_scale)
    row, column = np.divmod(np.arange(height * width), width)
    column_width, row_width = _columns.grid_2d_widths(embed_dim)
    table = np.concatenate(
        [_axis_table(column, column_width, column_scale), _axis_table(row, row_width, row_scale)], axis=-1
    )
    return np.concatenate([np.zeros((1, embed_dim)), table]) if cls_token else table


def sincos_3d(
    embed_dim, spatial_size, temporal_size, spatial_interpolation_scale=1.0, temporal_interpolation_scale=1.0
):
    """The 3-D sine-cosine table of a video's patches, in float64: diffusers'
    `get_3d_sincos_pos_embed` (CogVideoX), with its argument order.

    The first quarter of the width encodes the frame (positions `arange(temporal_size) /
    temporal_interpolation_scale`), the other three quarters the patch as `sincos_2d` does
    (column, then row; positions divided by `spatial_interpolation_scale`). Each part has the
    paper's frequencies for its width, sines then cosines.

    Args:
        embed_dim: Integer, a multiple of 16.
        spatial_size: Integer (a square grid), or `(width, height)`: diffusers' order (its
            code reads `spatial_size[0]` as the width).
        temporal_size: Integer. Number of frames.
        spatial_interpolation_scale: Positive number. Defaults to `1.0`.
        temporal_interpolation_scale: Positive number. Defaults to `1.0`.

    Returns:
        A float64 NumPy array of shape `(temporal_size, height * width, embed_dim)`.

    Example:

        >>> sincos_3d(64, (3, 2), 4).shape
        (4, 6, 64)
    """
    embed_dim = _validation.multiple_of("embed_dim", embed_dim, 16, _validation.GRID_3D_WIDTH)
    width, height = _validation.grid_shape("spatial_size", spatial_size, 2)
    frames = _validation.positive_int("temporal_size", temporal_size)
    _validation.grid_3d_scales(spatial_interpolation_scale, temporal_interpolation_scale)
    spatial, temporal = 1.0 / spatial_interpolation_scale, 1.0 / temporal_interpolation_scale
    frame, patch = np.divmod(np.arange(frames * height * width), height * width)
    row, column = np.divmod(patch, width)
    frame_width, column_width, row_width = _columns.grid_3d_widths(embed_dim)
    parts = [
        _axis_table(frame, frame_width, temporal),
        _axis_table(column, column_width, spatial),
        _axis_table(row, row_width, spatial),
    ]
    return np.concatenate(parts, axis=-1).reshape(frames, height * width, embed_dim)


def grid_positions(grid, offset=0):
    """The integer ids of a grid's cells along each axis, in row-major order.

    Args:
        grid: Tuple of positive integers: `(height, width)`, `(frames, height, width)`, or
            FLUX's `(1, height, width)` (its first id axis is 0 for image tokens).
        offset: Integer, or one integer per axis, added to the ids: for example the number of
            class, register or text tokens placed before the grid.

    Returns:
        An int32 NumPy array of shape `(prod(grid), len(grid))`: the `positions` of
        `AxialRotaryEmbedding` for the grid's tokens.

    Example:

        >>> grid_positions((2, 3)).tolist()
        [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
        >>> grid_positions((1, 2, 2), offset=(0, 4, 4))[:2].tolist()
        [[0, 4, 4], [0, 4, 5]]
    """
    if not isinstance(grid, (tuple, list)) or not grid:
        raise ValueError(f"`grid` must be a tuple of positive integers. {_validation.received('grid', grid)}")
    sizes = _validation.grid_shape("grid", tuple(grid), len(grid))
    offsets = (offset,) * len(sizes) if isinstance(offset, numbers.Integral) else tuple(offset)
    if len(offsets) != len(sizes) or not all(
        isinstance(value, numbers.Integral) and value >= 0 for value in offsets
    ):
        raise ValueError(
            f"`offset` must be a non-negative integer, or one per axis of `grid` ({len(sizes)}). "
            f"{_validation.received('offset', offset)}"
        )
    ids = np.stack(np.meshgrid(*(np.arange(size) for size in sizes), indexing="ij"), axis=-1)
    return (ids.reshape(-1, len(sizes)) + np.asarray(offsets)).astype(np.int32)


def positional_encoding(
    position,
    d_model,
    max_wavelength=10000,
    layout=None,
    dtype="float32",
    convention="paper",
    min_timescale=1.0,
):
    """The full encoding table, shape `(1, position, d_model)`, as a tensor of the Keras backend
    (a `tf.Tensor` on TensorFlow).

    Args:
        position: Integer. Number of positions (rows), starting at 0.
        d_model: Integer. Width of the encoding (columns).
        max_wavelength: Number. The base of the wavelengths (tensor2tensor's
            `max_timescale`). Defaults to `10000`.
        layout: `"interleave"` (sin on even columns, cos on odd ones, as in the
            paper) or `"concat"` (all sines, then all cosines). Defaults to the
            convention's own: `"interleave"` for the paper, `"concat"` for the others.
        dtype: The dtype of the result. Defaults to `"float32"`.
        convention: `"paper"`, `"tensor2tensor"`, `"tensor2tensor_documented"` or
            `"fairseq"`: whose frequencies and column order (see `columns`).
            Defaults to `"paper"`.
        min_timescale: Number. tensor2tensor's `min_timescale`. Defaults to `1.0`.

    Returns:
        A tensor of shape `(1, position, d_model)` (a `tf.Tensor` on the TensorFlow
        backend): float64 values rounded once to `dtype`.

    Example:

        >>> table = positional_encoding(50, 512)
        >>> table.shape
        TensorShape([1, 50, 512])
    """
    position = _validation.positive_int("position", position, maximum=_validation.MAX_POSITION)
    d_model = _validation.positive_int("d_model", d_model)
    max_wavelength, layout, convention, min_timescale = _validation.encoding_options(
        d_model, max_wavelength, layout, convention, min_timescale
    )
    dtype = _validation.floating_dtype("dtype", dtype)
    table = sinusoid_rows(
        0,
        position,
        d_model,
        dtype,
        max_wavelength=max_wavelength,
        layout=layout,
        convention=convention,
        min_timescale=min_timescale,
    )
    if keras.backend.backend() == "tensorflow":
        return tf.convert_to_tensor(table[np.newaxis])
    return keras.ops.convert_to_tensor(table[np.newaxis])


def shift_matrix(k, d_model, max_wavelength=10000, layout="interleave"):
    """The rotation T(k) that moves an encoding row `k` positions along.

    `shift_matrix(k, d) @ PE[pos] == PE[pos + k]` for every `pos`: each
    (sine, cosine) pair of one frequency `w` is rotated by the angle `k * w`,
    because sin(a + b) and cos(a + b) are linear in sin(a) and cos(a).

    Args:
        k: Integer, may be negative. The offset in positions.
        d_model: Integer, even. Width of the encoding; an odd width leaves the
            last sine without its cosine, and that column has no rotation.
        max_wavelength: Number. Defaults to `10000`.
        layout: `"interleave"` or `"concat"`. Defaults to `"interleave"`.

    Returns:
        A float64 NumPy array of shape `(d_model, d_model)`, block-diagonal in
        the interleaved layout.

    Example:

        >>> table = positional_encoding(10, 4, dtype="float64").numpy()[0]
        >>> bool(np.allclose(shift_matrix(3, 4) @ table[2], table[5]))
        True
    """
    is_int = isinstance(k, (int, np.integer)) and not isinstance(k, bool)
    if not is_int:
        raise ValueError(f"`k` must be an integer. Received: k={k!r} (of type {type(k).__name__})")
    d_model = _validation.positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(
            "`d_model` must be even for `shift_matrix`: the last sine column of an odd "
            f"width has no cosine partner to rotate with. Received: d_model={d_model}"
        )
    _validation.layout("layout", layout, d_model)
    step = k * _columns.frequencies(d_model, max_wavelength)
    order = _columns.column_order(d_model, layout)
    pairs = d_model // 2
    output_column = np.argsort(order)
    sine_column, cosine_column = output_column[:pairs], output_column[pairs:]
    matrix = np.zeros((d_model, d_model))
    matrix[sine_column, sine_column] = np.cos(step)
    matrix[sine_column, cosine_column] = np.sin(step)
    matrix[cosine_column, sine_column] = -np.sin(step)
    matrix[cosine_column, cosine_column] = np.cos(step)
    return matrix
