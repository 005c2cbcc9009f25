"""The sinusoidal encoding itself: the one place the formula is written down.

PE(pos, 2i) = sin(pos / max_wavelength**(2i / d_model))
PE(pos, 2i + 1) = cos(pos / max_wavelength**(2i / d_model))

Everything is computed in float64 from integer positions and rounded once to the
requested dtype, so a float32 table holds the float64 values rounded to nearest at
every position up to 2**20 and beyond, and no position passes through a 16-bit float.
"""

import numpy as np
import tensorflow as tf

from tf_posenc import _validation

# Rows computed per step by `positional_encoding`, so that the float64 scratch
# space stays small however long the table is.
_ROWS_PER_CHUNK = 4096


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
    """
    d_model = _validation.positive_int("d_model", d_model)
    max_wavelength = _validation.wavelength("max_wavelength", max_wavelength)
    exponents = 2 * (np.asarray(i) // 2) / np.float64(d_model)
    angle_rates = 1 / np.power(np.float64(max_wavelength), exponents)
    return np.asarray(position, dtype=np.float64) * angle_rates


def frequencies(d_model, max_wavelength=10000):
    """The `ceil(d_model / 2)` angular frequencies, in float64, highest first."""
    pair_index = np.arange((d_model + 1) // 2)
    return get_angles(1, 2 * pair_index, d_model, max_wavelength)


def column_order(d_model, layout="interleave"):
    """Where each output column comes from in `concat([sines, cosines], -1)`.

    "interleave" is the paper's layout (sin, cos, sin, cos, ...; an odd `d_model`
    ends on a sine). "concat" puts all sines first, then all cosines.
    """
    pairs = (d_model + 1) // 2
    if layout == "concat":
        return np.arange(d_model)
    interleaved = np.stack([np.arange(pairs), pairs + np.arange(pairs)], axis=-1)
    return interleaved.reshape(-1)[:d_model]


def columns(d_model, max_wavelength=10000, layout="interleave"):
    """What each output column holds: its angular frequency and whether it is a cosine.

    Returns:
        A tuple `(frequencies, cosine)` of float64 and bool NumPy arrays of shape
        `(d_model,)`: column `c` is `cos(pos * frequencies[c])` where `cosine[c]`,
        else `sin(pos * frequencies[c])`.
    """
    pairs = (d_model + 1) // 2
    source = column_order(d_model, layout)
    return frequencies(d_model, max_wavelength)[source % pairs], source >= pairs


def sinusoids(positions, d_model, max_wavelength=10000, layout="interleave"):
    """Encoding rows for integer `positions`, as a float64 array of shape `positions.shape + (d_model,)`."""
    angles = np.asarray(positions, dtype=np.float64)[..., np.newaxis] * frequencies(
        d_model, max_wavelength
    )
    table = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
    return table[..., column_order(d_model, layout)]


def sinusoid_rows(start, stop, d_model, max_wavelength=10000, layout="interleave", dtype="float32"):
    """Rows `start .. stop - 1` as a NumPy array of `dtype`, shape `(stop - start, d_model)`.

    The float64 values are computed a few thousand rows at a time, so the scratch
    space stays small next to the result however many rows are asked for.
    """
    rows = np.empty((stop - start, d_model), dtype=tf.as_dtype(dtype).as_numpy_dtype)
    for first in range(start, stop, _ROWS_PER_CHUNK):
        last = min(first + _ROWS_PER_CHUNK, stop)
        rows[first - start : last - start] = sinusoids(
            np.arange(first, last), d_model, max_wavelength, layout
        )
    return rows


def positional_encoding(position, d_model, max_wavelength=10000, layout="interleave", dtype="float32"):
    """The full encoding table, shape `(1, position, d_model)`, as a `tf.Tensor`.

    Args:
        position: Integer. Number of positions (rows), starting at 0.
        d_model: Integer. Width of the encoding (columns).
        max_wavelength: Number. The base of the wavelengths. Defaults to `10000`.
        layout: `"interleave"` (sin on even columns, cos on odd ones, as in the
            paper) or `"concat"` (all sines, then all cosines). Defaults to
            `"interleave"`.
        dtype: The dtype of the result. Defaults to `"float32"`.

    Returns:
        A `tf.Tensor` of shape `(1, position, d_model)`: float64 values rounded
        once to `dtype`.

    Example:

    >>> table = positional_encoding(50, 512)
    >>> table.shape
    TensorShape([1, 50, 512])
    """
    position = _validation.positive_int("position", position, maximum=_validation.MAX_POSITION)
    d_model = _validation.positive_int("d_model", d_model)
    _validation.wavelength("max_wavelength", max_wavelength)
    _validation.layout("layout", layout, d_model)
    table = sinusoid_rows(0, position, d_model, max_wavelength, layout, dtype)
    return tf.convert_to_tensor(table[np.newaxis])


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
    step = k * frequencies(d_model, max_wavelength)
    order = column_order(d_model, layout)
    pairs = d_model // 2
    output_column = np.argsort(order)
    sine_column, cosine_column = output_column[:pairs], output_column[pairs:]
    matrix = np.zeros((d_model, d_model))
    matrix[sine_column, sine_column] = np.cos(step)
    matrix[sine_column, cosine_column] = np.sin(step)
    matrix[cosine_column, sine_column] = -np.sin(step)
    matrix[cosine_column, cosine_column] = np.cos(step)
    return matrix
