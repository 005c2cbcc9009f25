import keras

from tf_posenc import _validation, encoding, rows
from tf_posenc.layers.dense_input_layer import DenseInputLayer
from tf_posenc.positions import checked_below, whole_positions


class TimestepEmbeddingMixin:
    """The body of `TimestepEmbedding`, shared by its Keras 3 and tf_keras (Keras 2) classes."""

    def __init__(self, dim, max_period=10000, downscale_freq_shift=1, flip_sin_to_cos=False,
                 scale=1.0, **kwargs):
        super().__init__(**kwargs)
        self.dim = _validation.positive_int("dim", dim)
        self.max_period = _validation.wavelength("max_period", max_period)
        shift = _validation.number_at_least("downscale_freq_shift", downscale_freq_shift, -1e9)
        if not shift < self.dim // 2:
            raise ValueError(
                "`downscale_freq_shift` must be below dim // 2: the frequencies divide by "
                f"dim // 2 - downscale_freq_shift. Received: downscale_freq_shift="
                f"{downscale_freq_shift} with dim={self.dim}"
            )
        self.downscale_freq_shift = int(shift) if float(shift).is_integer() else shift
        if not isinstance(flip_sin_to_cos, bool):
            raise ValueError(
                f"`flip_sin_to_cos` must be a boolean. "
                f"{_validation.received('flip_sin_to_cos', flip_sin_to_cos)}"
            )
        self.flip_sin_to_cos = flip_sin_to_cos
        self.scale = _validation.number_at_least("scale", scale, 0, strict=True)

    def build(self, input_shape):
        self._check_input_shape(input_shape)
        self.built = True  # tf_keras leaves this to build

    def call(self, inputs):
        self._check_input_shape(inputs.shape)
        timesteps = whole_positions(inputs)
        dtype = keras.backend.standardize_dtype(timesteps.dtype)
        if "int" not in dtype:
            raise TypeError(f"`inputs` must hold timesteps as numbers. Received: inputs.dtype={dtype}")
        timesteps = checked_below(timesteps, _validation.MAX_POSITION, "Timesteps must be in [0, {limit}).")
        frequencies, cosine = encoding.timestep_columns(
            self.dim, self.max_period, self.downscale_freq_shift, self.flip_sin_to_cos, self.scale
        )
        constants = rows.column_constants(tuple(frequencies.tolist()), tuple(cosine.astype(int).tolist()))
        return rows.rows_at(timesteps, *constants, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return self._check_input_shape(input_shape) + (self.dim,)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(self.compute_output_shape(inputs.shape), dtype=self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "dim": self.dim,
            "max_period": self.max_period,
            "downscale_freq_shift": self.downscale_freq_shift,
            "flip_sin_to_cos": self.flip_sin_to_cos,
            "scale": self.scale,
        }

    @staticmethod
    def _check_input_shape(shape):
        return _validation.input_shape(shape, 1, "(batch,) timesteps")


@keras.saving.register_keras_serializable(package="tf_posenc")
class TimestepEmbedding(TimestepEmbeddingMixin, DenseInputLayer):
    """The sinusoidal timestep embedding of diffusion models (DDPM, latent diffusion).

    Maps timesteps of shape `(batch,)` to `(batch, dim)` rows, with the meaning of every
    argument of `get_timestep_embedding` (diffusers; DDPM's original is
    `downscale_freq_shift=1`, Stable Diffusion's UNet uses `flip_sin_to_cos=True,
    downscale_freq_shift=0`). The rows come from the exact route of `PositionalEncoding`:
    integer timesteps, and float timesteps holding whole numbers, give the formula's values
    rounded once to the compute dtype. Fractional timesteps are refused.

    Args:
        dim: Integer. Width of the embedding; an odd width ends on a zero column.
        max_period: Number greater than 1. Defaults to `10000`.
        downscale_freq_shift: Number below `dim // 2`. Defaults to `1`.
        flip_sin_to_cos: Boolean. Cosines first. Defaults to `False`.
        scale: Positive number multiplying the angles. Defaults to `1.0`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Timesteps, shape `(batch,)`: integers, or floats holding whole numbers,
            from 0 to 2**31 - 2.

    Example:

    >>> timesteps = keras.ops.convert_to_tensor([0, 500, 999])
    >>> embedded = TimestepEmbedding(320, flip_sin_to_cos=True, downscale_freq_shift=0)(timesteps)
    >>> tuple(embedded.shape)
    (3, 320)

    References:
        [Ho et al., 2020](https://arxiv.org/abs/2006.11239)
    """
