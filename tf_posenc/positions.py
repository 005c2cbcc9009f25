"""Which positions a call covers, and the length contract every layer shares.

A call covers `start_index .. start_index + seq_len - 1`, or the given `positions`. All of
them must lie below the layer's `position`. What is known when the call is traced is checked
then, with a `ValueError` or `TypeError`; what is only known when the graph runs is checked by
the graph (`InvalidArgumentError`). XLA and TensorFlow Lite drop those run-time checks, and
the JAX backend (whose shapes are all known when a call is traced) has none; there the rows
past `position` are still the exact values of the formula (for positions below 2**31), never
clamped or garbage.
"""

import numbers

import keras
import tensorflow as tf
from keras import ops

from tf_posenc import _validation, rows


def _graph_checks():
    """Whether the graphs can stop on a failed check: TensorFlow's can, compiled JAX cannot."""
    return keras.backend.backend() == "tensorflow"


def _is_python_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _integer_tensor(name, value):
    value = ops.convert_to_tensor(value)
    dtype = keras.backend.standardize_dtype(value.dtype)
    if "int" not in dtype:
        raise TypeError(f"`{name}` must hold integers. Received: {name}.dtype={dtype}")
    return value


def _run_time_check(condition, message):
    # String-only data keeps `tf.debugging.Assert` a single op: no `cond` around it, so
    # Grappler's loop optimizer has no control-input Merge to warn about.
    return tf.debugging.Assert(condition, [message])


def _as_int64_at_most(name, value, limit):
    """`value` as int64, after a graph check that it lies in [0, limit] in its own dtype."""
    wide = tf.uint64 if value.dtype.is_unsigned else tf.int64
    widened = tf.cast(value, wide)
    checks = [_run_time_check(widened <= tf.constant(limit, wide), f"`{name}` must be at most {limit}.")]
    if not value.dtype.is_unsigned:
        checks.append(_run_time_check(widened >= 0, f"`{name}` must be non-negative."))
    with tf.control_dependencies(checks):
        return tf.cast(widened, tf.int64)


def _too_long(position, limit_is_argument=True):
    if not limit_is_argument:
        return (
            "The sequence runs past the largest position: start_index + seq_len must be at most "
            f"{position}."
        )
    return (
        "The sequence is longer than `position`: start_index + seq_len must be at most "
        f"position={position}."
    )


def check_fits(start_index, seq_len, position, limit_is_argument=True):
    """Raises a `ValueError` unless `start_index + seq_len <= position` (Python ints)."""
    if start_index + seq_len > position:
        raise ValueError(
            f"{_too_long(position, limit_is_argument)} Received: start_index={start_index}, "
            f"seq_len={seq_len}"
        )


def rows_for_call(inputs, start_index, positions, position, constants, dtype, limit_is_argument=True,
                  sequence_axis=1):
    """The encoding rows for `inputs` (`(batch, ..., seq_len, ...)`, sequence on `sequence_axis`).

    Returns rows of shape `(seq_len, d)` for a contiguous range, or `positions.shape + (d,)`.
    `limit_is_argument` says whether `position` is the layer's argument of that name (else it
    is the largest position the route serves), for the error messages.
    """
    limbs, offsets = constants
    if positions is not None:
        if not (_is_python_int(start_index) and start_index == 0):
            raise ValueError(
                "Pass either `start_index` or `positions`, not both. "
                f"Received: start_index={start_index!r} with positions"
            )
        return _rows_at(inputs, positions, position, limbs, offsets, dtype, limit_is_argument,
                        sequence_axis)
    seq_len = inputs.shape[sequence_axis]
    if _is_python_int(start_index):
        start_index = _validation.non_negative_int("start_index", start_index)
        check_fits(start_index, 0 if seq_len is None else seq_len, position, limit_is_argument)
        if seq_len is not None:
            return rows.contiguous_rows(start_index, seq_len, limbs, offsets, dtype)
        start = tf.constant(start_index, tf.int64)
    else:
        start = _integer_tensor("start_index", start_index)
        if len(start.shape) != 0:
            raise ValueError(
                f"`start_index` must be a scalar. Received: start_index with shape {start.shape}"
            )
        if not _graph_checks():
            return rows.contiguous_rows(start, seq_len, limbs, offsets, dtype)
        start = _as_int64_at_most("start_index", start, position)
    length = tf.shape(inputs, out_type=tf.int64)[sequence_axis]
    fits = _run_time_check(start + length <= position, _too_long(position, limit_is_argument))
    with tf.control_dependencies([fits]):
        return rows.contiguous_rows(start, seq_len if seq_len is not None else length, limbs, offsets,
                                    dtype)


def _rows_at(inputs, positions, position, limbs, offsets, dtype, limit_is_argument, sequence_axis):
    positions = _integer_tensor("positions", positions)
    if len(positions.shape) not in (1, 2):
        raise ValueError(
            "`positions` must have shape (seq_len,) or (batch, seq_len). "
            f"Received: positions with shape {positions.shape}"
        )
    expected = {-1: (inputs.shape[sequence_axis], "one entry per step of `inputs` (seq_len")}
    if len(positions.shape) == 2:
        expected[0] = (inputs.shape[0], "one row per example of `inputs` (batch")
    for axis, (wanted, what) in expected.items():
        given = positions.shape[axis]
        if wanted is not None and given is not None and wanted != given:
            raise ValueError(
                f"`positions` must have {what}={wanted}). Received: positions with shape {positions.shape}"
            )
    if not _graph_checks():
        return rows.rows_at(positions, limbs, offsets, dtype)
    wide = tf.uint64 if positions.dtype.is_unsigned else tf.int64
    widened = tf.cast(positions, wide)
    shape, input_shape = tf.shape(positions), tf.shape(inputs)
    checks = [
        _run_time_check(
            tf.reduce_all(widened < tf.constant(position, wide)),
            (f"The sequence is longer than `position`: every position must be below position={position}."
             if limit_is_argument else f"Every position must be below {position}."),
        ),
        _run_time_check(
            tf.equal(shape[-1], input_shape[sequence_axis]),
            "`positions` must have one entry per step of `inputs` (seq_len).",
        ),
    ]
    if not positions.dtype.is_unsigned:
        checks.append(_run_time_check(tf.reduce_all(widened >= 0), "`positions` must be non-negative."))
    if positions.shape.rank == 2:
        checks.append(_run_time_check(
            tf.equal(shape[0], input_shape[0]),
            "`positions` must have one row per example of `inputs` (batch).",
        ))
    with tf.control_dependencies(checks):
        return rows.rows_at(widened, limbs, offsets, dtype)


def checked_below(values, limit, message):
    """Integer `values`, after a graph check (where graphs can check) that they lie in
    [0, limit); `message` names the values, with `{limit}` for the limit."""
    if not _graph_checks():
        return values
    wide = tf.cast(values, tf.int64)
    in_range = _run_time_check(tf.reduce_all((wide >= 0) & (wide < limit)), message.format(limit=limit))
    with tf.control_dependencies([in_range]):
        return tf.identity(wide)


def positions_from_mask(mask):
    """Positions for left-padded sequences: the first real token of each row is position 0.

    Args:
        mask: Boolean or 0/1 tensor of shape `(batch, seq_len)`, true for real tokens (as
            `Embedding(mask_zero=True)` makes it).

    Returns:
        An int32 tensor of the same shape: each real token's index among the real tokens of
        its row; padding gets 0. Pass it as `positions=` to `PositionalEncoding` or
        `RotaryEmbedding`.

    Example:

    >>> keras.ops.convert_to_numpy(positions_from_mask([[False, False, True, True, True]]))
    array([[0, 0, 0, 1, 2]], dtype=int32)
    """
    mask = ops.convert_to_tensor(mask)
    if len(mask.shape) != 2:
        raise ValueError(f"`mask` must have shape (batch, seq_len). Received: mask.shape={mask.shape}")
    counts = ops.cumsum(ops.cast(ops.cast(mask, "bool"), "int32"), axis=-1)
    return ops.maximum(counts - 1, 0)


def whole_positions(positions):
    """Integer positions as they are; float positions checked to be whole numbers (where the
    graph can check), as integers."""
    positions = ops.convert_to_tensor(positions)
    if "float" not in keras.backend.standardize_dtype(positions.dtype):
        return positions
    if not _graph_checks():
        return ops.cast(positions, "int32")
    whole = tf.debugging.Assert(
        tf.reduce_all(tf.math.floor(positions) == positions),
        ["`positions` given as floats must hold whole numbers."],
    )
    with tf.control_dependencies([whole]):
        return tf.cast(positions, tf.int64)
