import keras

from tf_posenc import _columns, _positions, _rows, _validation
from tf_posenc.layers.base import SinusoidLayer, config_entries


class TimestepEmbeddingMixin:
    """The body of `TimestepEmbedding`, shared by its Keras 3 and tf_keras (Keras 2) classes."""

    def __init__(
        self, dim, max_period=10000, downscale_freq_shift=1, flip_sin_to_cos=False, scale=1.0, **kwargs
    ):
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
        self.flip_sin_to_cos = _validation.boolean("flip_sin_to_cos", flip_sin_to_cos)
        self.scale = _validation.number_at_least("scale", scale, 0, strict=True)
        self.supports_masking = False
        frequencies, cosine = _columns.timestep_columns(
            self.dim, self.max_period, self.downscale_freq_shift, self.flip_sin_to_cos, self.scale
        )
        self._provider = _rows.provider(frequencies, cosine, fractions=True)

    def call(self, inputs):
        timesteps = _positions.checked_timesteps("inputs", self._checked_inputs(inputs))
        return self._run(timesteps, _positions.Positions(values=timesteps), kept_axes=())

    def _rows_for(self, timesteps, positions):
        return self._provider.timestep_rows(positions.values, self.compute_dtype)

    def _combine(self, timesteps, rows):
        return rows

    def get_config(self):
        names = ("dim", "max_period", "downscale_freq_shift", "flip_sin_to_cos", "scale")
        return {**super().get_config(), **config_entries(self, *names)}

    def _output_shape(self, shape):
        return _validation.input_shape(shape, 1, "(batch,) timesteps") + (self.dim,)

    def _check_input_dtype(self, dtype):
        dtype = keras.backend.standardize_dtype(dtype)
        if "int" not in dtype and "float" not in dtype:
            raise TypeError(f"`inputs` must hold timesteps as numbers. Received: inputs.dtype={dtype}")


@keras.saving.register_keras_serializable(package="tf_posenc")
class TimestepEmbedding(TimestepEmbeddingMixin, SinusoidLayer):
    """The sinusoidal timestep embedding of diffusion models (DDPM, latent diffusion).

    Maps timesteps of shape `(batch,)` to `(batch, dim)` rows, with the meaning of every
    argument of `get_timestep_embedding` (diffusers; DDPM's original is
    `downscale_freq_shift=1`, Stable Diffusion's UNet uses `flip_sin_to_cos=True,
    downscale_freq_shift=0`). The rows come from the exact route of `PositionalEncoding`:
    integer timesteps, and float timesteps holding whole numbers, give the formula's values
    rounded once to the compute dtype. Float timesteps may be fractional or negative, as
    diffusers' function takes them (SD3 and FLUX pass `sigma * 1000`, EDM-style models
    `log(sigma) / 4`): each float32 value is its own timestep, never rounded, and its row is
    exact to the same bound; whole ones give the bits of the integers.

    Args:
        dim: Integer. Width of the embedding; an odd width ends on a zero column.
        max_period: Number greater than 1. Defaults to `10000`.
        downscale_freq_shift: Number below `dim // 2`. Defaults to `1`.
        flip_sin_to_cos: Boolean. Cosines first. Defaults to `False`.
        scale: Positive number multiplying the angles. Defaults to `1.0`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Timesteps, shape `(batch,)`: integers from 0 to 2**31 - 2, or finite floats
            (float16, bfloat16, float32, or float64 holding float32 numbers) of magnitude
            below 2**31 - 1. NaN and infinity are errors.

    Example:

        >>> timesteps = keras.ops.convert_to_tensor([0, 500, 999])
        >>> embedded = TimestepEmbedding(320, flip_sin_to_cos=True, downscale_freq_shift=0)(timesteps)
        >>> tuple(embedded.shape)
        (3, 320)

    References:
        [Ho et al., 2020](https://arxiv.org/abs/2006.11239)
    """
