import keras

from tf_posenc import _columns, _positions, _rows, _validation
from tf_posenc.layers.base import SinusoidLayer

# `pos_encoding` builds the whole table; past this many values, ask for rows instead.
# (SavedModel export reads every property of a layer, so the table must stay cheap.)
_MAX_TABLE_VALUES = 2**22


class PositionalEncodingMixin:
    """The body of `PositionalEncoding`, shared by its Keras 3 and tf_keras (Keras 2) classes."""

    def __init__(
        self,
        position,
        d_model,
        max_wavelength=10000,
        layout=None,
        convention="paper",
        min_timescale=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.position = _validation.positive_int("position", position, maximum=_validation.MAX_POSITION)
        self.d_model = _validation.positive_int("d_model", d_model)
        self.max_wavelength, self.layout, self.convention, self.min_timescale = _validation.encoding_options(
            self.d_model, max_wavelength, layout, convention, min_timescale
        )
        self._limit = _positions.Limit(self.position, "position")
        self._provider = _rows.provider(
            *_columns.columns(
                self.d_model, self.max_wavelength, self.layout, self.convention, self.min_timescale
            )
        )

    @property
    def pos_encoding(self):
        """The whole `(1, position, d_model)` table in the compute dtype, computed on each access.

        For long tables (more than 2**22 values) this raises a `ValueError`; ask
        `encoding_rows(start, stop)` for the rows you need instead.
        """
        if self.position * self.d_model > _MAX_TABLE_VALUES:
            raise ValueError(
                f"`pos_encoding` would hold position * d_model = {self.position * self.d_model} "
                f"values, more than {_MAX_TABLE_VALUES}; use `encoding_rows(start, stop)` for the "
                f"rows you need. Received: position={self.position}, d_model={self.d_model}"
            )
        return self.encoding_rows(0, self.position)

    def encoding_rows(self, start, stop):
        """Rows `start .. stop - 1` of `pos_encoding`, shape `(1, stop - start, d_model)`.

        The same bits as `pos_encoding[:, start:stop, :]` and as a call's rows, without the
        rest of the table.

        Args:
            start: Integer. The first position, at least 0.
            stop: Integer. One past the last position, at most `position`.
        """
        start = _validation.non_negative_int("start", start)
        stop = _validation.non_negative_int("stop", stop)
        if not start <= stop <= self.position:
            raise ValueError(
                "`encoding_rows` needs start <= stop <= position. "
                f"Received: start={start}, stop={stop} with position={self.position}"
            )
        rows = self._provider.rows(_positions.Positions(start=start), stop - start, self.compute_dtype)
        return rows[None]

    def call(self, inputs, start_index=0, positions=None):
        inputs = self._checked_inputs(inputs)
        # Where the width is only known when the graph runs, the add would broadcast.
        message = f"The last dimension of `inputs` must equal d_model={self.d_model}."
        inputs = _positions.has_size(inputs, -1, self.d_model, message)
        where = _positions.resolve(inputs, len(inputs.shape) - 2, self._limit, start_index, positions)
        return self._run(inputs, where)

    def _rows_follow_positions(self):
        return True

    def _sequence_axis(self, rank):
        return rank - 2

    def _rows_for(self, inputs, positions):
        length = _positions.sequence_length(inputs, len(inputs.shape) - 2)
        return self._provider.rows(positions, length, self.compute_dtype)

    def _combine(self, inputs, rows):
        if len(rows.shape) == 3:  # per-example positions: (batch, seq_len, d_model)
            for _ in range(len(inputs.shape) - 3):
                rows = rows[:, None]
        return _rows.cast(inputs, self.compute_dtype) + rows

    def get_config(self):
        return {
            **super().get_config(),
            "position": self.position,
            "d_model": self.d_model,
            "max_wavelength": self.max_wavelength,
            "layout": self.layout,
            "convention": self.convention,
            "min_timescale": self.min_timescale,
        }

    def _output_shape(self, shape):
        if len(shape) < 3:
            raise ValueError(
                "`inputs` must have rank 3 or more, (batch, ..., seq_len, d_model). "
                f"Received: inputs.shape={shape}"
            )
        if shape[-1] is not None and shape[-1] != self.d_model:
            raise ValueError(
                "The last dimension of `inputs` must equal `d_model`. "
                f"Received: inputs.shape={shape} with d_model={self.d_model}"
            )
        if shape[-2] is not None:
            self._limit.check_fits(0, shape[-2])
        return shape


@keras.saving.register_keras_serializable(package="tf_posenc")
class PositionalEncoding(PositionalEncodingMixin, SinusoidLayer):
    """Adds the sinusoidal positional encoding of "Attention Is All You Need".

    For inputs `x` of shape `(batch, seq_len, d_model)` the layer returns
    `x + pos_encoding[:, :seq_len, :]`, where row `pos` of the table holds
    `sin(pos * w_k)` and `cos(pos * w_k)` for the frequencies
    `w_k = max_wavelength ** (-2k / d_model)`.

    The table is never stored: the rows a call needs are computed in the graph from
    exact integer phases with float32 arithmetic only, and rounded once to the compute
    dtype, so the layer has no weights, its cost does not grow with `position`, saved
    models stay small and convert to TensorFlow Lite and ONNX as they are, and the
    values are within one unit of the output dtype in [0.5, 1) of the formula (2**-24 in
    float32; half of it is the final rounding) under every dtype policy, mixed precision
    included.

    The layer returns `inputs + encoding`, the documents' design. keras-hub's
    `SinePositionEncoding` (0.32), whose input shapes and `max_wavelength` this layer takes,
    returns the encoding alone for the caller to add: to switch, drop that add (or call this
    layer on zeros, or use `encoding_rows`, for the encoding alone).

    Args:
        position: Integer. The number of positions the layer serves; inputs may be
            at most this long.
        d_model: Integer. The width of the encoding; the last dimension of the
            inputs.
        max_wavelength: Number greater than 1. The base of the geometric
            progression of wavelengths. Defaults to `10000`.
        layout: `"interleave"` (the paper's layout: sin on even columns, cos on
            odd columns) or `"concat"` (all sines, then all cosines, as in the
            TensorFlow text tutorial and tensor2tensor). Defaults to the
            convention's own (`"interleave"` for `"paper"`).
        convention: `"paper"`, `"tensor2tensor"`, `"tensor2tensor_documented"`
            or `"fairseq"`: reproduce the table of that code (see
            `tf_posenc.encoding.columns`). Defaults to `"paper"`.
        min_timescale: Number. tensor2tensor's `min_timescale` (its
            `max_timescale` is `max_wavelength`). Defaults to `1.0`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A floating-point tensor of shape `(batch, seq_len, d_model)`, or
            `(batch, ..., seq_len, d_model)` as keras-hub's `SinePositionEncoding` takes.
        start_index: Integer or scalar integer tensor. The position of the first
            step of `inputs`, for decoding one step at a time. Defaults to `0`.
        positions: Optional integer tensor of shape `(seq_len,)` or
            `(batch, seq_len)`: add the rows at these positions instead of a
            contiguous range.

    Input shape:
        `(batch, ..., seq_len, d_model)` with `start_index + seq_len <= position`.

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
