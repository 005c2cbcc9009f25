"""Internal: the one in-graph route from integer positions to encoding rows, int32 and float32 only.

Every layer computes its rows here (`rows`), in eager calls, `tf.function`, XLA, SavedModels,
TensorFlow Lite, ONNX and `tf.distribute` replicas alike, so they all get the same numbers. The
route is written in `keras.ops`, so the JAX backend runs the same steps (in int32 and float32,
without JAX's 64-bit mode). The documentation's Numerics page shows this docstring: it is the
one description.

1. **Phase, exactly, in integers.** A column's angle is `p * w`, and only its fraction of a
   turn, `p * w / (2 * pi) mod 1`, matters. Each column's turns per position are kept as a
   72-bit fixed-point fraction in six 12-bit limbs; a position (below 2**31) is split into
   three 12-bit limbs, every limb product fits in int32, and carrying the column sums gives
   the phase `p * F mod 2**72`, of which the top 48 bits are kept as two 24-bit digits.
2. **Sine of a phase, to about 2**-40, in float32.** The top 10 bits of the phase pick an
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
   for one by one. The steps' pieces depend on the columns alone: graphs hold them as
   constants (Grappler and XLA fold them), so a call computes the sines of
   its blocks only; and a run inside one block, such as a decoding step, uses only its own
   steps, so one row costs one grid cell, not 64.

A cosine is the sine a quarter turn later, so cosine columns just add 2**70 to the phase.

Error budget of a float32 row entry, in units of 2**-24 (one float32 unit in [0.5, 1)). The
terms before the final rounding are what it adds to; the tests measure the total.

| term | bound | checked by |
|---|---|---|
| frequency kept to 2**-73 turns, times a position below 2**31 (2**-42 turns) | 2**-15.4 | [b] |
| phase digits below 2**-48 turns dropped | 2**-21.4 | [b] |
| sine series cut after r**4, `r < 2 * pi / 1024` (r**5 / 120 < 2**-43.6) | 2**-19.6 | [a] |
| float32 rounding of the small terms of `_sine` (about 2**-40) | 2**-16 | [a] |
| `third` in `_combine` rounded before the last step (2**-45) | 2**-21 | [a], [c] |
| a rotary cos/sin scale: the products below its exact leading one (`_scaled`) | 2**-12 | [d] |
| the final rounding to the output dtype | 0.5 | [a] |
| total, measured at every position below 2**20 (`row_error_bound`: 1) | 0.5001 | [a], [c] |

[a] tests/test_numerics.py::test_layer_is_exact_at_every_position_below_2_20
[b] tests/test_runtimes.py::test_sampled_positions_up_to_2_31_are_exact
[c] tests/test_runtimes.py::test_every_runtime_is_exact_at_every_position_below_2_20
[d] tests/test_rope_types.py::test_rotation_is_exact_for_every_family
"""

import math
from fractions import Fraction
from typing import NamedTuple

import keras
import numpy as np
from keras import ops

from tf_posenc import _kept, _positions, _validation
from tf_posenc._tensorflow import tf

_LIMB_BITS = 12
_LIMB = 2**_LIMB_BITS
_FREQUENCY_LIMBS = 6  # 72 bits of turns per position
_POSITION_LIMBS = 3  # 36 bits hold every int32 position
_DIGIT = 2**24  # the phase is used as 24-bit digits: hi, mid
_TABLE_BITS = 10
_FINE = 2 ** (24 - _TABLE_BITS)  # the bits of `hi` below the table index
_QUARTER_TURN = _DIGIT // 4  # in units of the `hi` digit
STEP = 64  # rows are built as sin(block + step) with step = position mod 64
_KEPT_DIGITS = 2  # the phase digits kept, hi and mid: the top 48 bits of the 72
# `_Pieces`: a value in [-1, 1] cut at grids of 2**-_HEAD_BITS (head) and 2**-_MIDDLE_BITS (middle).
_HEAD_BITS = 11
_MIDDLE_BITS = 2 * _HEAD_BITS
_FLOAT32_BITS = 24  # significant bits of a float32
# The route's own error before the final rounding (the table above: below 2**-12 of 2**-24).
_ROUTE_ERROR = 2**-36
_SIGNIFICANT_BITS = {"bfloat16": 8, "float16": 11, "float32": _FLOAT32_BITS, "float64": 53}

# The invariants the route rests on; changing a constant above must keep them.
assert _DIGIT == _LIMB**2, "a 24-bit digit is two limbs"
assert _POSITION_LIMBS * _LIMB_BITS >= 31, "every int32 position fits in the position limbs"
# A column sum adds at most three limb products and the carry of the column below it.
_LARGEST_COLUMN_SUM = _POSITION_LIMBS * (_LIMB - 1) ** 2
assert _LARGEST_COLUMN_SUM + _LARGEST_COLUMN_SUM // (_LIMB - 1) < 2**31, "column sums fit in int32"
# The top digit before its `% _DIGIT`: below _DIGIT from column 0, column 1 and its carry,
# then an offset and a quarter turn (below _DIGIT together).
assert 2 * _DIGIT + 2 * _LARGEST_COLUMN_SUM < 2**31, "the unreduced top digit fits in int32"
# The table index and the fine bits make up the `hi` digit; and since `slope_hi` keeps
# _TABLE_BITS significant bits and `near` log2(_FINE), their product is exact in float32's
# 24-bit significand.
assert _TABLE_BITS + math.log2(_FINE) == 24, "table index and fine bits make up the `hi` digit"
assert _validation.MAX_POSITION % STEP == STEP - 1, "the last block is whole"
assert _FREQUENCY_LIMBS >= 2 * _KEPT_DIGITS, "the kept digits are frequency limb columns"
# Float32 products the route relies on being exact (see `_Pieces` and `_scaled`): two heads
# (at most _HEAD_BITS + 1 significant bits each, as |v| <= 1); a head and a middle (a middle is
# below half a head unit, so at most _MIDDLE_BITS - _HEAD_BITS bits); a sum of four of those
# (multiples of 2**-(_HEAD_BITS + _MIDDLE_BITS) below 2**-(_HEAD_BITS - 1)).
assert 2 * (_HEAD_BITS + 1) <= _FLOAT32_BITS, "a product of heads is exact"
assert _MIDDLE_BITS + 1 <= _FLOAT32_BITS, "a head times a middle is exact"
assert (_HEAD_BITS + _MIDDLE_BITS) - (_HEAD_BITS - 1) <= _FLOAT32_BITS, "a sum of four is exact"
# `_scaled` cuts the scale so that its head times a value's head is exact.
_SCALE_HEAD_BITS = _FLOAT32_BITS - (_HEAD_BITS + 1)

_TWO_PI = 2 * Fraction("3.14159265358979323846264338327950288419716939937510582097494459")


def cast(x, dtype):
    """`x` in `dtype`. A cast to the dtype a tensor has is no operation in a graph, but a call
    of its own on eager PyTorch, which runs every step, so it is left out."""
    return x if keras.backend.standardize_dtype(x.dtype) == dtype else ops.cast(x, dtype)


def row_error_bound(dtype="float32"):
    """The bound of |row entry - exact value| for rows in `dtype`: one unit of the dtype in
    [0.5, 1) (2**-24 for float32), of which the final rounding takes half and the route's own
    error 2**-12; for float64, which keeps the route's two parts, the route's error. The
    docstring's table, the documentation and the tests use this bound."""
    bits = _SIGNIFICANT_BITS[keras.backend.standardize_dtype(dtype)]
    return max(2.0**-bits, _ROUTE_ERROR)


ROW_ERROR_BOUND = row_error_bound("float32")


class RowProvider:
    """One layer configuration's rows: what a layer asks for its rows (`rows`, `timestep_rows`).

    It holds the configuration's per-column constants, int32 and read-only: frequency limbs
    `(6, d)`, phase offsets `(d,)`, and what the route reads of them: `products`, the frequency
    limbs each position limb multiplies (`_phase`), `(3, 6, d)`, `both_offsets`, the offsets of
    the sines and of the cosines a quarter turn later, `(2d,)`, and for fractional timesteps
    `fraction_products` (`_fraction_products`). Built once per configuration (`provider`); what
    is kept for it between calls is found in `_kept`'s stores by its `key`.
    """

    __slots__ = (
        "key",
        "limbs",
        "offsets",
        "products",
        "both_offsets",
        "fraction_products",
        "width",
        "nbytes",
    )

    def __init__(self, key, limbs, offsets, fraction_products=None):
        self.key, self.limbs, self.offsets, self.width = key, limbs, offsets, limbs.shape[1]
        self.products = _limb_products(limbs)
        self.both_offsets = _sine_and_cosine_offsets(offsets)
        self.fraction_products = fraction_products
        arrays = (limbs, offsets, self.products, self.both_offsets, fraction_products)
        self.nbytes = sum(array.nbytes for array in arrays if array is not None)

    def __deepcopy__(self, memo):
        return self  # read-only

    def step_pieces(self):
        """The `_StepPieces` of the 64 steps' sines, then of their cosines, stacked: `(8, 64, d)`.
        Constants, which graphs fold; PyTorch's eager calls, which fold nothing, compute them once
        per device and inference mode (a tensor made under `torch.inference_mode` cannot be saved
        for a training call's backward pass) and keep them in `_kept.STEP_PIECES`."""
        if not _positions.values_at_hand():
            return _steps_of(self.products)
        key = _kept.StepsKey(self.key, _kept.device(), _kept.inference_mode())
        return _kept.STEP_PIECES.get(key, lambda: _steps_of(self.products))

    def rows(self, positions, length, dtype="float32", scale=1.0):
        """The rows of `positions` (a checked `_positions.Positions`) in `dtype`, each entry times
        `scale` (a Python float) before its one rounding.

        Given `values` (int32, any shape), rows of shape `values.shape + (d,)`; given a `start`
        (a Python int or a scalar int32 tensor), the `length` rows from there, shape `(length, d)`,
        where `length` is a Python int or a scalar int32 tensor. The same position has the same
        bits either way.
        """
        if positions.values is not None:
            table = _rows_at(positions.values, self, dtype, scale)
        elif _kept.in_graph(positions.start) and isinstance(length, int):
            # The layers of a decoding step share their rows (see `_kept.PerGraph`).
            dtype = keras.backend.standardize_dtype(dtype)
            key = _kept.SharedRowsKey(self.key, length, dtype, float(scale), _kept.device())
            table = _kept.SHARED_ROWS.get(
                positions.start, key, lambda: _contiguous_rows(positions.start, length, self, dtype, scale)
            )
        else:
            table = _contiguous_rows(positions.start, length, self, dtype, scale)
        return _materialized(table) if keras.backend.backend() == "jax" else table

    def timestep_rows(self, timesteps, dtype="float32"):
        """The rows of checked timesteps (`_positions.checked_timesteps`): int32 ones by `rows`;
        float32 ones by `rows` where they are whole and not negative (the same bits as the
        integers), by their fractional phase elsewhere (a provider built with `fractions=True`),
        each rounded once to `dtype`."""
        if keras.backend.standardize_dtype(timesteps.dtype) == "int32":
            return self.rows(_positions.Positions(values=timesteps), None, dtype)
        return _fractional_timestep_rows(timesteps, self, dtype)


def _sine_and_cosine_offsets(offsets):
    """Phase offsets of `[sines | cosines]`: a cosine is the sine a quarter turn later."""
    both = np.concatenate([offsets, offsets + _QUARTER_TURN]).astype(np.int32)
    both.flags.writeable = False
    return both


def _limb_products(limbs):
    """Per position limb i, the frequency limbs it multiplies into the phase columns: column c
    collects the products worth 2**(60 - 12c), position limb i times frequency limb i + c, so
    limb i sees the frequency limbs moved up by i, zeros past the last (the products worth
    2**72 or more are whole turns and drop out)."""
    products = np.zeros((_POSITION_LIMBS, *limbs.shape), np.int32)
    for i in range(_POSITION_LIMBS):
        products[i, : _FREQUENCY_LIMBS - i] = limbs[i:]
    products.flags.writeable = False
    return products


def _turns_fixed_point(frequency, bits=_LIMB_BITS * _FREQUENCY_LIMBS):
    """`frequency / (2 * pi) mod 1` as an integer count of 2**-bits turns, rounded to nearest."""
    turns = Fraction(float(frequency)) / _TWO_PI
    turns -= math.floor(turns)
    return round(turns * 2**bits) % 2**bits


def _provider_of(key):
    limbs = np.zeros((_FREQUENCY_LIMBS, len(key.frequencies)), np.int32)
    for column, frequency in enumerate(key.frequencies):
        fixed = _turns_fixed_point(frequency)
        for limb in range(_FREQUENCY_LIMBS):
            shift = _LIMB_BITS * (_FREQUENCY_LIMBS - 1 - limb)
            limbs[limb, column] = (fixed >> shift) % _LIMB
    offsets = (np.asarray(key.quarter_turns, np.int64) % 4 * _QUARTER_TURN).astype(np.int32)
    limbs.flags.writeable = False
    offsets.flags.writeable = False
    fractions = _fraction_products(key.frequencies) if key.fractions else None
    return RowProvider(key, limbs, offsets, fractions)


def provider(frequencies, cosine, fractions=False):
    """The `RowProvider` of columns with these float64 `frequencies` (sines, or cosines where the
    boolean `cosine` says so), in the output columns' order; with the constants of fractional
    timesteps too where `fractions` says so. One per configuration, kept in `_kept.PROVIDERS`."""
    key = _kept.ColumnsKey(
        tuple(np.asarray(frequencies, np.float64).tolist()),
        tuple(np.asarray(cosine, bool).astype(int).tolist()),
        bool(fractions),
    )
    return _kept.PROVIDERS.get(key, lambda: _provider_of(key))


def _make_sine_table():
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


def _check_sine_table(table):
    """The table's floating-point facts that `_sine` rests on, as they hold."""
    sine_hi, _, slope_hi, _ = table.T.astype(np.float64)
    # Fast2Sum's condition for `sine_hi + leading`, with |leading| at most |slope_hi| times the
    # largest `near`: it holds at every entry but the zeros of the sine (entries 0 and half a
    # turn), where the sum is `leading` itself, exact.
    largest_near = (_FINE - 1) / _DIGIT
    assert np.all((np.abs(slope_hi) * largest_near <= np.abs(sine_hi)) | (sine_hi == 0)), "Fast2Sum"
    mantissa, _ = np.frexp(slope_hi)
    assert np.array_equal(np.trunc(mantissa * 2**_TABLE_BITS), mantissa * 2**_TABLE_BITS), "slope_hi bits"
    quarter = 2**_TABLE_BITS // 4
    assert sine_hi[::quarter].tolist() == [0.0, 1.0, 0.0, -1.0], "exact at the quarter turns"


SINE_TABLE = _make_sine_table()
_check_sine_table(SINE_TABLE)


_POSITION_LIMB_UNITS = np.array([_LIMB**i for i in range(_POSITION_LIMBS)], np.int32)


def _trailing_axes(values, count):
    """`values` with `count` axes of size 1 appended: one reshape where the shape is known."""
    if None not in values.shape:
        return ops.reshape(values, (*values.shape, *(1,) * count))
    for _ in range(count):
        values = ops.expand_dims(values, -1)
    return values


def _phase(positions, products):
    """Exact phases `p * F mod 2**72`, their top 48 bits as int32 digits (hi, mid) of 24 bits,
    `hi` plus some whole turns (a multiple of 2**24, below 2**26 in all).

    `positions`: int32 tensor of any shape; `products`: `RowProvider.products`. The digits have
    shape `positions.shape + (d,)`.
    """
    # The position limbs (the last holds every bit above the others: below 2**7), on an axis
    # of their own, `positions.shape + (3, 1, 1)`.
    position_limbs = _trailing_axes(positions, 3) // _POSITION_LIMB_UNITS[:, None, None] % _LIMB
    # Every limb product of a column at once, summed over the position limbs: integers, so
    # exact in any order.
    columns = ops.unstack(ops.sum(position_limbs * products, axis=-3), axis=-2)
    # Carried from the lowest column up to column 1: a column's bits above 12 go to the next.
    # The top digit keeps some whole turns (multiples of 2**24 in its units) for the caller's
    # `% _DIGIT`; column 0's own whole turns drop out.
    totals = [None] * _FREQUENCY_LIMBS
    totals[-1] = columns[-1]
    for column in range(_FREQUENCY_LIMBS - 2, 0, -1):
        totals[column] = columns[column] + totals[column + 1] // _LIMB
    hi = columns[0] % _LIMB * _LIMB + totals[1]
    lower = [totals[2 * d] % _LIMB * _LIMB + totals[2 * d + 1] % _LIMB for d in range(1, _KEPT_DIGITS)]
    return (hi, *lower)


def _gather(values, indices, axis=0):
    """`ops.take` of indices that are never negative: on TensorFlow a bare gather, without the
    three operations `ops.take` adds to wrap negative indices."""
    if keras.backend.backend() == "tensorflow":
        return tf.gather(values, indices, axis=axis)
    return ops.take(values, indices, axis=axis)


def _sine(hi, mid, constant=False):
    """sin(2 * pi * phase) for phases given by their top two digits, as `(rounded, low)`.

    `rounded + low` is within about 2**-40 of the sine; `rounded` is a float32 and `low`
    is below half its last unit (plus about 2**-40). `constant`: the phases are constants of
    the graph (the steps), computed by operations that graphs fold.
    """
    index, fine = hi // _FINE, hi % _FINE
    if constant:
        # One gather per value: Grappler folds a gather into a constant only where its output
        # is no larger than its inputs.
        sine_hi, sine_lo, slope_hi, slope_lo = (_gather(column, index) for column in SINE_TABLE.T)
    else:
        # One gather of four values costs about as much as a gather of one.
        sine_hi, sine_lo, slope_hi, slope_lo = ops.unstack(_gather(SINE_TABLE, index), axis=-1)
    near = ops.cast(fine, "float32") * (1.0 / _DIGIT)  # exact: log2(_FINE) bits
    far = ops.cast(mid, "float32") * (1.0 / _DIGIT**2)  # exact: 24 bits
    turns = near + far
    angle_squared = turns * turns * np.float32(4 * np.pi**2)
    cosine_minus_one = angle_squared * (angle_squared * np.float32(1 / 24) - 0.5)
    # cos A * r - cos A * r**3 / 6 = slope * (turns - turns * r**2 / 6), with slope = 2*pi*cos A.
    beyond_near = far - turns * angle_squared * np.float32(1 / 6)
    leading = slope_hi * near  # exact, and |leading| <= |sine_hi| or sine_hi == 0 (asserted below)
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
        self.head = ops.round(rounded * 2.0**_HEAD_BITS) * 2.0**-_HEAD_BITS
        above_head = rounded - self.head  # exact: both are multiples of rounded's last unit
        self.middle = ops.round((above_head + low) * 2.0**_MIDDLE_BITS) * 2.0**-_MIDDLE_BITS
        self.tail = (above_head - self.middle) + low
        self.upper = self.head + self.middle
        self.whole = rounded + low

    def split(self):
        """The pieces of the first half of the columns, and of the second half (one split per
        piece: a graph runs one operation for both halves)."""
        first, second = object.__new__(_Pieces), object.__new__(_Pieces)
        for name, value in vars(self).items():
            head, rest = ops.split(value, 2, axis=-1)
            setattr(first, name, head)
            setattr(second, name, rest)
        return first, second


def _sines_and_cosines(positions, products, both_offsets):
    """Pieces of sin and cos of each column's phase at `positions` (int32, any shape) plus
    `both_offsets` (as `RowProvider.both_offsets`), side by side along the last axis:
    `[sines | cosines]`, so that each operation serves both."""
    constant = isinstance(positions, np.ndarray) and isinstance(products, np.ndarray)
    return _pieces_of_phases(*_phase(positions, products), both_offsets, constant)


def _pieces_of_phases(hi, mid, both_offsets, constant=False):
    """`_sines_and_cosines` of phases given by their digits."""
    return _Pieces(
        *_sine(
            (ops.concatenate([hi, hi], axis=-1) + both_offsets) % _DIGIT,
            ops.concatenate([mid, mid], axis=-1),
            constant=constant,
        )
    )


class _StepPieces(NamedTuple):
    """The pieces of the steps' sines or cosines that `_combine` reads (see `_Pieces`)."""

    head: object
    middle: object
    tail: object
    whole: object


def _steps_of(products):
    # The steps' own phases: no offsets (the blocks carry them).
    offsets = _sine_and_cosine_offsets(np.zeros(products.shape[-1], np.int32))
    both = _sines_and_cosines(np.arange(STEP, dtype=np.int32), products, offsets)
    stacked = ops.stack([getattr(both, name) for name in _StepPieces._fields])
    return ops.concatenate(ops.split(stacked, 2, axis=-1), axis=0)


def _combine(block, steps, dtype, scale=1.0):
    """sin(a + b) = sin a cos b + cos a sin b, times `scale`, rounded once to `dtype`.

    `block` holds the `_Pieces` of `[sin a | cos a]`; `steps` the pieces of sin b and of cos b,
    the eight parts of `RowProvider.step_pieces`. The products of heads (`leading`) and of heads with
    middles (`second`) are exact, and so is their sum split by Fast2Sum: either |leading| >=
    |second|, or `leading` is a multiple of 2**-22 below 2**-10 and the sum is exact outright.
    Only `third`, below 2**-21, rounds before the last step. Subtractions carry the last steps,
    so that Grappler's rewrite of addition trees into `AddN` (which may sum in any order)
    cannot merge them.
    """
    sine_a, cosine_a = block.split()  # split where the values are fewest: the blocks, not the grid
    parts = len(_StepPieces._fields)
    sine_b, cosine_b = _StepPieces(*steps[:parts]), _StepPieces(*steps[parts:])
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
        value = ops.cast(rounded, "float64") - ops.cast(minus_low, "float64")
        return value if scale == 1.0 else value * np.float64(scale)
    if scale != 1.0:
        return ops.cast(_scaled(rounded, minus_low, scale), dtype)
    return ops.cast(rounded - minus_low, dtype)


def _scaled(rounded, minus_low, scale):
    """`scale * (rounded - minus_low)` in float32, rounded once: `scale` and `rounded` are cut so
    that the product of their leading parts (12 significant bits each) is exact, and every
    other product is below 2**-11 of it."""
    mantissa, exponent = math.frexp(scale)
    scale_head = math.ldexp(math.floor(mantissa * 2**_SCALE_HEAD_BITS), exponent - _SCALE_HEAD_BITS)
    scale_rest = np.float32(scale - scale_head)
    # At most _HEAD_BITS + 1 significant bits, as |rounded| <= 1.
    head = ops.round(rounded * 2.0**_HEAD_BITS) * 2.0**-_HEAD_BITS
    leading = head * np.float32(scale_head)
    rest = rounded - head  # exact
    return leading + ((rest * np.float32(scale_head) + rounded * scale_rest) - minus_low * np.float32(scale))


def _rows_at(positions, provider, dtype, scale=1.0):
    """Rows at int32 `positions` (any shape), shape `positions.shape + (d,)`: position p is split
    as block + step, with step = p mod 64, and the row is sin(block phase + step phase)."""
    step = positions % STEP
    block = _sines_and_cosines(positions - step, provider.products, provider.both_offsets)
    pieces = provider.step_pieces()
    # Sizes known as numbers (not `None`, nor JAX's symbolic dimensions of an export).
    if all(isinstance(size, int) for size in step.shape) and math.prod(step.shape) <= STEP:
        # A few positions (a decoding step): one gather, where the graph's cost is its number
        # of operations.
        steps = ops.unstack(_gather(pieces, step, axis=1))
    else:
        # A gather per part: XLA runs one gather of all eight twice as slowly.
        steps = [_gather(part, step) for part in ops.unstack(pieces)]
    return _combine(block, steps, dtype, scale)


def _contiguous_rows(start, length, provider, dtype, scale=1.0):
    """Rows `start .. start + length - 1`, shape `(length, d)`, bit-equal to `_rows_at`.

    `start` and `length` are Python ints or scalar int32 tensors (a tensor `length` only where
    the backend allows dynamic shapes, as TensorFlow graphs do). The rows fill a grid of
    64-position blocks by steps: only the blocks' and the 64 steps' sines are computed from
    phases, and each grid cell combines one of each.
    """
    static_length = isinstance(length, int)
    if static_length and length < STEP:  # fewer rows than a block: cheaper one by one, same bits
        return _rows_at(start + np.arange(length, dtype=np.int32), provider, dtype, scale)
    skip = start % STEP
    first_block = start - skip
    steps = provider.step_pieces()
    if not static_length:
        blocks = (skip + length + STEP - 1) // STEP
        # Rows inside one block (a decoding step) need only their own steps, so the grid shrinks
        # to them: one row costs one cell, not 64. Selects rather than a `cond`, so every
        # length runs the same graph.
        inside = ops.equal(blocks, 1)
        used = (steps.shape[0], ops.where(inside, length, STEP), steps.shape[2])
        steps = ops.slice(steps, (0, ops.where(inside, skip, 0), 0), used)
        skip = ops.where(inside, 0, skip)
    elif isinstance(start, int):
        blocks = -(-(skip + length) // STEP)
    else:  # enough blocks for any skip: the grid keeps a static shape (JAX)
        blocks = (length + 2 * STEP - 2) // STEP
    block_starts = first_block + ops.arange(blocks, dtype="int32") * STEP
    # Blocks down the first axis, steps along the second: the pieces broadcast to the grid.
    block = _sines_and_cosines(ops.expand_dims(block_starts, 1), provider.products, provider.both_offsets)
    rows = ops.reshape(_combine(block, ops.unstack(steps), dtype, scale), (-1, provider.width))
    if isinstance(skip, int):
        return rows[skip : skip + length]
    return ops.slice(rows, (skip, 0), (length, provider.width))


def _materialized(table):
    """`table`, copied by a gather. XLA on JAX fuses the route into every consumer of the rows,
    so an add or a rotation would recompute them for each example and head (15 times the cost
    of the rotation itself at (8, 2048, 8, 64)); it leaves a gather unfused."""
    flat = ops.reshape(table, (-1,))
    return ops.reshape(ops.take(flat, ops.arange(ops.shape(flat)[0]), axis=0), ops.shape(table))


# Timesteps that are not whole numbers (diffusion models' `sigma * 1000`, EDM's `log(sigma) / 4`):
# a float32 of magnitude below 2**31 is `k * 2**-48` (its bits below 2**-48, if any, are dropped:
# an angle error below 2**-48 times the frequency), with `k` below 2**79, seven 12-bit limbs. The
# phase `k * F / 2**48` then needs each frequency to 2**-120 turns: ten limbs. The digits and the
# sine are the integer route's (`_sine`), so the error budget above holds, at any such value.
_FRACTION_BITS = 48
_FRACTION_POSITION_LIMBS = 7
_FRACTION_FREQUENCY_LIMBS = 10
# The limb columns worth less than a whole turn: column c is worth 2**(12c - 168) turns.
_FRACTION_COLUMNS = (_FRACTION_BITS + _LIMB_BITS * _FRACTION_FREQUENCY_LIMBS) // _LIMB_BITS - 1
assert _FRACTION_POSITION_LIMBS * _LIMB_BITS >= 31 + _FRACTION_BITS, "every |t| below 2**31 fits"
assert _FRACTION_POSITION_LIMBS * (_LIMB - 1) ** 2 * 2 < 2**31, "a column sum and its carry fit in int32"


def _fraction_products(frequencies):
    """For float64 `frequencies` (a tuple), the frequency limbs that each of the seven limbs
    of `k` multiplies into each phase column: `(7, 14, d)` int32, `[i, c]` holding limb `c - i`
    of `F * 2**120` (least significant first), zero where there is none."""
    limbs = np.zeros((_FRACTION_FREQUENCY_LIMBS, len(frequencies)), np.int64)
    for column, frequency in enumerate(frequencies):
        fixed = _turns_fixed_point(frequency, _LIMB_BITS * _FRACTION_FREQUENCY_LIMBS)
        for limb in range(_FRACTION_FREQUENCY_LIMBS):
            limbs[limb, column] = (fixed >> (_LIMB_BITS * limb)) % _LIMB
    products = np.zeros((_FRACTION_POSITION_LIMBS, _FRACTION_COLUMNS + 1, len(frequencies)), np.int32)
    for i in range(_FRACTION_POSITION_LIMBS):
        for column in range(i, min(i + _FRACTION_FREQUENCY_LIMBS, _FRACTION_COLUMNS + 1)):
            products[i, column] = limbs[column - i]
    products.flags.writeable = False
    return products


def _fraction_phase(timesteps, products):
    """The top two 24-bit digits (hi, mid) of the phase `|t| * F mod 1` of float32 `timesteps`
    (magnitude below 2**31), shape `timesteps.shape + (d,)`."""
    magnitude = ops.abs(timesteps)
    limbs = []
    for i in range(_FRACTION_POSITION_LIMBS):
        # floor(|t| * 2**(48 - 12 i)) mod 2**12, all exact in float32: a power-of-two scaling,
        # a floor, and a difference of integers that is itself a float32.
        whole = ops.floor(magnitude * np.float32(2.0 ** (_FRACTION_BITS - _LIMB_BITS * i)))
        limbs.append(ops.cast(whole - ops.floor(whole * np.float32(1 / _LIMB)) * _LIMB, "int32"))
    position_limbs = _trailing_axes(ops.stack(limbs, axis=-1), 2)
    columns = ops.unstack(ops.sum(position_limbs * products, axis=-3), axis=-2)
    total = columns[0]
    totals = [total]
    for column in columns[1:]:
        total = column + total // _LIMB
        totals.append(total)
    top = [value % _LIMB for value in totals[-4:]]  # worth 2**-48 .. 2**-1 turns, by 12 bits
    return top[3] * _LIMB + top[2], top[1] * _LIMB + top[0]


def _fractional_timestep_rows(timesteps, provider, dtype):
    """`RowProvider.timestep_rows` of float32 timesteps."""
    whole = ops.logical_and(ops.floor(timesteps) == timesteps, timesteps >= 0)
    integers = _rows_at(ops.cast(ops.where(whole, timesteps, 0.0), "int32"), provider, dtype)
    # The fractional phase as a block at step 0, so that `_combine` rounds it once (a bare
    # `rounded + low` is an addition tree that Grappler may reorder, losing the low part).
    block = _pieces_of_phases(*_fraction_phase(timesteps, provider.fraction_products), provider.both_offsets)
    step_zero = ops.unstack(provider.step_pieces()[:, :1])
    magnitudes = _combine(block, step_zero, dtype)
    # A negative timestep: sin(-a) = -sin(a) and cos(-a) = cos(a), by an exact sign, so that
    # its row is as exact as its magnitude's (a phase of 1 - a would cancel the table's digits).
    sines = provider.offsets == 0
    assert np.all(sines | (provider.offsets == _QUARTER_TURN)), "sine and cosine columns only"
    signs = ops.where(_trailing_axes(timesteps < 0, 1), np.where(sines, -1.0, 1.0).astype(dtype), 1.0)
    return ops.where(_trailing_axes(whole, 1), integers, magnitudes * ops.cast(signs, dtype))


def rows_of_angles(angles, dtype="float32"):
    """The rows of angles known when a call is traced (a NumPy float64 array `(..., pairs)`,
    for positions that are not integers, such as DINOv3's normalised patch centres): their
    sines, then their cosines, computed in float64 and rounded once to `dtype`."""
    angles = np.asarray(angles, np.float64)
    return ops.convert_to_tensor(np.concatenate([np.sin(angles), np.cos(angles)], axis=-1).astype(dtype))


# Products of floats with floats (SAM's coordinates with its random matrix): each factor on a grid
# of 2**-48 as 12-bit limbs, the left ones below 2**12 (5 limbs), the right ones below 2**24 (6).
_PRODUCT_LIMBS = (5, 6)
_PRODUCT_FRACTION_BITS = 48
PRODUCT_BOUNDS = (2.0**12, 2.0**24)


def _grid_limbs(values, count):
    """`|values|` (float32) on a grid of 2**-48 (bits below it dropped), as `count` 12-bit int32
    limbs, least significant first: exact, as `_fraction_phase`'s (power-of-two scalings, floors,
    and differences of integers that are float32 themselves)."""
    magnitude = ops.abs(values)
    limbs = []
    for i in range(count):
        whole = ops.floor(magnitude * np.float32(2.0 ** (_PRODUCT_FRACTION_BITS - _LIMB_BITS * i)))
        limbs.append(ops.cast(whole - ops.floor(whole * np.float32(1 / _LIMB)) * _LIMB, "int32"))
    return limbs


def _negated(hi, mid):
    """The digits of `-phase mod 1` (24-bit `hi` and `mid`)."""
    borrow = ops.cast(ops.not_equal(mid, 0), "int32")
    return (_DIGIT - hi - borrow) % _DIGIT, (_DIGIT - mid) % _DIGIT


def product_phases(left, right):
    """The phases `sum_k left[..., k] * right[k, f] mod 1` of float32 `left` `(..., K)` (each below
    2**12 in magnitude) and `right` `(K, F)` (below 2**24), as their top 48 bits: int32 digits
    `(hi, mid)` of shape `(..., F)`, each product exact before its bits below 2**-48 turns drop
    (so within `2 * K * 2**-48` turns, plus what the factors lose on the grid: nothing for factors
    of magnitude at least 2**-24). Integers throughout, so exact in any graph."""
    left_limbs = [limb[..., :, None] for limb in _grid_limbs(left, _PRODUCT_LIMBS[0])]
    right_limbs = _grid_limbs(right, _PRODUCT_LIMBS[1])
    columns = [0] * (len(left_limbs) + len(right_limbs) - 1)
    for i, a in enumerate(left_limbs):
        for j, b in enumerate(right_limbs):
            columns[i + j] = columns[i + j] + a * b  # (..., K, F), each below 2**24, five a column
    # Column c is worth 2**(12 c - 96) turns: columns 4 .. 7 hold the 48 fraction bits, the ones
    # below carry into them, the ones above are whole turns.
    total, digits = 0, []
    for column in columns[:8]:
        total = column + total // _LIMB
        digits.append(total % _LIMB)
    hi, mid = digits[7] * _LIMB + digits[6], digits[5] * _LIMB + digits[4]
    negative = ops.not_equal(ops.less(left, 0.0)[..., :, None], ops.less(right, 0.0))
    negated_hi, negated_mid = _negated(hi, mid)
    hi, mid = ops.where(negative, negated_hi, hi), ops.where(negative, negated_mid, mid)
    # The terms summed mod 1, digit by digit.
    mid_sum = ops.sum(mid, axis=-2)
    hi_sum = ops.sum(hi, axis=-2) + mid_sum // _DIGIT
    return hi_sum % _DIGIT, mid_sum % _DIGIT


def rows_of_phases(hi, mid, dtype="float32"):
    """`[sin | cos]` of `2 * pi * phase` for phases given by their top two 24-bit digits `(..., F)`,
    each rounded once to `dtype` (the rows' error budget, as a block at step 0)."""
    features = hi.shape[-1]
    columns = _kept_provider_of_turns(features)
    block = _pieces_of_phases(
        ops.concatenate([hi, hi], axis=-1), ops.concatenate([mid, mid], axis=-1), columns.both_offsets
    )
    return _combine(block, ops.unstack(columns.step_pieces()[:, :1]), dtype)


def _kept_provider_of_turns(features):
    """A provider of `features` sine columns then as many cosine ones, whose steps are all 0: its
    offsets and its step-0 pieces turn given phases into `[sin | cos]`."""
    return provider(np.zeros(2 * features), np.arange(2 * features) >= features)
