"""The one in-graph route from integer positions to encoding rows: int32 and float32 only.

Every layer computes its rows here, in eager calls, `tf.function`, XLA, SavedModels,
TensorFlow Lite, ONNX and `tf.distribute` replicas alike, so they all get the same numbers.
The route is written in `keras.ops`, so the JAX backend runs the same steps (in int32 and
float32, without JAX's 64-bit mode).

1. **Phase, exactly, in integers.** A column's angle is `p * w`, and only its fraction of a
   turn, `p * w / (2 * pi) mod 1`, matters. Each column's turns per position are kept as a
   72-bit fixed-point fraction in six 12-bit limbs; a position (below 2**31) is split into
   three 12-bit limbs, every limb product fits in int32, and carrying the column sums gives
   the phase `p * F mod 2**72` exactly.
2. **Sine of a phase, to about 2**-38, in float32.** The top 10 bits of the phase pick an
   angle `A` of a 1024-entry table of `sin A` (as a float32 pair, hi + lo) and `2 * pi * cos A`
   (10 significant bits + the rest). The remaining angle `r < 2 * pi / 1024` enters
   `sin(A + r) = sin A + cos A * r - sin A * r**2 / 2 - cos A * r**3 / 6 + ...`. The first
   product is exact (10 by 14 significant bits) and smaller than `sin A` (|tan A| > r), so
   `sin A + product` splits into a rounded sum and its exact error (Dekker's Fast2Sum);
   every other term is below 2**-15 and only needs float32's relative precision.
3. **Rows, block by step, one rounding.** Position `p` is `block + step` with
   `step = p mod 64`; its row is `sin(block angle + step angle)` by the angle-addition formula,
   from the sines and cosines of step 2 cut into pieces whose leading products are exact, and
   summed so that only the final addition rounds to float32 (other dtypes are one cast away;
   float64 keeps both parts). Every position is computed this way, so contiguous rows (which
   only need the sines of their blocks and of the 64 steps) have the same bits as rows asked
   for one by one.

A cosine is the sine a quarter turn later, so cosine columns just add 2**70 to the phase.
"""

import functools
import math
from fractions import Fraction

import keras
import numpy as np
from keras import ops

from tf_posenc import encoding

_LIMB_BITS = 12
_LIMB = 2**_LIMB_BITS
_FREQUENCY_LIMBS = 6  # 72 bits of turns per position
_POSITION_LIMBS = 3  # 36 bits hold every int32 position
_DIGIT = 2**24  # the phase is used as 24-bit digits: hi, mid, lo
_TABLE_BITS = 10
_FINE = 2 ** (24 - _TABLE_BITS)  # the bits of `hi` below the table index
_QUARTER_TURN = _DIGIT // 4  # in units of the `hi` digit
_STEP = 64  # rows are built as sin(block + step) with step = position mod 64

_TWO_PI = 2 * Fraction("3.14159265358979323846264338327950288419716939937510582097494459")


def _turns_fixed_point(frequency):
    """`frequency / (2 * pi) mod 1` as an integer count of 2**-72 turns, rounded to nearest."""
    turns = Fraction(float(frequency)) / _TWO_PI
    turns -= math.floor(turns)
    return round(turns * 2 ** (_LIMB_BITS * _FREQUENCY_LIMBS)) % 2 ** (_LIMB_BITS * _FREQUENCY_LIMBS)


@functools.lru_cache(maxsize=64)
def column_constants(frequencies, quarter_turns):
    """The per-column constants: frequency limbs `(6, d)` and phase offsets `(d,)`, int32.

    Args:
        frequencies: Tuple of floats, angular frequency of each output column.
        quarter_turns: Tuple of ints, how many quarter turns each column's phase starts at
            (1 makes a sine column a cosine column).
    """
    limbs = np.zeros((_FREQUENCY_LIMBS, len(frequencies)), np.int32)
    for column, frequency in enumerate(frequencies):
        fixed = _turns_fixed_point(frequency)
        for limb in range(_FREQUENCY_LIMBS):
            shift = _LIMB_BITS * (_FREQUENCY_LIMBS - 1 - limb)
            limbs[limb, column] = (fixed >> shift) % _LIMB
    offsets = (np.asarray(quarter_turns, np.int64) % 4 * _QUARTER_TURN).astype(np.int32)
    limbs.flags.writeable = False
    offsets.flags.writeable = False
    return limbs, offsets


def encoding_constants(d_model, max_wavelength=10000, layout=None, convention="paper",
                       min_timescale=1.0):
    """`column_constants` for the encoding with these options (those of `encoding.columns`)."""
    frequencies, cosine = encoding.columns(d_model, max_wavelength, layout, convention, min_timescale)
    return column_constants(tuple(frequencies.tolist()), tuple(cosine.astype(int).tolist()))


@functools.lru_cache(maxsize=1)
def _sine_table():
    """Per table angle A = 2*pi*j/1024: sin A as hi + lo, and 2*pi*cos A as 10 bits + rest."""
    steps = np.arange(2**_TABLE_BITS)
    quadrant, within = steps // 2 ** (_TABLE_BITS - 2), steps % 2 ** (_TABLE_BITS - 2)
    angle = 2 * np.pi * within / 2**_TABLE_BITS
    sine, cosine = np.sin(angle), np.cos(angle)
    # Quadrants by symmetry, so that sin and cos are exactly 0 and +-1 at quarter turns.
    sine, cosine = (
        np.select([quadrant == 0, quadrant == 1, quadrant == 2], [sine, cosine, -sine], -cosine),
        np.select([quadrant == 0, quadrant == 1, quadrant == 2], [cosine, -sine, -cosine], sine),
    )
    sine_hi = sine.astype(np.float32)
    sine_lo = (sine - sine_hi).astype(np.float32)
    slope = 2 * np.pi * cosine
    mantissa, exponent = np.frexp(slope)
    # Truncated toward zero, so that |slope_hi * r| never exceeds |sin A| (Fast2Sum's condition).
    slope_hi = np.ldexp(np.trunc(mantissa * 2**_TABLE_BITS), exponent - _TABLE_BITS)
    slope_lo = (slope - slope_hi).astype(np.float32)
    table = np.stack([sine_hi, sine_lo, slope_hi.astype(np.float32), slope_lo], axis=-1)
    table.flags.writeable = False
    return table


def _phase(positions, limbs):
    """Exact phases `p * F mod 2**72` as int32 digits (hi, mid, lo) of 24 bits each.

    `positions`: int32 tensor of any shape; the digits have shape `positions.shape + (d,)`.
    """
    positions = ops.expand_dims(positions, -1)
    position_limbs = [positions % _LIMB, positions // _LIMB % _LIMB, positions // _LIMB**2]
    # Column c collects the limb products worth 2**(60 - 12c); the ones worth 2**72 or more
    # are whole turns and drop out.
    columns = [
        sum(position_limbs[i] * limbs[i + c] for i in range(_POSITION_LIMBS) if i + c < _FREQUENCY_LIMBS)
        for c in range(_FREQUENCY_LIMBS)
    ]
    digits = [None] * _FREQUENCY_LIMBS
    carry = 0
    for c in reversed(range(_FREQUENCY_LIMBS)):
        total = columns[c] + carry
        digits[c], carry = total % _LIMB, total // _LIMB
    return digits[0] * _LIMB + digits[1], digits[2] * _LIMB + digits[3], digits[4] * _LIMB + digits[5]


def _add_phases(first, second):
    """The sum of two phases given as digits, mod one turn, with the carries."""
    lo = first[2] + second[2]
    mid = first[1] + second[1] + lo // _DIGIT
    hi = (first[0] + second[0] + mid // _DIGIT) % _DIGIT
    return hi, mid % _DIGIT, lo % _DIGIT


def _sine(hi, mid):
    """sin(2 * pi * phase) for phases given by their top two digits, as `(rounded, low)`.

    `rounded + low` is within about 2**-40 of the sine; `rounded` is a float32 and `low`
    is below half its last unit (plus about 2**-40).
    """
    index, fine = hi // _FINE, hi % _FINE
    # One gather of four values costs about as much as a gather of one.
    sine_hi, sine_lo, slope_hi, slope_lo = ops.unstack(ops.take(_sine_table(), index, axis=0), axis=-1)
    near = ops.cast(fine, "float32") * 2.0**-24  # exact: 14 bits
    far = ops.cast(mid, "float32") * 2.0**-48  # exact: 24 bits
    turns = near + far
    angle_squared = turns * turns * np.float32(4 * np.pi**2)
    cosine_minus_one = angle_squared * (angle_squared * np.float32(1 / 24) - 0.5)
    # cos A * r - cos A * r**3 / 6 = slope * (turns - turns * r**2 / 6), with slope = 2*pi*cos A.
    beyond_near = far - turns * angle_squared * np.float32(1 / 6)
    leading = slope_hi * near  # exact, and |leading| <= |sine_hi|
    rounded = sine_hi + leading
    error = leading - (rounded - sine_hi)
    small = sine_lo + slope_lo * (near + beyond_near) + slope_hi * beyond_near
    return rounded, error + (small + sine_hi * cosine_minus_one)


class _Pieces:
    """A value v in [-1, 1] given by `rounded + low`, cut so that products stay exact.

    `head` is v on a grid of 2**-11 and `middle` the rest on a grid of 2**-22, so that the
    product of two heads is a multiple of 2**-22 below 2 (exact in float32), and a head times
    a middle is a multiple of 2**-33 below 2**-12 (exact too, and so is a sum of four).
    `tail` is what remains (below 2**-23), `upper = head + middle` and `whole` the float32 of v.
    """

    def __init__(self, rounded, low):
        self.head = ops.round(rounded * 2.0**11) * 2.0**-11
        above_head = rounded - self.head  # exact: both are multiples of rounded's last unit
        self.middle = ops.round((above_head + low) * 2.0**22) * 2.0**-22
        self.tail = (above_head - self.middle) + low
        self.upper = self.head + self.middle
        self.whole = rounded + low

    def expand(self, axis):
        for name, value in vars(self).items():
            setattr(self, name, ops.expand_dims(value, axis))
        return self


def _sine_cosine_pieces(positions, limbs, offsets):
    """Pieces of sin and cos of each column's phase at `positions` (int32, any shape)."""
    hi, mid, _ = _phase(positions, limbs)
    hi = hi + offsets
    sine = _Pieces(*_sine(hi % _DIGIT, mid))
    cosine = _Pieces(*_sine((hi + _QUARTER_TURN) % _DIGIT, mid))
    return sine, cosine


def _combine(sine_a, cosine_a, sine_b, cosine_b, dtype):
    """sin(a + b) = sin a cos b + cos a sin b, rounded once to `dtype`.

    The products of heads (`leading`) and of heads with middles (`second`) are exact, and so is
    their sum split by Fast2Sum: either |leading| >= |second|, or `leading` is a multiple of
    2**-22 below 2**-10 and the sum is exact outright. Only `third`, below 2**-21, rounds
    before the last step. Subtractions carry the last steps, so that Grappler's rewrite of
    addition trees into `AddN` (which may sum in any order) cannot merge them.
    """
    leading = sine_a.head * cosine_b.head + cosine_a.head * sine_b.head
    second = (sine_a.head * cosine_b.middle + sine_a.middle * cosine_b.head) + (
        cosine_a.head * sine_b.middle + cosine_a.middle * sine_b.head
    )
    third = (
        sine_a.upper * cosine_b.tail + sine_a.tail * cosine_b.whole + sine_a.middle * cosine_b.middle
    ) + (cosine_a.upper * sine_b.tail + cosine_a.tail * sine_b.whole + cosine_a.middle * sine_b.middle)
    rounded = leading + second
    shortfall = rounded - leading  # Fast2Sum: second - shortfall is the sum's exact error
    minus_low = (shortfall - second) - third
    if keras.backend.standardize_dtype(dtype) == "float64":
        return ops.cast(rounded, "float64") - ops.cast(minus_low, "float64")
    return ops.cast(rounded - minus_low, dtype)


def rows_at(positions, limbs, offsets, dtype="float32"):
    """Rows at integer `positions` (any shape, each below 2**31), shape `positions.shape + (d,)`.

    Every row is computed the same way wherever it is asked for: position p is split as
    block + step, with step = p mod 64, and the row is sin(block phase + step phase).
    """
    positions = ops.cast(positions, "int32")
    step = positions % _STEP
    block = _sine_cosine_pieces(positions - step, limbs, offsets)
    return _combine(*block, *_sine_cosine_pieces(step, limbs, np.zeros_like(offsets)), dtype)


def contiguous_rows(start, length, limbs, offsets, dtype="float32"):
    """Rows `start .. start + length - 1`, shape `(length, d)`, bit-equal to `rows_at`.

    `start` and `length` are Python ints or scalar integer tensors (a tensor `length` only
    where the backend allows dynamic shapes, as TensorFlow graphs do). The rows fill a grid of
    64-position blocks by steps: only the blocks' and the 64 steps' sines are computed from
    phases, and each grid cell combines one of each.
    """
    static_length = isinstance(length, int)
    if isinstance(start, int) and static_length:
        if length < _STEP:  # fewer rows than one block: cheaper one by one, and the same bits
            return rows_at(np.arange(start, start + length, dtype=np.int32), limbs, offsets, dtype)
        skip = start % _STEP
        blocks = -(-(skip + length) // _STEP)
    else:
        start = ops.cast(start, "int32")
        skip = start % _STEP
        if static_length:  # enough blocks for any skip: the grid keeps a static shape (JAX)
            blocks = (length + 2 * _STEP - 2) // _STEP
        else:
            length = ops.cast(length, "int32")
            blocks = (skip + length + _STEP - 1) // _STEP
    block_starts = (start - skip) + ops.arange(blocks, dtype="int32") * _STEP
    block = [pieces.expand(1) for pieces in _sine_cosine_pieces(block_starts, limbs, offsets)]
    steps = _sine_cosine_pieces(np.arange(_STEP, dtype=np.int32), limbs, np.zeros_like(offsets))
    steps = [pieces.expand(0) for pieces in steps]
    rows = ops.reshape(_combine(*block, *steps, dtype), (-1, limbs.shape[1]))
    if isinstance(skip, int):
        return rows[skip : skip + length]
    return ops.slice(rows, (skip, 0), (length, limbs.shape[1]))
