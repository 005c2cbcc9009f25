"""Exact encodings from float32 arithmetic alone, for runtimes without float64.

TensorFlow Lite (LiteRT) has no float64 kernels and TPUs have no float64 at all, so
graphs traced for them cannot take the float64 route of `encoding.sinusoids_tensor`.
Inside `float32_only()`, layers trace this route instead:

* a position p is split as p = block * M + offset with M = ceil(sqrt(position));
* sin and cos of block * M * w and of offset * w come from two small tables computed
  in float64 when the graph is traced, about sqrt(position) rows each;
* the angle-addition formulas, sin(a + b) = sin a cos b + cos a sin b and
  cos(a + b) = cos a cos b - sin a sin b, combine them.

Every table entry is stored as three float32 pieces whose leading two have 12
significant bits, so the two leading products are exact in float32. Their difference
and the final sum are the only roundings that matter, which keeps the result within
about 1.5 * 2**-24 of the float64 value: inside one unit in the last place at 1.0 of
float32 (2**-23), though not always the nearest float32.
"""

import contextlib
import contextvars
import functools
import math

import numpy as np
import tensorflow as tf

from tf_posenc import encoding

_ACTIVE = contextvars.ContextVar("tf_posenc_float32_only", default=False)

# Positions travel as int32 in this route, and its tables grow with sqrt(position).
MAX_POSITION = 2**24


@contextlib.contextmanager
def float32_only():
    """Layers traced inside this context use float32 (and integer) operations only.

    Use it around `model.export(...)` when the SavedModel is meant for TensorFlow Lite
    (LiteRT), or around model building and training on TPUs. The encoding stays exact
    to the float32 rounding limit; the traced graph carries tables of about
    `30 * sqrt(position) * d_model` bytes (7.6 MiB for position=65536, d_model=1024),
    and `position` may be at most 2**24.

    Example:

    >>> with tf_posenc.float32_only():
    ...     model.export("for_tflite")
    """
    token = _ACTIVE.set(True)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def is_active():
    return _ACTIVE.get()


def _leading_bits(values, bits):
    mantissa, exponent = np.frexp(values)
    return np.ldexp(np.round(mantissa * 2**bits), exponent - bits)


def _three_pieces(values):
    """float64 values as three float32 arrays: 12 bits, 12 more bits, and the rest."""
    first = _leading_bits(values, 12)
    second = _leading_bits(values - first, 12)
    third = values - first - second
    return tuple(piece.astype(np.float32) for piece in (first, second, third))


@functools.lru_cache(maxsize=16)
def rotation_tables(position, d_model, max_wavelength):
    """The block size M and the sin/cos tables of block and offset angles, in pieces."""
    block = math.isqrt(position - 1) + 1
    rates = encoding.frequencies(d_model, max_wavelength)
    block_angles = np.multiply.outer(np.arange(-(-position // block)) * block, rates)
    offset_angles = np.multiply.outer(np.arange(block), rates)
    tables = {
        name: _three_pieces(function(angles))
        for name, function, angles in (
            ("block_sin", np.sin, block_angles), ("block_cos", np.cos, block_angles),
            ("block_minus_cos", lambda angles: -np.cos(angles), block_angles),
            ("offset_sin", np.sin, offset_angles), ("offset_cos", np.cos, offset_angles),
        )
    }
    return block, tables


def _difference_of_products(x, y, u, v):
    """x * y - u * v for three-piece numbers, with the exact leading products kept apart.

    Grappler's arithmetic optimizer regroups any tree of additions into one `AddN`,
    in an order of its choosing; the subtractions here are where the grouping must
    hold, so the two large products meet each other before any small term.
    """
    leading = x[0] * y[0] - u[0] * v[0]
    small_x_y = x[0] * y[1] + x[1] * y[0] + x[0] * y[2] + x[1] * y[1] + x[2] * y[0]
    small_u_v = u[0] * v[1] + u[1] * v[0] + u[0] * v[2] + u[1] * v[1] + u[2] * v[0]
    return leading + (small_x_y - small_u_v)


def sines_cosines(positions, position, d_model, max_wavelength):
    """sin(p * w_k) and cos(p * w_k) for integer `positions` below `position`, in float32."""
    if position > MAX_POSITION:
        raise ValueError(
            f"Inside `float32_only()`, `position` must be at most {MAX_POSITION}. "
            f"Received: position={position}"
        )
    block, tables = rotation_tables(position, d_model, max_wavelength)
    positions = tf.cast(positions, tf.int32)
    rows = {"block": positions // block, "offset": positions % block}

    def gathered(name):
        index = rows[name.split("_")[0]]
        return [tf.gather(tf.constant(piece), index) for piece in tables[name]]

    block_sin, block_cos = gathered("block_sin"), gathered("block_cos")
    offset_sin, offset_cos = gathered("offset_sin"), gathered("offset_cos")
    # sin(a + b) = sin a cos b - (-cos a) sin b: the same difference as for the cosine.
    sines = _difference_of_products(block_sin, offset_cos, gathered("block_minus_cos"), offset_sin)
    cosines = _difference_of_products(block_cos, offset_cos, block_sin, offset_sin)
    return sines, cosines
