"""Internal: the table of a grid of patches, axis by axis, for the 2-D and 3-D sine-cosine layers."""

from keras import ops

from tf_posenc import _columns, _rows
from tf_posenc._positions import Positions, sequence_length


def sizes_of(inputs, axes):
    """The sizes of `axes` of `inputs`: Python ints where known, else scalar tensors."""
    return tuple(sequence_length(inputs, axis) for axis in axes)


def axis_provider(width, scale):
    """The row provider of one axis's `width` columns at position scale `scale`."""
    return _rows.provider(*_columns.grid_columns(width, scale))


def grid_table(sizes, parts, dtype):
    """The table of a grid of `sizes` (Python ints, or scalar tensors where graphs allow), of
    shape `sizes + (width,)`.

    `parts` lists `(axis, provider)` in column order: each part holds the rows of positions
    `0 .. sizes[axis] - 1`, broadcast over the other axes. Rows are computed once per axis,
    not once per patch; they have the bits of rows asked for one by one.
    """
    pieces = []
    for axis, provider in parts:
        rows = provider.rows(Positions(start=0), sizes[axis], dtype)
        for _ in range(axis):
            rows = ops.expand_dims(rows, 0)
        for _ in range(len(sizes) - axis - 1):
            rows = ops.expand_dims(rows, -2)
        pieces.append(ops.broadcast_to(rows, (*sizes, provider.width)))
    return ops.concatenate(pieces, axis=-1)
