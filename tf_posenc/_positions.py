"""Internal: which positions a call covers, checked once, where they enter.

A call covers `start_index .. start_index + seq_len - 1`, or the given `positions`, and every
one of them must lie below the layer's limit (`position` for the additive encodings, 2**31 - 1
for the others). What is known when the call is traced is checked then, with a `ValueError` or
`TypeError`; what is only known when the graph runs is checked by the graph
(`InvalidArgumentError`). On the PyTorch backend eager tensors hold their values, which are
checked at once: the same messages, as a `ValueError`. XLA and TensorFlow Lite drop the run-time
checks, and the JAX backend (whose shapes are all known when a call is traced) and compiled
PyTorch programs have none; there the rows past the limit are still the exact values of the
formula (for positions below 2**31), never clamped or garbage.

Positions given as floats must hold whole numbers (tensor2tensor and Model Garden pass float
positions); they are never rounded.
"""

import numbers
from typing import NamedTuple

import keras
import numpy as np
from keras import ops

from tf_posenc import _kept, _validation
from tf_posenc._tensorflow import tf


class Positions(NamedTuple):
    """The checked positions of a call: `start .. start + seq_len - 1`, or `values`.

    Exactly one is set: `start`, a Python int or a scalar int32 tensor, or `values`, an int32
    tensor of any shape.
    """

    start: object = None
    values: object = None


class Limit(NamedTuple):
    """Every position must be below `value`; `name` is the layer argument that sets it, if any."""

    value: int
    name: str = None

    def too_long(self):
        if self.name is None:
            return (
                "The sequence runs past the largest position: start_index + seq_len must be at "
                f"most {self.value}."
            )
        return (
            f"The sequence is longer than `{self.name}`: start_index + seq_len must be at most "
            f"{self.name}={self.value}."
        )

    def check_fits(self, start, seq_len):
        """Raises a `ValueError` unless `start + seq_len` (Python ints) is at most the limit."""
        if start + seq_len > self.value:
            raise ValueError(f"{self.too_long()} Received: start_index={start}, seq_len={seq_len}")

    def below(self, what):
        if self.name is None:
            return f"`{what}` must be below {self.value}."
        return (
            f"The sequence is longer than `{self.name}`: every position must be below "
            f"{self.name}={self.value}."
        )


LARGEST = Limit(_validation.MAX_POSITION)


def _graph_checks():
    """Whether the graphs can stop on a failed check: TensorFlow's can, compiled JAX cannot."""
    return keras.backend.backend() == "tensorflow"


def values_at_hand():
    """Whether the values are at hand to check: PyTorch's eager tensors (not while `torch.compile`
    or an export traces them)."""
    if keras.backend.backend() != "torch":
        return False
    import torch

    return not (torch.compiler.is_compiling() or torch.jit.is_tracing())


def checked_not_positive(value, message):
    """The int32 scalar `value` after checking that it is at most 0: at once where the values are
    at hand (a `ValueError`) or eager (TensorFlow's `InvalidArgumentError`, as a graph gives), by
    an `Assert` in a TensorFlow graph; compiled JAX cannot stop on a value, and is not checked."""
    if values_at_hand():
        _raise_unless(ops.convert_to_numpy(value), [(lambda v: v <= 0, message)], ValueError)
        return value
    if _graph_checks():
        return _checked(value, [(lambda v: v <= 0, message)])
    return value


def is_python_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _raise_unless(known, conditions, error):
    """Raises `error(message)` for the first `(holds, message)` of `conditions` that fails on the
    NumPy array `known`."""
    for holds, message in conditions:
        if not np.all(holds(known)):
            raise error(message)


def _checked(wide, conditions):
    """`wide` after checking every `(holds, message)` of `conditions`: `holds(wide)` must be true
    everywhere. Eager values are known, so they are checked at once (with the error a graph
    gives); a graph gets one `Assert` per condition."""
    if tf.executing_eagerly():
        _raise_unless(
            wide.numpy(), conditions, lambda message: tf.errors.InvalidArgumentError(None, None, message)
        )
        return wide
    for holds, message in conditions:
        # String-only data keeps `tf.debugging.Assert` a single op: no `cond` around it, so
        # Grappler's loop optimizer has no control-input Merge to warn about.
        with tf.control_dependencies([tf.debugging.Assert(tf.reduce_all(holds(wide)), [message])]):
            wide = tf.identity(wide)
    return wide


def _whole_numbers(name):
    """The check of positions given as floats, on tensors and NumPy arrays alike."""
    return [(lambda values: values // 1 == values, f"`{name}` given as floats must hold whole numbers.")]


def _range_conditions(name, limit, inclusive, largest, unsigned):
    """The range checks of integer values whose dtype holds at most `largest`, as `(holds,
    message)` pairs that work on tensors and NumPy arrays alike. A check that no value of the
    dtype can fail is left out."""
    conditions = []
    if inclusive and largest > limit.value:
        conditions.append((lambda wide: wide <= limit.value, f"`{name}` must be at most {limit.value}."))
    elif not inclusive and largest >= limit.value:
        conditions.append((lambda wide: wide < limit.value, limit.below(name)))
    if not unsigned:
        conditions.append((lambda wide: wide >= 0, f"`{name}` must be non-negative."))
    return conditions


def _in_range(name, values, limit, inclusive=False):
    """Integer or whole-number float `values` as int32, after the one range check: every value
    in [0, limit) (or [0, limit] where `inclusive`), checked by the graph where graphs check."""
    if values_at_hand():
        return _in_range_now(name, values, limit, inclusive)
    if not _graph_checks():
        return ops.cast(values, "int32")
    if values.dtype.is_floating:
        # In their own dtype: a graph holds no float64 operation.
        values = tf.cast(_checked(values, _whole_numbers(name)), tf.int64)
    wide = tf.cast(values, tf.uint64 if values.dtype.is_unsigned else tf.int64)
    conditions = _range_conditions(name, limit, inclusive, values.dtype.max, values.dtype.is_unsigned)
    return tf.cast(_checked(wide, conditions), tf.int32)


def _in_range_now(name, values, limit, inclusive=False):
    """`_in_range` of values at hand (PyTorch's eager tensors): the same checks and messages,
    made at once, as a `ValueError` (an `InvalidArgumentError` is TensorFlow's, for what a graph
    checks when it runs)."""
    known = ops.convert_to_numpy(values)
    if known.dtype.kind == "f":
        _raise_unless(known, _whole_numbers(name), ValueError)
        known = known.astype(np.int64)
    unsigned = known.dtype.kind == "u"
    wide = known.astype(np.uint64 if unsigned else np.int64)
    _raise_unless(
        wide, _range_conditions(name, limit, inclusive, np.iinfo(known.dtype).max, unsigned), ValueError
    )
    return ops.cast(values, "int32")


def _numbers(name, values, allow_floats=True):
    values = ops.convert_to_tensor(values)
    dtype = keras.backend.standardize_dtype(values.dtype)
    if "int" not in dtype and not (allow_floats and "float" in dtype):
        kind = "integers, or floats that hold whole numbers" if allow_floats else "integers"
        raise TypeError(f"`{name}` must hold {kind}. Received: {name}.dtype={dtype}")
    return values


def checked_values(name, values, limit=LARGEST, allow_floats=True):
    """`values` (integers, or where `allow_floats` floats holding whole numbers) as int32
    positions below `limit`. A symbolic input of a functional model gets an operation that makes
    the same checks whenever the model runs."""
    values = _numbers(name, values, allow_floats)
    if isinstance(values, keras.KerasTensor):
        return CheckedValues(name, limit.value, limit.name)(values)
    return _in_range(name, values, limit)


def _is_float(values):
    return "float" in keras.backend.standardize_dtype(values.dtype)


def _timestep_conditions(name, limit):
    """The checks of timesteps given as floats: a number, finite, of magnitude below `limit`."""
    return [
        (lambda values: values == values, f"`{name}` must not hold NaN."),
        (
            lambda values: abs(values) < limit.value,
            f"`{name}` must be finite, of magnitude below {limit.value}.",
        ),
    ]


def _float32_numbers(name):
    """The check of float64 timesteps: each a float32 number, so that none is rounded."""
    return [
        (
            lambda values: (
                values.astype(np.float32).astype(np.float64) == values
                if isinstance(values, np.ndarray)
                else tf.cast(tf.cast(values, tf.float32), tf.float64) == values
            ),
            f"`{name}` given as float64 must hold float32 numbers: a timestep is never rounded.",
        )
    ]


def _fractions_in_range(name, values, limit):
    """Float `values` as float32 after the checks of `_timestep_conditions` (and, for float64,
    `_float32_numbers`): every float32 value is a timestep of its own, never rounded."""
    wide = keras.backend.standardize_dtype(values.dtype) == "float64"
    conditions = (_float32_numbers(name) if wide else []) + _timestep_conditions(name, limit)
    if values_at_hand():
        _raise_unless(ops.convert_to_numpy(values).astype(np.float64), conditions, ValueError)
    elif _graph_checks():
        values = _checked(values, conditions)
    return ops.cast(values, "float32")


def checked_timesteps(name, values):
    """Timesteps as the rows take them: integers as `checked_values` makes them (int32, from 0
    to 2**31 - 2); floats as float32, any finite value of magnitude below 2**31 - 1, negative
    or fractional (diffusion models' `sigma * 1000`), never rounded."""
    values = _numbers(name, values)
    if not _is_float(values):
        return checked_values(name, values)
    if isinstance(values, keras.KerasTensor):
        return CheckedValues(name, LARGEST.value, LARGEST.name, fractions=True)(values)
    return _fractions_in_range(name, values, LARGEST)


def batched_positions(name, positions):
    """`positions` `(seq_len,)` or `(batch, seq_len)` as int32 `(batch or 1, seq_len)`, checked."""
    positions = checked_values(name, positions)
    if len(positions.shape) not in (1, 2):
        raise ValueError(
            f"`{name}` must have shape (seq_len,) or (batch, seq_len). Received: {name} with shape "
            f"{tuple(positions.shape)}"
        )
    return positions if len(positions.shape) == 2 else ops.expand_dims(positions, 0)


@keras.saving.register_keras_serializable(package="tf_posenc")
class CheckedValues(keras.Operation):
    """`checked_values` as an operation of a functional model (saved with it)."""

    def __init__(self, what, limit, limit_name=None, name=None, fractions=False):
        super().__init__(name=name)
        self.what, self.limit, self.limit_name = what, limit, limit_name
        self.fractions = fractions

    def call(self, values):
        if self.fractions and _is_float(values):
            return _fractions_in_range(self.what, values, Limit(self.limit, self.limit_name))
        return _in_range(self.what, values, Limit(self.limit, self.limit_name))

    def compute_output_spec(self, values):
        return keras.KerasTensor(values.shape, "float32" if self.fractions and _is_float(values) else "int32")

    def get_config(self):
        config = {"what": self.what, "limit": self.limit, "limit_name": self.limit_name, "name": self.name}
        return {**config, "fractions": True} if self.fractions else config


def _checked_start(start_index, inputs, sequence_axis, limit):
    seq_len = inputs.shape[sequence_axis]
    if _kept.in_graph(start_index) and seq_len is not None and _graph_checks() and not values_at_hand():
        return _kept.CHECKED_STARTS.get(
            start_index,
            _kept.CheckedStartKey(limit, seq_len, _kept.device()),
            lambda: _checked_start_now(start_index, inputs, sequence_axis, limit),
        )
    return _checked_start_now(start_index, inputs, sequence_axis, limit)


def _checked_start_now(start_index, inputs, sequence_axis, limit):
    seq_len = inputs.shape[sequence_axis]
    length = sequence_length(inputs, sequence_axis)
    if is_python_int(start_index):
        start = _validation.non_negative_int("start_index", start_index)
        limit.check_fits(start, seq_len or 0)
        if seq_len is not None or not _graph_checks():
            return start
        # A Python int reaches int32 only after the length check below.
        start = tf.constant(start, tf.int64)
    else:
        start = _numbers("start_index", start_index, allow_floats=False)
        if len(start.shape) != 0:
            raise ValueError(
                f"`start_index` must be a scalar. Received: start_index with shape {start.shape}"
            )
        if values_at_hand():
            start = int(ops.convert_to_numpy(_in_range_now("start_index", start, limit, inclusive=True)))
            limit.check_fits(start, length)
            return start
        if not _graph_checks():
            return ops.cast(start, "int32")
        if start.dtype == tf.int32 and isinstance(length, int):
            # A decoding step's case: every check in int32 (`limit - length` cannot overflow),
            # and no casts.
            conditions = _range_conditions("start_index", limit, True, start.dtype.max, False)
            return _checked(start, [*conditions, _fits(limit, length)])
        start = tf.cast(_in_range("start_index", start, limit, inclusive=True), tf.int64)
    length = length if isinstance(length, int) else tf.cast(length, tf.int64)
    return tf.cast(_checked(tf.cast(start, tf.int64), [_fits(limit, length)]), tf.int32)


def _fits(limit, length):
    """The check that a run of `length` from a start stays within `limit`, as a `(holds,
    message)` pair: `start <= limit - length`, which no integer start can overflow."""
    return (lambda start: start <= limit.value - length, limit.too_long())


def _checked_sequence_positions(positions, inputs, sequence_axis, limit):
    positions = _numbers("positions", positions)
    if len(positions.shape) not in (1, 2):
        raise ValueError(
            "`positions` must have shape (seq_len,) or (batch, seq_len). "
            f"Received: positions with shape {positions.shape}"
        )
    expected = {-1: (sequence_axis, "one entry per step of `inputs` (seq_len")}
    if len(positions.shape) == 2:
        expected[0] = (0, "one row per example of `inputs` (batch")
    for axis, (input_axis, what) in expected.items():
        wanted, given = inputs.shape[input_axis], positions.shape[axis]
        if wanted is not None and given is not None and wanted != given:
            raise ValueError(
                f"`positions` must have {what}={wanted}). Received: positions with shape {positions.shape}"
            )
        positions = same_size(positions, axis, inputs, input_axis, f"`positions` must have {what}).")
    return _in_range("positions", positions, limit)


def same_size(tensor, axis, other, other_axis, message):
    """`tensor`, after a graph check that its `axis` has the size of `other`'s `other_axis`
    where either is known only when the graph runs (where both are known, the caller has
    compared them)."""
    known = (tensor.shape[axis], other.shape[other_axis])
    if None not in known or not _graph_checks():
        return tensor
    sizes = tf.stack([tf.shape(tensor)[axis], tf.shape(other)[other_axis]])
    sizes = _checked(sizes, [(lambda sizes: sizes[0] == sizes[1], message)])
    with tf.control_dependencies([sizes]):
        return tf.identity(tensor)


def has_size(tensor, axis, size, message):
    """`tensor`, after a graph check that its `axis` has `size` where that is known only when
    the graph runs (where it is known, the caller has compared it)."""
    if tensor.shape[axis] is not None or not _graph_checks():
        return tensor
    given = _checked(tf.shape(tensor)[axis], [(lambda given: given == size, message)])
    with tf.control_dependencies([given]):
        return tf.identity(tensor)


def resolve(inputs, sequence_axis, limit, start_index=0, positions=None):
    """The checked `Positions` of a call over the `sequence_axis` of `inputs`.

    Args:
        inputs: The call's inputs (a tensor or anything with `shape`).
        sequence_axis: Integer. The axis of `inputs` that the positions run along.
        limit: A `Limit`: every position must be below it.
        start_index: Integer or scalar integer tensor, the first position of a contiguous
            range. Defaults to `0`.
        positions: Optional `(seq_len,)` or `(batch, seq_len)` positions, integers or floats
            holding whole numbers; given, `start_index` must stay `0`.
    """
    if positions is not None:
        if not (is_python_int(start_index) and start_index == 0):
            raise ValueError(
                "Pass either `start_index` or `positions`, not both. "
                f"Received: start_index={start_index!r} with positions"
            )
        return Positions(values=_checked_sequence_positions(positions, inputs, sequence_axis, limit))
    return Positions(start=_checked_start(start_index, inputs, sequence_axis, limit))


def extent(positions, length):
    """The largest position of a call + 1: a Python int where it is known when the call is
    traced (a Python `start_index` and a known length, or positions with known values), else
    a scalar int32 tensor."""
    if positions.values is not None:
        known = _known_value(positions.values)
        if known is None:
            return ops.max(positions.values) + 1
        return int(known.max()) + 1 if known.size else 0
    start = positions.start if is_python_int(positions.start) else _known_value(positions.start)
    if start is not None and isinstance(length, int):
        return int(start) + length
    return positions.start + length


def _known_value(tensor):
    """The value of `tensor` as a NumPy array if it is known while tracing, else None."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return None if isinstance(tensor, jax.core.Tracer) else np.asarray(tensor)
    if backend == "torch":
        return ops.convert_to_numpy(tensor) if values_at_hand() else None
    return tf.get_static_value(tensor)


def sequence_length(inputs, sequence_axis):
    """The length of `inputs` along `sequence_axis`: a Python int where known, else a tensor."""
    length = inputs.shape[sequence_axis]
    return length if length is not None else ops.shape(inputs)[sequence_axis]


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


def checked_segment_ids(segment_ids, name="segment_ids"):
    """`segment_ids` as int32 `(batch, seq_len)`, after the checks: integers, 0 for padding and
    positive ids for documents (a negative id is refused, by the graph where it is only known
    when the graph runs)."""
    segment_ids = ops.convert_to_tensor(segment_ids)
    dtype = keras.backend.standardize_dtype(segment_ids.dtype)
    if "int" not in dtype:
        raise TypeError(f"`{name}` must hold integers (0 for padding). Received: {name}.dtype={dtype}")
    if len(segment_ids.shape) != 2:
        raise ValueError(
            f"`{name}` must have shape (batch, seq_len). Received: {name}.shape={segment_ids.shape}"
        )
    return checked_values(name, segment_ids, allow_floats=False)
