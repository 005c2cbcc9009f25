"""Positions of detection and segmentation models: DETR's 2-D sine embedding of a pixel mask."""

import math
import numbers

import numpy as np
from keras import ops

from tf_posenc import _validation

# transformers' `eps` of the normalization, in the denominator only.
_EPS = 1e-6
# The rows of the value table that may be built per axis: (size + 1) ** 2 of them when normalized.
_MAX_TABLE_ROWS = 2**20


def _temperatures(temperature):
    """(height's, width's) temperature: one number for both, or DAB-DETR's pair."""
    pair = tuple(temperature) if isinstance(temperature, (list, tuple)) else (temperature, temperature)
    if len(pair) != 2 or not all(
        isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0 for value in pair
    ):
        raise ValueError(
            "`temperature` must be a positive number, or a pair (temperature_height, temperature_width) as "
            f"DAB-DETR's. {_validation.received('temperature', temperature)}"
        )
    return tuple(float(value) for value in pair)


def _axis_table(size, features, temperature, normalize, scale, offset):
    """The float64 rows of one axis, `(size + 1) ** 2` of them (normalized: count `c` of a column
    holding `n` real cells reads row `c * (size + 1) + n`) or `size + 1` (row `c`), each with
    transformers' float64 operations in their order: `(c + offset) / (n + eps) * scale`, divided by
    `temperature ** (2 * (i // 2) / features)`, then sin on even features and cos on odd ones."""
    counts = np.arange(size + 1, dtype=np.float64)
    if normalize:
        positions = ((counts[:, None] + offset) / (counts[None, :] + _EPS) * scale).reshape(-1)
    else:
        positions = counts
    steps = temperature ** (2 * np.floor(np.arange(features, dtype=np.float64) / 2) / features)
    angles = positions[:, None] / steps
    return np.where(np.arange(features) % 2 == 0, np.sin(angles), np.cos(angles))


def detr_sine_embedding(
    pixel_mask, num_position_features=64, temperature=10000, normalize=False, scale=None, offset=0.0,
    dtype="float32",
):  # fmt: skip
    """DETR's 2-D sine embedding of a pixel mask: each cell's row count and column count of real
    pixels, normalized over its column and row, through interleaved sines and cosines.

    transformers 5.25's `DetrSinePositionEmbedding` with its arguments' names and meaning: a cell
    at row count `y` (the cumulative sum of the mask down its column, from 1) and column count `x`
    gets, when `normalize`, `y' = (y + offset) / (Y + 1e-6) * scale` with `Y` its column's count
    of real cells (and `x'` alike); feature `i` of an axis is `sin(y' / t_i)` for even `i` and
    `cos(y' / t_i)` for odd `i`, with `t_i = temperature ** (2 * (i // 2) /
    num_position_features)`; the height's features come first. The variants:

    - DETR, Conditional DETR, MaskFormer, Mask2Former, OneFormer, Table Transformer, and the
      SAM 2 / SAM 3 / EdgeTAM memory encoders: `num_position_features=d // 2`,
      `normalize=True` (their `mask=None` is a mask of ones);
    - Deformable DETR: `offset=-0.5`;
    - Grounding DINO: `temperature=config.positional_embedding_temperature` (20);
    - DAB-DETR: `temperature=(temperature_height, temperature_width)`.

    Every value is transformers' float64 computation (the same operations, in order), rounded
    once to `dtype`: the counts are integers, so each axis's values form a table computed when
    the call is traced. The mask's height and width must therefore be known then; a table of
    `(size + 1) ** 2` rows per axis is at most 2**20 rows.

    Args:
        pixel_mask: Integers or booleans `(batch, height, width)`: 1 (or `True`) on real pixels,
            0 on padding, as transformers' `pixel_mask` at the feature map's size.
        num_position_features: Positive even integer: the features per axis (DETR's `d_model //
            2`). Defaults to `64`.
        temperature: Positive number, or DAB-DETR's pair `(temperature_height,
            temperature_width)`. Defaults to `10000`.
        normalize: Boolean. Defaults to `False` (transformers' default; the models pass `True`).
        scale: Positive number, only with `normalize`. Defaults to `2 * pi`.
        offset: Number added to the counts before normalizing (Deformable DETR's `-0.5`), only
            with `normalize`. Defaults to `0.0`.
        dtype: The output's floating dtype. Defaults to `"float32"`.

    Returns:
        A tensor `(batch, height, width, 2 * num_position_features)`, channels last (transformers'
        `(batch, channels, height, width)` is its `transpose(0, 3, 1, 2)`).

    Example:

        >>> import numpy as np
        >>> mask = np.ones((1, 2, 3), dtype=bool)
        >>> mask[0, :, 2] = False  # a padded column
        >>> table = detr_sine_embedding(mask, num_position_features=4, normalize=True)
        >>> tuple(table.shape)
        (1, 2, 3, 8)
        >>> # cos(x'): x' = pi and 2 pi in the real columns; the padded one keeps its row's count
        >>> np.round(np.asarray(table)[0, :, :, 5], 4).tolist()
        [[-1.0, 1.0, 1.0], [-1.0, 1.0, 1.0]]
    """
    features = _validation.positive_int("num_position_features", num_position_features)
    if features % 2:
        raise ValueError(
            "`num_position_features` must be even: its features are (sin, cos) pairs. "
            f"{_validation.received('num_position_features', num_position_features)}"
        )
    temperatures = _temperatures(temperature)
    normalize = _validation.boolean("normalize", normalize)
    if not normalize and (scale is not None or offset != 0.0):
        raise ValueError(
            "`scale` and `offset` apply to normalized counts: pass `normalize=True`. "
            f"Received: normalize=False, scale={scale!r}, offset={offset!r}"
        )
    scale = 2 * math.pi if scale is None else _validation.positive_number("scale", scale)
    offset = _validation.number_at_least("offset", offset, -math.inf)
    dtype = _validation.floating_dtype("dtype", dtype)
    mask = ops.convert_to_tensor(pixel_mask)
    if len(mask.shape) != 3:
        raise ValueError(
            "`pixel_mask` must have shape (batch, height, width). "
            f"Received: pixel_mask.shape={tuple(mask.shape)}"
        )
    height, width = mask.shape[1], mask.shape[2]
    if height is None or width is None:
        raise ValueError(
            "`pixel_mask` must have a height and width known when the call is traced: each axis's values "
            f"are a table of its size. Received: pixel_mask.shape={tuple(mask.shape)}"
        )
    for size in (height, width):
        if ((size + 1) ** 2 if normalize else size + 1) > _MAX_TABLE_ROWS:
            raise ValueError(
                f"`pixel_mask` is too large for the value tables (each side at most "
                f"{int(math.isqrt(_MAX_TABLE_ROWS)) - 1}). Received: pixel_mask.shape={tuple(mask.shape)}"
            )
    real = ops.cast(ops.cast(mask, "bool"), "int32")
    parts = []
    for axis, size, axis_temperature in ((1, height, temperatures[0]), (2, width, temperatures[1])):
        counts = ops.cumsum(real, axis=axis)
        if normalize:
            totals = counts[:, -1:, :] if axis == 1 else counts[:, :, -1:]
            index = counts * (size + 1) + totals
        else:
            index = counts
        table = _axis_table(size, features, axis_temperature, normalize, scale, offset)
        parts.append(ops.take(ops.convert_to_tensor(table.astype(dtype)), index, axis=0))
    return ops.concatenate(parts, axis=-1)
