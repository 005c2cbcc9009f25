import keras
from keras import ops

from tf_posenc import _columns, _validation
from tf_posenc.layers import _grid
from tf_posenc.layers.base import SinusoidLayer, config_entries


class PatchPositionalEncodingMixin:
    """The body of `PatchPositionalEncoding`, shared by its Keras 3 and tf_keras (Keras 2) classes."""

    inputs_hint = "patch embeddings"

    def __init__(
        self,
        grid_size,
        *positional,
        d_model=None,
        cls_token=False,
        base_size=None,
        interpolation_scale=1.0,
        **kwargs,
    ):
        _validation.width_by_keyword(type(self).__name__, "grid_size", positional, d_model, "sincos_2d")
        super().__init__(**kwargs)
        _validation.grid_2d_options(cls_token, base_size, interpolation_scale)
        if grid_size is None:
            self.grid_size, self._grid = None, None
        else:
            self._grid = _validation.grid_shape("grid_size", grid_size, 2)
            self.grid_size = grid_size if isinstance(grid_size, int) else self._grid
        self.d_model = _validation.multiple_of("d_model", d_model, 4, _validation.GRID_2D_WIDTH)
        if grid_size is None and cls_token:
            raise ValueError(
                "`cls_token=True` needs a `grid_size`: the grid is then read from (batch, height, "
                "width, d_model) inputs, which hold no class token. Received: grid_size=None"
            )
        self.cls_token = cls_token
        self.base_size = base_size
        self.interpolation_scale = interpolation_scale

    def call(self, inputs):
        # A grid read from the inputs: its rows depend on the height and width too.
        kept_axes = (-1,) if self._grid else (1, 2, -1)
        return self._run(self._checked_inputs(inputs), kept_axes=kept_axes)

    def _rows_for(self, inputs, _):
        grid = self._grid or _grid.sizes_of(inputs, (1, 2))
        if self.base_size is not None and not all(isinstance(size, int) for size in grid):
            raise ValueError(
                "With `base_size`, the positions depend on the grid's size, which must be known when "
                "the call is traced: give a `grid_size`, or inputs of known height and width. "
                f"Received: inputs.shape={tuple(inputs.shape)}"
            )
        scales = _columns.grid_scales(
            [size if isinstance(size, int) else 1 for size in grid], self.base_size, self.interpolation_scale
        )
        column_width, row_width = _columns.grid_2d_widths(self.d_model)
        parts = [
            (1, _grid.axis_provider(column_width, scales[1])),
            (0, _grid.axis_provider(row_width, scales[0])),
        ]
        table = _grid.grid_table(grid, parts, self.compute_dtype)  # column half, then row half
        if len(inputs.shape) == 4:
            return table
        table = ops.reshape(table, (-1, self.d_model))
        if self.cls_token:
            table = ops.concatenate([ops.zeros((1, self.d_model), table.dtype), table], axis=0)
        return table

    def get_config(self):
        names = ("grid_size", "d_model", "cls_token", "base_size", "interpolation_scale")
        return {**super().get_config(), **config_entries(self, *names)}

    def _output_shape(self, shape):
        if self._grid is None:
            if len(shape) != 4 or shape[-1] not in (None, self.d_model):
                raise ValueError(
                    "`inputs` must be (batch, height, width, d_model) when `grid_size` is None: the "
                    f"grid is read from them. Received: inputs.shape={shape} for d_model={self.d_model}"
                )
            return shape
        height, width = self._grid
        patches = height * width + self.cls_token
        if len(shape) == 3:
            expected = (patches, self.d_model)
        elif len(shape) == 4 and not self.cls_token:
            expected = (height, width, self.d_model)
        else:
            raise ValueError(
                "`inputs` must be (batch, patches, d_model), or (batch, height, width, d_model) "
                f"without a class token. Received: inputs.shape={shape}"
            )
        pairs = zip(shape[1:], expected, strict=True)
        if any(given is not None and given != wanted for given, wanted in pairs):
            raise ValueError(
                f"`inputs` must have shape (batch, {', '.join(map(str, expected))}) for "
                f"grid_size={self.grid_size}, d_model={self.d_model}, cls_token={self.cls_token}. "
                f"Received: inputs.shape={shape}"
            )
        return shape


@keras.saving.register_keras_serializable(package="tf_posenc")
class PatchPositionalEncoding(PatchPositionalEncodingMixin, SinusoidLayer):
    """Adds the 2-D sine-cosine encoding of MAE and diffusers to a grid of image patches.

    The table is `sincos_2d(d_model, grid_size, cls_token, base_size=..., interpolation_scale=...)`
    (diffusers' order, width first; the layer takes the grid first and the width by keyword, so
    the two cannot be swapped by accident):
    half the width encodes a patch's column, half its row. Its rows come from the exact route
    of `PositionalEncoding`, rounded once to the compute dtype (a position `n * s` of
    diffusers' scaled grids is the integer `n` at frequency `w * s`); the layer has no weights.
    The arguments mean what they mean in diffusers' `get_2d_sincos_pos_embed` (PixArt-alpha,
    SD3), except `base_size=None`, which keeps MAE's integer positions.

    Args:
        grid_size: Integer (a square grid), `(height, width)`, or `None` to read the grid
            from `(batch, height, width, d_model)` inputs at call time (variable resolution).
        d_model: Integer, a multiple of 4, by keyword. Width of the patch embeddings.
        cls_token: Boolean, by keyword. Whether the inputs start with a class token, which gets a
            zero row. Defaults to `False`.
        base_size: Optional number. diffusers' `base_size`: an axis of `n` patches has the
            positions `arange(n) / (n / base_size) / interpolation_scale`. Defaults to `None`
            (positions `arange(n) / interpolation_scale`).
        interpolation_scale: Positive number dividing every position. Defaults to `1.0`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: `(batch, height * width [+ 1], d_model)` patch embeddings in row-major order,
            or `(batch, height, width, d_model)`.

    Example:

        >>> patches = keras.Input((14 * 14 + 1, 768))
        >>> PatchPositionalEncoding(14, d_model=768, cls_token=True)(patches).shape
        (None, 197, 768)
        >>> PatchPositionalEncoding(None, d_model=64, base_size=16)(keras.Input((32, 48, 64))).shape
        (None, 32, 48, 64)

    References:
        [He et al., 2021](https://arxiv.org/abs/2111.06377)
    """
