import keras
import numpy as np

from tf_posenc import _columns, _positions, _rotation, _rows, _validation, encoding
from tf_posenc.layers.base import SinusoidLayer


class AxialRotaryEmbeddingMixin:
    """The body of `AxialRotaryEmbedding`, shared by its Keras 3 and tf_keras classes."""

    inputs_hint = "queries or keys"

    def __init__(self, axes_dim, max_wavelength=10000, layout="interleave", position_scale=1.0, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(axes_dim, (tuple, list)) or not axes_dim:
            raise ValueError(
                "`axes_dim` must be a list of even feature widths, one per position axis. "
                f"{_validation.received('axes_dim', axes_dim)}"
            )
        for width in axes_dim:
            if _validation.positive_int("axes_dim", width) % 2:
                raise ValueError(
                    "`axes_dim` must hold even widths: each axis rotates pairs. "
                    f"Received: axes_dim={axes_dim}"
                )
        self.axes_dim = tuple(int(width) for width in axes_dim)
        self.max_wavelength = _validation.wavelength("max_wavelength", max_wavelength)
        self.layout = _validation.one_of("layout", layout, _rotation.ROTARY_LAYOUTS)
        scales = (
            position_scale if isinstance(position_scale, (tuple, list)) else [position_scale] * len(axes_dim)
        )
        if len(scales) != len(self.axes_dim):
            raise ValueError(
                "`position_scale` must be a number, or one per axis of `axes_dim`. "
                f"{_validation.received('position_scale', position_scale)}"
            )
        self._scales = tuple(
            _validation.number_at_least("position_scale", scale, 0, strict=True) for scale in scales
        )
        self.position_scale = (
            list(position_scale) if isinstance(position_scale, (tuple, list)) else position_scale
        )
        # An id `n` at scale `s` is the integer position `n` at frequency `w * s`: exact.
        self._axis_constants = tuple(
            _rows.column_constants(*_columns.rotary_columns(frequencies))
            for frequencies in self._axis_frequencies()
        )

    def _axis_frequencies(self):
        return [
            encoding.rotary_frequencies(width, self.max_wavelength) * scale
            for width, scale in zip(self.axes_dim, self._scales, strict=True)
        ]

    def call(self, inputs, positions):
        self._output_shape(tuple(inputs.shape))
        self._check_input_dtype(inputs.dtype)
        positions = _positions.checked_values("positions", positions)
        shape = tuple(positions.shape)
        axes, length = len(self.axes_dim), inputs.shape[1]
        if len(shape) not in (2, 3) or shape[-1] != axes or shape[-2] not in (None, length) and length:
            raise ValueError(
                f"`positions` must have shape (seq_len, {axes}) or (batch, seq_len, {axes}): one id per "
                f"axis of `axes_dim` for each step of `inputs`. Received: positions with shape {shape} "
                f"for inputs.shape={tuple(inputs.shape)}"
            )
        return self._run(inputs, _positions.Positions(values=positions))

    def _rows_for(self, inputs, positions):
        groups = [
            (positions.values[..., axis], constants) for axis, constants in enumerate(self._axis_constants)
        ]
        return _rotation.grouped_rows(groups, _rotation.rotation_dtype(self.compute_dtype))

    def _combine(self, inputs, rows):
        return _rotation.rotate(inputs, rows, self.layout, self.compute_dtype)

    def frequencies(self):
        """The float64 angular frequency of every feature pair, axis after axis (times its
        axis's `position_scale`)."""
        return np.concatenate(self._axis_frequencies())

    def get_config(self):
        return {
            **super().get_config(),
            "axes_dim": list(self.axes_dim),
            "max_wavelength": self.max_wavelength,
            "layout": self.layout,
            "position_scale": self.position_scale,
        }

    def _output_shape(self, shape):
        if len(shape) < 3 or shape[-1] != sum(self.axes_dim):
            raise ValueError(
                "`inputs` must be (batch, seq_len, ..., dim) with dim = sum(axes_dim) = "
                f"{sum(self.axes_dim)}. Received: inputs.shape={shape}"
            )
        return shape


@keras.saving.register_keras_serializable(package="tf_posenc")
class AxialRotaryEmbedding(AxialRotaryEmbeddingMixin, SinusoidLayer):
    """Rotary embedding over several position axes: each axis turns its own band of pairs.

    The head's `sum(axes_dim)` features are split into one band per axis; band `a` rotates by
    the position id `positions[..., a]` with the RoPE frequencies of its own width
    `axes_dim[a]` (`max_wavelength ** (-2j / axes_dim[a])`). This is FLUX's `EmbedND`
    (`axes_dim=(16, 56, 56)` over (text, row, column) ids, interleaved pairs), a 2-D vision
    RoPE such as Qwen2-VL's vision tower (row and column bands, `layout="half"`) or EVA-02's
    (row and column bands, interleaved, `position_scale=pt_seq_len / ft_seq_len`), and video
    (frame, row, column) splits. Cosines and sines come from the exact route; the rotation is
    float32 (float64 under a float64 policy), rounded once.

    Args:
        axes_dim: List of even integers: the feature width of each axis's band.
        max_wavelength: Number greater than 1 (diffusers' and transformers' `theta`).
            Defaults to `10000`.
        layout: `"interleave"` (pairs `2j, 2j + 1`: FLUX, EVA-02) or `"half"` (`j, j + dim/2`:
            Qwen2-VL's vision RoPE), over the whole head. Defaults to `"interleave"`.
        position_scale: Positive number, or one per axis: each axis's ids are multiplied by
            it (EVA-02's `pt_seq_len / ft_seq_len`, for a grid finer than the pretraining one).
            Defaults to `1.0`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: `(batch, seq_len, dim)` or `(batch, seq_len, heads, dim)`.
        positions: Integer ids `(seq_len, len(axes_dim))` or `(batch, seq_len,
            len(axes_dim))`, for example from `grid_positions`.

    Example:

    >>> from tf_posenc import grid_positions
    >>> layer = AxialRotaryEmbedding((16, 56, 56), layout="interleave")
    >>> ids = grid_positions((1, 2, 3))  # FLUX's (0, row, column) image ids
    >>> tuple(layer(keras.ops.ones((1, 6, 24, 128)), positions=ids).shape)
    (1, 6, 24, 128)

    References:
        [Black Forest Labs, FLUX](https://github.com/black-forest-labs/flux)
    """
