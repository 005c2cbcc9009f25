"""Internal: applying rotation rows to queries and keys.

The route (`_rows`) gives a rotation's rows as the sines of every feature pair, then their
cosines. A rotation spreads them over the features its layout pairs (`"half"`: feature `j`
with `j + width/2`; `"interleave"`: `2j` with `2j + 1`) and turns `inputs` with one
multiply-add in float32 (float64 under a float64 policy), rounded once to the compute dtype.
The spread rows are also what a model computes once per step and hands to every layer
(`per_feature`, then `rotate_with`): the same operations on the same numbers, so the same bits.
"""

import numpy as np
from keras import ops

from tf_posenc import _positions, _rows

ROTARY_LAYOUTS = ("half", "interleave")


def rotation_dtype(compute_dtype):
    """The dtype of a rotation's rows and arithmetic: float64 under a float64 policy, else
    float32 (rounded once to the compute dtype at the end)."""
    return "float64" if compute_dtype == "float64" else "float32"


def grouped_rows(groups, dtype, scale=1.0):
    """Rotation rows of feature pairs in groups, each group turned by its own ids.

    `groups` lists `(ids, provider)`: int32 ids of any shape and the group's `_rows.RowProvider`.
    Returns the sines of every group's pairs, in group order, then their cosines.
    """
    sines, cosines = [], []
    for ids, provider in groups:
        rows = provider.rows(_positions.Positions(values=ids), None, dtype, scale=scale)
        sine, cosine = ops.split(rows, 2, axis=-1)
        sines.append(sine)
        cosines.append(cosine)
    return ops.concatenate([*sines, *cosines], axis=-1)


def _spread(pairs, layout, signs=(1, 1)):
    """Per-pair values `(..., pairs)` on the features of their pairs, `(..., 2 * pairs)`, the
    first feature of each pair times `signs[0]`, the second times `signs[1]`."""
    first = pairs if signs[0] == 1 else -pairs
    second = pairs if signs[1] == 1 else -pairs
    if layout == "half":
        return ops.concatenate([first, second], axis=-1)
    return ops.reshape(ops.stack([first, second], axis=-1), (*ops.shape(pairs)[:-1], 2 * pairs.shape[-1]))


def per_feature(rows, layout):
    """`(cosine, sine)` of each rotating feature's pair, from rows of per-pair sines then
    cosines: transformers' `(cos, sin)` position embeddings, in the rows' shape and dtype."""
    sine, cosine = ops.split(rows, 2, axis=-1)
    return _spread(cosine, layout), _spread(sine, layout)


def _sign_pattern(width, layout):
    """The sign the rotation gives each feature's sine: the pair's first feature takes `-sin`."""
    pair_first = np.arange(width) < width // 2 if layout == "half" else np.arange(width) % 2 == 0
    return np.where(pair_first, -1.0, 1.0)


def rotation_tables(rows, layout, rank):
    """What `turn` multiplies rank-`rank` inputs by, from rows of per-pair sines then cosines:
    per feature, its pair's cosine, and its pair's sine with the sign the rotation gives it,
    with an axis for each axis of the inputs between the sequence and the features. Arranged on
    the small table, so the inputs see one multiply-add."""
    sine, cosine = ops.split(rows, 2, axis=-1)
    return _broadcast(_spread(cosine, layout), rank), _broadcast(_spread(sine, layout, (-1, 1)), rank)


def rotate(inputs, rows, layout, compute_dtype, order=None):
    """`inputs` with each feature pair turned by the angle whose sine and cosine `rows` hold,
    rounded once to `compute_dtype`.

    `rows`: the sines of every pair, then their cosines, `(seq_len, 2 * pairs)` or
    `(batch, seq_len, 2 * pairs)`; features past `2 * pairs` pass through. `order`: the axes of
    `inputs` as (batch, sequence, ..., features), where they are not in that order already.
    """
    return turn(inputs, rotation_tables(rows, layout, len(inputs.shape)), layout, compute_dtype, order)


def rotate_with(inputs, cosine, sine, layout, compute_dtype, order=None):
    """`inputs` turned by per-feature `cosine` and `sine` (as `per_feature` gives them, of the
    rotation dtype), rounded once to `compute_dtype`: the bits `rotate` gives for their rows."""
    signed_sine = sine * ops.cast(_sign_pattern(sine.shape[-1], layout), sine.dtype)  # exact
    rank = len(inputs.shape)
    return turn(
        inputs, (_broadcast(cosine, rank), _broadcast(signed_sine, rank)), layout, compute_dtype, order
    )


def _broadcast(table, rank):
    for _ in range(rank - 3):  # between the sequence and the features
        # expand_dims, not [..., None, :]: TensorFlow Lite has no builtin for that slice.
        table = ops.expand_dims(table, -2)
    return table


def turn(inputs, tables, layout, compute_dtype, order=None):
    """`inputs` turned by the `(cosine, signed sine)` tables `rotation_tables` gives, rounded
    once to `compute_dtype`."""
    cosine, signed_sine = tables
    rank = len(inputs.shape)
    order = order or list(range(rank))
    x = _rows.cast(_rows.cast(inputs, compute_dtype), cosine.dtype)
    if order != list(range(rank)):
        x = ops.transpose(x, order)
    width = cosine.shape[-1]
    passed = None
    if width < x.shape[-1]:  # partial rotary: the features past `width` pass through
        x, passed = x[..., :width], ops.cast(x[..., width:], compute_dtype)
    if layout == "half":
        first, second = ops.split(x, 2, axis=-1)
        partner = ops.concatenate([second, first], axis=-1)
    else:
        paired = ops.reshape(x, (*ops.shape(x)[:-1], width // 2, 2))
        partner = ops.reshape(ops.flip(paired, axis=-1), ops.shape(x))
    rotated = _rows.cast(x * cosine + partner * signed_sine, compute_dtype)
    if passed is not None:
        rotated = ops.concatenate([rotated, passed], axis=-1)
    if order == list(range(rank)):
        return rotated
    return ops.transpose(rotated, np.argsort(order).tolist())
