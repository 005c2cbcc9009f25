"""Learned position tables resized to a grid, as each published model resizes its own, and 1-D
tables extended to more positions than they were trained on.

ViT, DINOv2 and SigLIP learn one embedding per patch of their pretraining grid and, for another
image size, resize the table with torch's bicubic interpolation (`a = -0.75`, `align_corners=False`,
no antialiasing; DINOv2 with registers antialiases, which in torch is PIL's filter with `a = -0.5`
spread over the downscale). Keras's and TensorFlow's bicubic resize use `a = -0.5` everywhere, so
they give other numbers. Here each axis's resize is a `(target, source)` weight matrix computed
from torch's own float32 formulas (source coordinates, taps, clamping at the border or
normalized antialias weights), in `keras.ops` so that a target size known only when the graph
runs works too; the table is then resized with one float32 matrix product per axis.
"""

import math

import keras
import numpy as np
from keras import ops

from tf_posenc import _validation

CONVENTIONS = ("vit", "dinov2", "siglip")


def _cubic(x, a):
    """The cubic convolution kernel of parameter `a` at distances `x` (float32 tensors)."""
    x = ops.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return ops.where(x < 1.0, near, ops.where(x < 2.0, far, 0.0))


def _bicubic_weights(source, target):
    """torch's `upsample_bicubic2d` along one axis (`align_corners=False`): `(target, source)`.

    Output `i` reads `s = (i + 0.5) * source / target - 0.5` (float32, unclamped), its four taps
    `floor(s) - 1 .. floor(s) + 2` clamped to the axis, with the weights of `a = -0.75`."""
    scale = ops.cast(source, "float32") / ops.cast(target, "float32")
    where = (ops.cast(ops.arange(target), "float32") + 0.5) * scale - 0.5
    first = ops.floor(where)
    fraction = where - first
    columns = ops.arange(source)[None, :]
    weights = 0.0
    for tap in range(4):
        index = ops.clip(ops.cast(first, "int32") + (tap - 1), 0, source - 1)
        weight = _cubic(fraction - (tap - 1), -0.75)
        weights = weights + ops.where(ops.equal(index[:, None], columns), weight[:, None], 0.0)
    return weights


def bilinear_weights(source, target):
    """torch's `upsample_bilinear2d` along one axis (`align_corners=False`, no antialiasing):
    `(target, source)`. Output `i` reads `s = max((i + 0.5) * source / target - 0.5, 0)`
    (float32), between taps `floor(s)` and `floor(s) + 1` (clamped to the axis)."""
    scale = ops.cast(source, "float32") / ops.cast(target, "float32")
    where = ops.maximum((ops.cast(ops.arange(target), "float32") + 0.5) * scale - 0.5, 0.0)
    first = ops.floor(where)
    fraction = where - first
    low = ops.cast(first, "int32")
    high = ops.minimum(low + 1, source - 1)
    columns = ops.arange(source)[None, :]
    return ops.where(ops.equal(low[:, None], columns), 1.0 - fraction[:, None], 0.0) + ops.where(
        ops.equal(high[:, None], columns), fraction[:, None], 0.0
    )


def _antialias_weights(source, target):
    """torch's antialiased bicubic (`antialias=True`, PIL's filter, `a = -0.5`) along one axis:
    `(target, source)`, each row normalized."""
    scale = ops.cast(source, "float32") / ops.cast(target, "float32")
    support = 2.0 * ops.maximum(scale, 1.0)
    center = (ops.cast(ops.arange(target), "float32") + 0.5) * scale
    # C++'s int64 casts truncate toward zero.
    first = ops.maximum(ops.cast(ops.trunc(center - support + 0.5), "int32"), 0)
    end = ops.minimum(ops.cast(ops.trunc(center + support + 0.5), "int32"), source)
    columns = ops.arange(source)[None, :]
    offsets = (ops.cast(columns, "float32") - center[:, None] + 0.5) / ops.maximum(scale, 1.0)
    inside = ops.logical_and(columns >= first[:, None], columns < end[:, None])
    weights = ops.where(inside, _cubic(offsets, -0.5), 0.0)
    total = ops.sum(weights, axis=1, keepdims=True)
    return weights / ops.where(ops.equal(total, 0.0), 1.0, total)


def _target_grid(target_grid):
    if not isinstance(target_grid, (tuple, list)) or len(target_grid) != 2:
        raise ValueError(
            "`target_grid` must be (height, width), integers or scalar integer tensors. "
            f"{_validation.received('target_grid', target_grid)}"
        )
    sizes = []
    for size in target_grid:
        if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
            sizes.append(_validation.positive_int("target_grid", size))
        else:  # a tensor: checked by the graph's shapes
            sizes.append(ops.cast(size, "int32"))
    return sizes


def square_side(patches):
    """The side of a square grid of `patches` patches (a Python int or None), or None where
    they are unknown or make no square."""
    if patches is None or patches <= 0:
        return None
    side = math.isqrt(patches)
    return side if side * side == patches else None


def checked_options(num_prefix_tokens, convention, antialias):
    """The resize's options, checked: a non-negative prefix (none for SigLIP), a convention, a
    boolean `antialias`."""
    convention = _validation.one_of("convention", convention, CONVENTIONS)
    num_prefix_tokens = _validation.non_negative_int("num_prefix_tokens", num_prefix_tokens)
    if convention == "siglip" and num_prefix_tokens:
        raise ValueError(
            "`convention='siglip'` has no class token: `num_prefix_tokens` must be 0. "
            f"{_validation.received('num_prefix_tokens', num_prefix_tokens)}"
        )
    return num_prefix_tokens, convention, _validation.boolean("antialias", antialias)


def interpolate_position_embeddings(
    embeddings, target_grid, num_prefix_tokens=1, convention="vit", antialias=False
):
    """A learned position table resized to another patch grid, as ViT, DINOv2 and SigLIP do.

    Args:
        embeddings: Float tensor `(1, num_prefix_tokens + n * n, dim)` (transformers'
            `position_embeddings`) or `(num_prefix_tokens + n * n, dim)`: the prefix tokens'
            embeddings (class, registers), then a square grid's, row by row.
        target_grid: `(height, width)`: integers, or scalar integer tensors where the grid is
            only known when the graph runs.
        num_prefix_tokens: Integer. The embeddings before the grid's, kept as they are.
            Defaults to `1` (ViT's and DINOv2's class token; SigLIP has none: `0`).
        convention: `"vit"` (transformers' `ViTEmbeddings`: the table resized in its own dtype),
            `"dinov2"` (resized in float32 and cast back, as `Dinov2Embeddings` does) or
            `"siglip"` (no class token: `num_prefix_tokens` must be 0). Here every table is
            resized in float32 (float64 tables in float64) and rounded once to its dtype, so the
            three differ in what they check, not in float32 numbers. Defaults to `"vit"`.
        antialias: Boolean. torch's antialiased bicubic, which DINOv2 with registers uses
            (`Dinov2WithRegistersEmbeddings`); the others do not. Defaults to `False`.

    Returns:
        The table `(1 or nothing, num_prefix_tokens + height * width, dim)`, in the dtype of
        `embeddings`.

    Example:

        >>> table = keras.ops.ones((1, 1 + 14 * 14, 8))
        >>> tuple(interpolate_position_embeddings(table, (16, 20)).shape)
        (1, 321, 8)
    """
    num_prefix_tokens, convention, antialias = checked_options(num_prefix_tokens, convention, antialias)
    height, width = _target_grid(target_grid)
    embeddings = ops.convert_to_tensor(embeddings)
    dtype = keras.backend.standardize_dtype(embeddings.dtype)
    if "float" not in dtype:
        raise TypeError(f"`embeddings` must be floating-point. Received: embeddings.dtype={dtype}")
    batched = len(embeddings.shape) == 3
    table = embeddings[0] if batched else embeddings
    if len(table.shape) != 2 or (batched and embeddings.shape[0] != 1):
        raise ValueError(
            "`embeddings` must have shape (1, tokens, dim) or (tokens, dim). "
            f"Received: embeddings.shape={tuple(embeddings.shape)}"
        )
    patches = table.shape[0] - num_prefix_tokens
    side = square_side(patches)
    if side is None:
        raise ValueError(
            f"`embeddings` must hold {num_prefix_tokens} prefix tokens (`num_prefix_tokens`) and then a "
            f"square grid of patches. Received: {table.shape[0]} tokens, leaving {patches}"
        )
    wide = "float64" if dtype == "float64" else "float32"
    weights = _antialias_weights if antialias else _bicubic_weights
    rows, columns = (ops.cast(weights(side, size), wide) for size in (height, width))
    grid = ops.reshape(ops.cast(table[num_prefix_tokens:], wide), (side, side, -1))
    # One axis, then the other, in this order everywhere (a three-way einsum may pick its order
    # by the shapes it sees).
    resized = ops.einsum("Ww,Hwd->HWd", columns, ops.einsum("Hh,hwd->Hwd", rows, grid))
    resized = ops.reshape(ops.cast(resized, dtype), (-1, table.shape[-1]))
    result = ops.concatenate([table[:num_prefix_tokens], resized], axis=0)
    return ops.expand_dims(result, 0) if batched else result


def extend_position_embeddings(embeddings, length, alpha=0.4, num_prefix_rows=0):
    """A learned 1-D position table extended to `length` rows by hierarchical decomposition: the
    rows it had are kept exactly, and the new ones are built from them.

    Su Jianlin's hierarchical decomposition (bert4keras's `hierarchical_position`, proposed for
    keras-hub's `PositionEmbedding` in keras-team/keras-hub#2190): with the table's `n` rows
    `p_0 .. p_{n-1}`, let `u_i = (p_i - alpha * p_0) / (1 - alpha)`; position `i * n + j` reads
    `alpha * u_i + (1 - alpha) * u_j`. For `i = 0` that is `p_j`, so the first `n` positions are
    unchanged (copied here, bit for bit), and the table reaches `n * n` positions. Each new row
    is computed in float64 and rounded once to the table's dtype.

    A table whose first rows are not positions (RoBERTa's padding rows, BART's and OPT's offset
    of 2; `tf_posenc.hf_position_ids` reads past them) keeps them as they are:
    `num_prefix_rows` says how many, and the decomposition runs over the rest.

    Args:
        embeddings: Float array or tensor `(rows, dim)` (for example `embedding.embeddings` of a
            `keras.layers.Embedding` holding transformers' `position_embeddings.weight`).
        length: Integer. The rows of the extended table, prefix rows included: at least the
            table's, at most `num_prefix_rows + (rows - num_prefix_rows) ** 2`.
        alpha: Float in (0, 1): the weight of the coarse position `i`. Defaults to `0.4`
            (bert4keras's).
        num_prefix_rows: Integer. Rows before the positions' (RoBERTa's and BART's 2). Defaults
            to `0`.

    Returns:
        A NumPy array `(length, dim)` in the dtype of `embeddings`.

    Example:

        >>> import numpy as np
        >>> table = np.random.RandomState(0).standard_normal((512, 8)).astype("float32")
        >>> longer = extend_position_embeddings(table, 2048)
        >>> longer.shape, bool(np.all(longer[:512] == table))
        ((2048, 8), True)
        >>> expected = 0.4 * (table[1] - 0.4 * table[0]) / 0.6 + (table[3] - 0.4 * table[0])
        >>> bool(np.allclose(longer[512 + 3], expected, atol=1e-6))
        True
    """
    table = np.asarray(keras.ops.convert_to_numpy(embeddings))
    if table.dtype.kind != "f":
        raise TypeError(f"`embeddings` must be floating-point. Received: embeddings.dtype={table.dtype}")
    if table.ndim != 2:
        raise ValueError(
            f"`embeddings` must have shape (rows, dim). Received: embeddings.shape={table.shape}"
        )
    prefix = _validation.non_negative_int("num_prefix_rows", num_prefix_rows)
    positions = table.shape[0] - prefix
    if positions < 2:
        raise ValueError(
            f"`embeddings` must hold at least 2 position rows after its {prefix} prefix rows "
            f"(`num_prefix_rows`). Received: embeddings.shape={table.shape}"
        )
    length = _validation.positive_int("length", length)
    if not table.shape[0] <= length <= prefix + positions**2:
        raise ValueError(
            f"`length` must be between the table's {table.shape[0]} rows and {prefix + positions**2} "
            f"({prefix} prefix rows and {positions} ** 2 positions). {_validation.received('length', length)}"
        )
    alpha = _validation.number_at_least("alpha", alpha, 0.0, strict=True)
    if alpha >= 1.0:
        raise ValueError(f"`alpha` must be below 1. {_validation.received('alpha', alpha)}")
    rows = table[prefix:].astype(np.float64)
    decomposed = (rows - alpha * rows[:1]) / (1.0 - alpha)
    new = np.arange(positions, length - prefix)
    extended = alpha * decomposed[new // positions] + (1.0 - alpha) * decomposed[new % positions]
    return np.concatenate([table, extended.astype(table.dtype)], axis=0)
