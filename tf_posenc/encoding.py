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


def sinusoids_tensor(positions, d_model, max_wavelength=10000, layout="interleave", dtype="float32",
                     position=None):
    """TensorFlow twin of `sinusoids` for positions only known when the graph runs.

    Integer `positions` are converted straight to float64, and the result is
    rounded once to `dtype`. Inside `float32_only()` the same values come from
    float32 arithmetic instead (see `tf_posenc.exact_float32`); that route needs
    `position`, the bound on `positions`.
    """
    from tf_posenc import exact_float32  # here, not on top: exact_float32 imports this module

    if exact_float32.is_active():
        sines, cosines = exact_float32.sines_cosines(positions, position, d_model, max_wavelength)
    else:
        angles = tf.cast(positions, tf.float64)[..., tf.newaxis] * frequencies(d_model, max_wavelength)
        sines, cosines = tf.sin(angles), tf.cos(angles)
    table = tf.concat([sines, cosines], axis=-1)
    if layout != "concat":
        table = tf.gather(table, column_order(d_model, layout), axis=-1)
    return tf.cast(table, dtype)


def contiguous_sinusoids_tensor(start, length, d_model, max_wavelength=10000, layout="interleave",
                                dtype="float32", position=None):
    """Rows `start .. start + length - 1` (scalar int64 tensors), shape `(length, d_model)`.

    Outside XLA, TensorFlow runs one kernel per operation and its float64 sine
    costs several nanoseconds, so the rows come from far fewer sines: positions
    are split into about sqrt(length) blocks of about sqrt(length) steps, and
    sin/cos(block + step) follow from the angle-addition formulas, still in
    float64. XLA fuses the plain formula into a single fast loop, and it would
    copy the extra products once per batch row, so under XLA (and inside
    `float32_only()`) the plain formula of `sinusoids_tensor` is used.
    """
    from tf_posenc import exact_float32  # here, not on top: exact_float32 imports this module

    if exact_float32.is_active() or _in_xla_context():
        return sinusoids_tensor(start + tf.range(length), d_model, max_wavelength, layout, dtype,
                                position)
    rates = frequencies(d_model, max_wavelength)
    order = column_order(d_model, layout)
    steps = tf.maximum(tf.cast(tf.math.ceil(tf.sqrt(tf.cast(length, tf.float64))), tf.int64), 1)
    blocks = (length + steps - 1) // steps
    block_angles = tf.cast(start + tf.range(blocks) * steps, tf.float64)[:, tf.newaxis] * rates
    step_angles = tf.cast(tf.range(steps), tf.float64)[:, tf.newaxis] * rates
    block_sin, block_cos = tf.sin(block_angles), tf.cos(block_angles)
    step_sin, step_cos = tf.sin(step_angles), tf.cos(step_angles)

    def in_columns(for_sine_columns, for_cosine_columns):
        return tf.gather(tf.concat([for_sine_columns, for_cosine_columns], -1), order, axis=-1)

    # Sine columns: sin(a + b) = sin a cos b + cos a sin b.
    # Cosine columns: cos(a + b) = cos a cos b - sin a sin b.
    # Arranging the small tables in output column order first means the large
    # (length, d_model) result is written once, already in its final layout.
    first_block = in_columns(block_sin, block_cos)[:, tf.newaxis, :]
    second_block = in_columns(block_cos, -block_sin)[:, tf.newaxis, :]
    first_step = in_columns(step_cos, step_cos)[tf.newaxis]
    second_step = in_columns(step_sin, step_sin)[tf.newaxis]
    rows = first_block * first_step + second_block * second_step
    return tf.cast(tf.reshape(rows, (-1, d_model))[:length], dtype)


def _in_xla_context():
    """Whether the graph being traced will be compiled by XLA (`jit_compile=True`)."""
    try:
        from tensorflow.python.framework import ops
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # TensorFlow moved its internals; the plain route is correct anywhere.
        return True
    return control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())


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
