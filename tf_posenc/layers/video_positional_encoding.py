import keras
from keras import ops

from tf_posenc import _columns, _validation
from tf_posenc.layers import _grid
from tf_posenc.layers.base import SinusoidLayer, config_entries


class VideoPositionalEncodingMixin:
    """The body of `VideoPositionalEncoding`, shared by its Keras 3 and tf_keras classes."""

    inputs_hint = "video patch embeddings"

    def __init__(
        self,
        spatial_size,
        temporal_size,
        *positional,
        d_model=None,
        spatial_interpolation_scale=1.0,
        temporal_interpolation_scale=1.0,
        **kwargs,
    ):
        _validation.width_by_keyword(
            type(self).__name__, "spatial_size, temporal_size", positional, d_model, "sincos_3d"
        )
        super().__init__(**kwargs)
        _validation.grid_3d_scales(spatial_interpolation_scale, temporal_interpolation_scale)
        self._grid = None
        if (spatial_size is None) != (temporal_size is None):
            raise ValueError(
                "`spatial_size` and `temporal_size` must be given together, or both be None (to "
                f"read the grid from 5-D inputs). Received: spatial_size={spatial_size!r}, "
                f"temporal_size={temporal_size!r}"
            )
        if spatial_size is not None:
            width, height = _validation.grid_shape("spatial_size", spatial_size, 2)
            self._grid = (_validation.positive_int("temporal_size", temporal_size), height, width)
        self.spatial_size = list(spatial_size) if isinstance(spatial_size, (tuple, list)) else spatial_size
        self.temporal_size = temporal_size
        self.d_model = _validation.multiple_of("d_model", d_model, 16, _validation.GRID_3D_WIDTH)
        self.spatial_interpolation_scale = spatial_interpolation_scale
        self.temporal_interpolation_scale = temporal_interpolation_scale
        spatial, temporal = 1 / spatial_interpolation_scale, 1 / temporal_interpolation_scale
        frame_width, column_width, row_width = _columns.grid_3d_widths(self.d_model)
        self._parts = [
            (0, _grid.axis_provider(frame_width, temporal)),
            (2, _grid.axis_provider(column_width, spatial)),  # the column
            (1, _grid.axis_provider(row_width, spatial)),  # the row
        ]

    def call(self, inputs):
        # A grid read from the inputs: its rows depend on the frames, height and width too.
        kept_axes = (-1,) if self._grid else (1, 2, 3, -1)
        return self._run(self._checked_inputs(inputs), kept_axes=kept_axes)

    def _rows_for(self, inputs, _):
        grid = self._grid or _grid.sizes_of(inputs, (1, 2, 3))
        table = _grid.grid_table(grid, self._parts, self.compute_dtype)
        return table if len(inputs.shape) == 5 else ops.reshape(table, (-1, self.d_model))

    def get_config(self):
        names = ("spatial_size", "temporal_size", "d_model", "spatial_interpolation_scale")
        return {**super().get_config(), **config_entries(self, *names, "temporal_interpolation_scale")}

    def _output_shape(self, shape):
        if self._grid is None:
            expected = (None, None, None, self.d_model)
        elif len(shape) == 3:
            frames, height, width = self._grid
            expected = (frames * height * width, self.d_model)
        else:
            expected = (*self._grid, self.d_model)
        if len(shape) != len(expected) + 1 or any(
            given is not None and wanted is not None and given != wanted
            for given, wanted in zip(shape[1:], expected, strict=True)
        ):
            wanted = ", ".join("?" if size is None else str(size) for size in expected)
            raise ValueError(
                f"`inputs` must have shape (batch, {wanted}): (batch, frames, height, width, d_model), "
                "or (batch, frames * height * width, d_model) with a known grid. "
                f"Received: inputs.shape={shape}"
            )
        return shape


@keras.saving.register_keras_serializable(package="tf_posenc")
class VideoPositionalEncoding(VideoPositionalEncodingMixin, SinusoidLayer):
    """Adds diffusers' 3-D sine-cosine encoding (CogVideoX) to the patches of a video.

    The table is `sincos_3d(d_model, spatial_size, temporal_size, ...)`: a quarter of the width
    encodes the frame, three eighths the column and three eighths the row, with the meaning of
    diffusers' `get_3d_sincos_pos_embed` (which takes the width first; the layer takes the grid
    first and the width and scales by keyword, so that they cannot be swapped by accident). Its
    rows come from the exact route, rounded once to the compute dtype; the layer has no weights.

    Args:
        spatial_size: Integer (square frames) or `(width, height)` (diffusers' order), or
            `None` (with `temporal_size=None`) to read the grid from 5-D inputs.
        temporal_size: Integer. Frames. `None` with `spatial_size=None`.
        d_model: Integer, a multiple of 16, by keyword.
        spatial_interpolation_scale: Positive number, by keyword, dividing the spatial positions
            (CogVideoX: 1.875). Defaults to `1.0`.
        temporal_interpolation_scale: Positive number, by keyword, dividing the frame positions. Defaults
            to `1.0`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: `(batch, frames, height, width, d_model)`, or `(batch, frames * height * width,
            d_model)` in frame, row, column order (with a known grid).

    Example:

        >>> video = keras.Input((13, 30, 45, 64))
        >>> VideoPositionalEncoding((45, 30), 13, d_model=64, spatial_interpolation_scale=1.875)(video).shape
        (None, 13, 30, 45, 64)
    """
