import functools
import numbers

import keras
import numpy as np
import tensorflow as tf

from tf_posenc import _validation, encoding

# Eager loops call the layer with the same shapes again and again; remembering a few
# small blocks of rows spares recomputing them, without holding on to large ones.
_CACHED_BLOCK_ELEMENTS = 2**20


def _rows(start, length, d_model, max_wavelength, layout, dtype):
    """Rows `start .. start + length - 1` for shapes known at trace time, read-only."""
    rows = encoding.sinusoid_rows(start, start + length, d_model, max_wavelength, layout, dtype)
    rows.flags.writeable = False
    return rows


_cached_rows = functools.lru_cache(maxsize=8)(_rows)


def _constant_rows(start, length, d_model, *options):
    rows = _cached_rows if length * d_model <= _CACHED_BLOCK_ELEMENTS else _rows
    return rows(start, length, d_model, *options)


@keras.saving.register_keras_serializable(package="tf_posenc")
class PositionalEncoding(keras.layers.Layer):
    """Adds the sinusoidal positional encoding of "Attention Is All You Need".

    For inputs `x` of shape `(batch, seq_len, d_model)` the layer returns
    `x + pos_encoding[:, :seq_len, :]`, where row `pos` of the table holds
    `sin(pos * w_k)` and `cos(pos * w_k)` for the frequencies
    `w_k = max_wavelength ** (-2k / d_model)`.

    The table is never stored: the rows a call needs are computed in float64 from
    integer positions and rounded once to the compute dtype, so the layer has no
    weights, its cost does not grow with `position`, saved models stay small, and
    the values are exact to the last bit of the output dtype under every dtype
    policy (mixed precision included).

    Args:
        position: Integer. The number of positions the layer serves; inputs may be
            at most this long.
        d_model: Integer. The width of the encoding; the last dimension of the
            inputs.
        max_wavelength: Number greater than 1. The base of the geometric
            progression of wavelengths. Defaults to `10000`.
        layout: `"interleave"` (the paper's layout: sin on even columns, cos on
            odd columns) or `"concat"` (all sines, then all cosines, as in the
            TensorFlow text tutorial and tensor2tensor). Defaults to
            `"interleave"`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A floating-point tensor of shape `(batch, seq_len, d_model)`.
        start_index: Integer or scalar integer tensor. The position of the first
            step of `inputs`, for decoding one step at a time. Defaults to `0`.
        positions: Optional integer tensor of shape `(seq_len,)` or
            `(batch, seq_len)`: add the rows at these positions instead of a
            contiguous range.

    Input shape:
        `(batch, seq_len, d_model)` with `seq_len <= position`.

    Output shape:
        The input shape.

    Example:

    >>> inputs = keras.Input((None,), dtype="int32")
    >>> embedded = keras.layers.Embedding(1000, 64)(inputs)
    >>> outputs = PositionalEncoding(position=128, d_model=64)(embedded)
    >>> keras.Model(inputs, outputs).output_shape
    (None, None, 64)

    References:
        [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
    """

    def __init__(self, position, d_model, max_wavelength=10000, layout="interleave", **kwargs):
        super().__init__(**kwargs)
        if keras.backend.backend() != "tensorflow":
            raise RuntimeError(
                "tf_posenc needs the TensorFlow backend of Keras. "
                f"Received: keras.backend.backend()={keras.backend.backend()!r}"
            )
        self.position = _validation.positive_int(
            "position", position, maximum=_validation.MAX_POSITION
        )
        self.d_model = _validation.positive_int("d_model", d_model)
        self.max_wavelength = _validation.wavelength("max_wavelength", max_wavelength)
        self.layout = _validation.layout("layout", layout, self.d_model)
        self.supports_masking = True

    @property
    def pos_encoding(self):
        """The whole `(1, position, d_model)` table in the compute dtype, computed on each access."""
        return encoding.positional_encoding(
            self.position, self.d_model, self.max_wavelength, self.layout, dtype=self.compute_dtype
        )

    def build(self, input_shape):
        self._check_input_shape(input_shape)

    def call(self, inputs, start_index=0, positions=None):
        self._check_input_shape(inputs.shape)
        if not inputs.dtype.is_floating:
            raise TypeError(
                "`inputs` must be a floating-point tensor (for example the output of an "
                f"`Embedding`). Received: inputs.dtype={inputs.dtype.name}"
            )
        return inputs + self._encoding_rows(inputs, start_index, positions)

    def compute_output_shape(self, input_shape):
        self._check_input_shape(input_shape)
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "position": self.position,
            "d_model": self.d_model,
            "max_wavelength": self.max_wavelength,
            "layout": self.layout,
        }

    def _encoding_rows(self, inputs, start_index, positions):
        if positions is not None:
            if not (isinstance(start_index, numbers.Integral) and start_index == 0):
                raise ValueError(
                    "Pass either `start_index` or `positions`, not both. "
                    f"Received: start_index={start_index!r} with positions"
                )
            return self._rows_at(positions, inputs)
        seq_len = inputs.shape[1]
        if isinstance(start_index, (int, np.integer)) and not isinstance(start_index, bool):
            start_index = _validation.non_negative_int("start_index", start_index)
            if seq_len is not None:
                self._check_fits(start_index, seq_len)
                return _constant_rows(
                    start_index, seq_len, self.d_model, self.max_wavelength, self.layout,
                    self.compute_dtype,
                )
        start_index = self._integer_tensor("start_index", start_index)
        if start_index.shape.rank != 0:
            raise ValueError(
                "`start_index` must be a scalar. "
                f"Received: start_index with shape {start_index.shape}"
            )
        seq_len = tf.shape(inputs, out_type=tf.int64)[1]
        checks = [
            tf.debugging.assert_non_negative(
                start_index, message="`start_index` must be non-negative."
            ),
            tf.debugging.assert_less_equal(
                start_index + seq_len,
                tf.constant(self.position, tf.int64),
                message=(
                    "The sequence is longer than `position`: start_index + seq_len must be at "
                    f"most position={self.position}."
                ),
            ),
        ]
        with tf.control_dependencies(checks):
            return encoding.contiguous_sinusoids_tensor(
                start_index, seq_len, self.d_model, self.max_wavelength, self.layout,
                self.compute_dtype, position=self.position,
            )

    def _rows_at(self, positions, inputs):
        positions = self._integer_tensor("positions", positions)
        if positions.shape.rank not in (1, 2):
            raise ValueError(
                "`positions` must have shape (seq_len,) or (batch, seq_len). "
                f"Received: positions with shape {positions.shape}"
            )
        checks = [
            tf.debugging.assert_non_negative(
                positions, message="`positions` must be non-negative."
            ),
            tf.debugging.assert_less(
                positions,
                tf.constant(self.position, tf.int64),
                message=(
                    "The sequence is longer than `position`: every position must be below "
                    f"position={self.position}."
                ),
            ),
            tf.debugging.assert_equal(
                tf.shape(positions, out_type=tf.int64)[-1],
                tf.shape(inputs, out_type=tf.int64)[1],
                message="`positions` must have one entry per step of `inputs` (seq_len).",
            ),
        ]
        with tf.control_dependencies(checks):
            return encoding.sinusoids_tensor(
                positions, self.d_model, self.max_wavelength, self.layout, self.compute_dtype,
                position=self.position,
            )

    @staticmethod
    def _integer_tensor(name, value):
        value = tf.convert_to_tensor(value)
        if not value.dtype.is_integer:
            raise TypeError(
                f"`{name}` must hold integers. Received: {name}.dtype={value.dtype.name}"
            )
        return tf.cast(value, tf.int64)

    def _check_fits(self, start_index, seq_len):
        if start_index + seq_len > self.position:
            raise ValueError(
                "The sequence is longer than `position`: start_index + seq_len must be at "
                f"most position={self.position}. Received: start_index={start_index}, "
                f"seq_len={seq_len}"
            )

    def _check_input_shape(self, shape):
        shape = _validation.input_shape(shape, 3, "(batch, seq_len, d_model)")
        if shape[-1] is not None and shape[-1] != self.d_model:
            raise ValueError(
                "The last dimension of `inputs` must equal `d_model`. "
                f"Received: inputs.shape={shape} with d_model={self.d_model}"
            )
        if shape[1] is not None:
            self._check_fits(0, shape[1])
