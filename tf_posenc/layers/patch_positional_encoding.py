import keras
import numpy as np
from keras import ops

from tf_posenc import _positions, _rows, _validation, encoding
from tf_posenc.layers.base import SinusoidLayer


class PatchPositionalEncodingMixin:
    """The body of `PatchPositionalEncoding`, shared by its Keras 3 and tf_keras (Keras 2) classes."""

    inputs_hint = "patch embeddings"

    def __init__(self, grid_size, d_model, cls_token=False, **kwargs):
        super().__init__(**kwargs)
        encoding.sincos_2d(4, 1, cls_token)  # the same checks of cls_token
        self.grid_size = _validation.positive_int("grid_size", grid_size)
        self.d_model = _validation.positive_int("d_model", d_model)
        if self.d_model % 4:
            raise ValueError(
                "`d_model` must be a multiple of 4: each grid axis gets half the width, in sine "
                f"and cosine halves. Received: d_model={self.d_model}"
            )
        self.cls_token = cls_token
        self._constants = _rows.column_constants(*encoding.columns(self.d_model // 2, layout="concat"))

    def call(self, inputs):
        return self._run(self._checked_inputs(inputs))

    def _rows_for(self, inputs, _):
        row, column = np.divmod(np.arange(self.grid_size**2, dtype=np.int32), self.grid_size)
        halves = [
            _rows.rows(_positions.Positions(values=axis), None, self._constants, self.compute_dtype)
            for axis in (column, row)
        ]
        table = ops.concatenate(halves, axis=-1)
        if self.cls_token:
            table = ops.concatenate([ops.zeros((1, self.d_model), table.dtype), table], axis=0)
        if len(inputs.shape) == 4:
            table = ops.reshape(table, (self.grid_size, self.grid_size, self.d_model))
        return table

    def get_config(self):
        return {
            **super().get_config(),
            "grid_size": self.grid_size,
            "d_model": self.d_model,
            "cls_token": self.cls_token,
        }

    def _output_shape(self, shape):
        patches = self.grid_size**2 + self.cls_token
        if len(shape) == 3:
            expected = (patches, self.d_model)
        elif len(shape) == 4 and not self.cls_token:
            expected = (self.grid_size, self.grid_size, self.d_model)
        else:
            raise ValueError(
                "`inputs` must be (batch, patches, d_model), or (batch, grid_size, grid_size, "
                f"d_model) without a class token. Received: inputs.shape={shape}"
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
    """Adds MAE's 2-D sine-cosine encoding to a square grid of image patches.

    The table is `sincos_2d(d_model, grid_size, cls_token)`: half the width encodes a
    patch's column, half its row. Its rows come from the exact route of
    `PositionalEncoding`, rounded once to the compute dtype; the layer has no weights.

    Args:
        grid_size: Integer. Patches per side.
        d_model: Integer, a multiple of 4. Width of the patch embeddings.
        cls_token: Boolean. Whether the inputs start with a class token, which gets a
            zero row. Defaults to `False`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: `(batch, grid_size**2 [+ 1], d_model)` patch embeddings in row-major order,
            or `(batch, grid_size, grid_size, d_model)`.

    Example:

    >>> patches = keras.Input((14 * 14 + 1, 768))
    >>> PatchPositionalEncoding(14, 768, cls_token=True)(patches).shape
    (None, 197, 768)

    References:
        [He et al., 2021](https://arxiv.org/abs/2111.06377)
    """
