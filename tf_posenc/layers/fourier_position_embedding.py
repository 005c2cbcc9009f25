"""SAM's random Fourier features of 2-D coordinates: prompt points and boxes, and the image's
grid of cell centres."""

import keras
import numpy as np
from keras import ops

from tf_posenc import _positions, _rows, _validation
from tf_posenc.layers.base import PositionLayer, config_entries


def _halves(values):
    """float64 `values` as float32 `(hi, lo)` with `hi + lo` equal to them within 2**-48 of each:
    two terms of a product whose phase is exact."""
    hi = values.astype(np.float32)
    return hi, (values - hi.astype(np.float64)).astype(np.float32)


@keras.saving.register_keras_serializable(package="tf_posenc")
class FourierPositionEmbedding(PositionLayer):
    """SAM's random Fourier features (Tancik et al., 2020): a coordinate pair `(x, y)` in `[0,
    1]` becomes `c = 2 * (x, y) - 1`, and its features are `[sin(2 pi c G) | cos(2 pi c G)]`
    with `G` a fixed Gaussian matrix `(2, num_pos_feats)`, the weight `positional_embedding`.

    transformers' `SamPositionalEmbedding` and `Sam2PositionalEmbedding` (SAM, SAM-HQ, SAM 2 and
    its video model, SAM 3's tracker, EdgeTAM): a call gives the features of points (with
    `input_shape=(height, width)`, pixel coordinates divided by the image's size, as the prompt
    encoder calls it after adding 0.5 to reach pixel centres), and `image_wide(height, width)` the
    features of a grid's cell centres (`get_image_wide_positional_embeddings`). The coordinates are
    normalized in their own dtype, as transformers does; from there each angle's turns `c G` are
    exact (integer arithmetic on the factors' bits, within 4 * 2**-48 turns) and every value is
    rounded once to the compute dtype: no float32 product ever reaches an angle. `image_wide`'s
    coordinates are exact too. Load the checkpoint's matrix
    (`shared_image_embedding.positional_embedding`) with `set_weights`.

    Args:
        num_pos_feats: Integer. Features per function (the output has `2 * num_pos_feats`):
            SAM's `vision_config.num_pos_feats`, SAM 2's `prompt_encoder_config.hidden_size // 2`.
            Defaults to `128`.
        scale: Positive number: the standard deviation of the initial matrix (SAM's prompt
            encoder's `scale`; the checkpoint's matrix replaces it). Defaults to `1.0`.
        **kwargs: Base layer keyword arguments, such as `name`, `dtype` and `trainable` (SAM 2
            keeps the matrix fixed).

    Call arguments:
        coordinates: Float tensor `(..., 2)`: `(x, y)` pairs, in `[0, 1]` (or, with
            `input_shape`, in pixels).
        input_shape: Optional `(height, width)`: divides `x` by `width` and `y` by `height`
            first. Defaults to `None`.

        Returns `(..., 2 * num_pos_feats)`: the sines, then the cosines.

    Example:

        >>> import numpy as np
        >>> layer = FourierPositionEmbedding(num_pos_feats=4)
        >>> points = np.array([[[10.5, 20.5], [511.5, 300.5]]], "float32")  # pixel centres
        >>> tuple(layer(points, input_shape=(1024, 1024)).shape)
        (1, 2, 8)
        >>> tuple(layer.image_wide(64, 64).shape)
        (64, 64, 8)
    """

    def __init__(self, num_pos_feats=128, scale=1.0, **kwargs):
        super().__init__(**kwargs)
        self.num_pos_feats = _validation.positive_int("num_pos_feats", num_pos_feats)
        self.scale = _validation.positive_number("scale", scale)

    def build(self, input_shape=None):
        self.positional_embedding = self.add_weight(
            name="positional_embedding",
            shape=(2, self.num_pos_feats),
            initializer=keras.initializers.RandomNormal(stddev=self.scale),
            autocast=False,
        )
        self.built = True

    def call(self, coordinates, input_shape=None):
        coordinates = ops.convert_to_tensor(coordinates)
        dtype = keras.backend.standardize_dtype(coordinates.dtype)
        if "float" not in dtype or coordinates.shape[-1] != 2:
            raise ValueError(
                "`coordinates` must be floats of shape (..., 2): (x, y) pairs. "
                f"Received: coordinates of shape {tuple(coordinates.shape)} and dtype {dtype}"
            )
        if dtype in ("float16", "bfloat16"):
            raise ValueError(
                "`coordinates` must be float32 or float64: a half-precision coordinate is off by up to "
                f"2**-11 of its size before any feature. Received: coordinates.dtype={dtype}"
            )
        if input_shape is not None:
            height, width = (_validation.positive_number("input_shape", side) for side in input_shape)
            coordinates = coordinates / ops.convert_to_tensor([width, height], dtype)
        centred = 2 * coordinates - 1
        parts = [(centred[..., 0], 0), (centred[..., 1], 1)]
        if dtype == "float64":  # two float32 terms each, as `_halves`
            parts = [
                (ops.cast(value, "float32"), axis) for value, axis in parts
            ] + [(ops.cast(value - ops.cast(ops.cast(value, "float32"), "float64"), "float32"), axis)
                 for value, axis in parts]  # fmt: skip
        return self._features(parts)

    def image_wide(self, height, width):
        """The features of a `height` x `width` grid's cell centres `((j + 0.5) / width, (i + 0.5)
        / height)`, `(height, width, 2 * num_pos_feats)`: transformers'
        `get_image_wide_positional_embeddings`, channels last (its `(1, channels, height, width)`
        is this transposed)."""
        height = _validation.positive_int("height", height)
        width = _validation.positive_int("width", width)
        x = (np.arange(width) + 0.5) / width * 2 - 1
        y = (np.arange(height) + 0.5) / height * 2 - 1
        grid = np.stack(np.broadcast_arrays(x[None, :], y[:, None]), axis=-1)  # (height, width, 2)
        hi, lo = _halves(grid)
        parts = [(ops.convert_to_tensor(half[..., axis]), axis) for half in (hi, lo) for axis in (0, 1)]
        return self._features(parts)

    def _features(self, parts):
        """The features of the coordinates whose float32 `parts` `[(values, axis)]` sum to `c`:
        each part times each float32 part of its axis's row of `G` (the row itself, or a float64
        row's two halves) is a term of the turns `c G`."""
        if not self.built:
            self.build()
        matrix = self.positional_embedding
        if keras.backend.standardize_dtype(matrix.dtype) == "float64":
            hi = ops.cast(matrix, "float32")
            halves = [hi, ops.cast(matrix - ops.cast(hi, "float64"), "float32")]
        else:
            halves = [ops.cast(matrix, "float32")]
        left, right = [], []
        for values, axis in parts:
            for half in halves:
                left.append(values)
                right.append(half[axis])
        terms, matrix = ops.stack(left, axis=-1), ops.stack(right, axis=0)
        bounds = _rows.PRODUCT_BOUNDS
        outside = ops.cast(ops.max(ops.abs(terms)) >= bounds[0], "int32") + ops.cast(
            ops.max(ops.abs(matrix)) >= bounds[1], "int32"
        )
        message = (
            f"`FourierPositionEmbedding` takes coordinates below {bounds[0]:.0f} in magnitude (after "
            f"`2 * c - 1`) and a matrix below {bounds[1]:.0f}."
        )
        # Adding the checked count (0 where the values are in range) keeps the check in a graph.
        terms = terms + ops.cast(_positions.checked_not_positive(outside, message), "float32")
        hi, mid = _rows.product_phases(terms, matrix)
        return _rows.rows_of_phases(hi, mid, self.compute_dtype)

    def compute_output_spec(self, coordinates, input_shape=None):
        return keras.KerasTensor((*coordinates.shape[:-1], 2 * self.num_pos_feats), dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), **config_entries(self, "num_pos_feats", "scale")}
