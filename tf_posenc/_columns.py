"""Internal: what each column of a table holds (its angular frequency, and whether it is a
cosine), for every convention and every layer; the NumPy tables of `encoding` and the exact route
of `_rows` both read these."""

import math

import numpy as np


def angle_rates(i, d_model, max_wavelength):
    """The paper's angular frequency of each column index `i`: `max_wavelength**(-2 (i // 2) / d_model)`."""
    exponents = 2 * (np.asarray(i) // 2) / np.float64(d_model)
    return 1 / np.power(np.float64(max_wavelength), exponents)


def frequencies(d_model, max_wavelength=10000):
    """The `ceil(d_model / 2)` angular frequencies, in float64, highest first."""
    pair_index = np.arange((d_model + 1) // 2)
    return angle_rates(2 * pair_index, d_model, max_wavelength)


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


def columns(d_model, max_wavelength=10000, layout=None, convention="paper", min_timescale=1.0):
    """What each output column holds: its angular frequency and whether it is a cosine.

    The one place every convention is written down; the NumPy tables and the in-graph
    route both read it. Conventions, by the code that defines them:

    * `"paper"`: `omega_j = max_wavelength ** (-2j / d_model)`, `ceil(d_model / 2)` of them;
      interleaved by default (an odd width ends on a sine).
    * `"tensor2tensor"` (`get_timing_signal_1d`, TF Model Garden's
      `RelativePositionEmbedding`): `d_model // 2` frequencies
      `min_timescale * exp(-j * log(max_wavelength / min_timescale) / max(d_model // 2 - 1, 1))`,
      with `max_wavelength` as `max_timescale`; all sines, then all cosines, and a zero column
      when `d_model` is odd. The code multiplies by `min_timescale` where its own description
      (timescales from `min_timescale` to `max_timescale`) divides (tensorflow/models#10945);
      the two agree at the default 1.0.
    * `"tensor2tensor_documented"`: the same, dividing by `min_timescale` as described.
    * `"fairseq"` (`SinusoidalPositionalEmbedding`): `d_model // 2` frequencies
      `exp(-k * log(max_wavelength) / (d_model // 2 - 1))`; sines then cosines, a zero column
      when `d_model` is odd.

    Args:
        d_model: Integer. Number of columns.
        max_wavelength: Number. The base (the `max_timescale` of tensor2tensor).
        layout: `"interleave"`, `"concat"`, or `None` for the convention's own.
        convention: One of `_validation.CONVENTIONS`.
        min_timescale: Number. tensor2tensor's `min_timescale`. Defaults to `1.0`.

    Returns:
        A tuple `(frequencies, cosine)` of float64 and bool NumPy arrays of shape
        `(d_model,)`: column `c` is `cos(pos * frequencies[c])` where `cosine[c]`, else
        `sin(pos * frequencies[c])` (a frequency of 0 makes a zero column).
    """
    layout = layout or default_layout(convention)
    if convention == "paper":
        pairs = (d_model + 1) // 2
        source = column_order(d_model, layout)
        return frequencies(d_model, max_wavelength)[source % pairs], source >= pairs
    count = d_model // 2
    steps = np.arange(count, dtype=np.float64)
    if convention == "fairseq":
        rates = np.exp(-steps * math.log(max_wavelength) / (count - 1))
    else:
        increment = math.log(max_wavelength / min_timescale) / max(count - 1, 1)
        scale = min_timescale if convention == "tensor2tensor" else 1 / min_timescale
        rates = scale * np.exp(-steps * increment)
    source = column_order(2 * count, layout)
    # An odd width ends on a zero column: frequency 0, a sine.
    zero = [0] * (d_model % 2)
    return (
        np.concatenate([rates[source % max(count, 1)] if count else [], np.zeros(len(zero))]),
        np.concatenate([source >= count, np.zeros(len(zero), bool)]),
    )


def default_layout(convention):
    return "interleave" if convention == "paper" else "concat"


def timestep_columns(dim, max_period=10000, downscale_freq_shift=1, flip_sin_to_cos=False, scale=1.0):
    """`columns` for the diffusion timestep embedding of DDPM / latent diffusion.

    `get_timestep_embedding` (diffusers, and DDPM's original with `downscale_freq_shift=1`):
    `dim // 2` frequencies `scale * exp(-log(max_period) * k / (dim // 2 - downscale_freq_shift))`,
    sines then cosines (cosines first with `flip_sin_to_cos`), a zero column for an odd `dim`.
    """
    half = dim // 2
    steps = np.arange(half, dtype=np.float64)
    rates = scale * np.exp(-math.log(max_period) * steps / (half - downscale_freq_shift))
    cosine = np.arange(2 * half) >= half
    if flip_sin_to_cos:
        cosine = ~cosine
    zero = dim % 2
    return (np.concatenate([rates, rates, np.zeros(zero)]), np.concatenate([cosine, np.zeros(zero, bool)]))


def rotary_columns(frequencies):
    """`columns` of a rotation's table: the sine of every pair, then its cosine."""
    pairs = len(frequencies)
    return np.concatenate([frequencies, frequencies]), np.arange(2 * pairs) >= pairs


def grid_columns(width, scale=1.0):
    """`columns` of one grid axis's `width` columns (sines, then cosines), each frequency
    times `scale`: a position `n * scale` is the integer position `n` at frequency `w * scale`."""
    rates, cosine = columns(width, layout="concat")
    return rates * np.float64(scale), cosine


def grid_2d_widths(d_model):
    """The widths of a 2-D grid encoding's parts, in their order: the column's half, then the
    row's (MAE's `get_2d_sincos_pos_embed`, diffusers')."""
    return d_model // 2, d_model // 2


def grid_3d_widths(d_model):
    """The widths of a 3-D grid encoding's parts, in their order: a quarter for the frame, then
    3/8 each for the column and the row (diffusers' `get_3d_sincos_pos_embed`, CogVideoX)."""
    return d_model // 4, 3 * d_model // 8, 3 * d_model // 8


def grid_scales(grid, base_size=None, interpolation_scale=1.0):
    """The position scale of each grid axis: `base_size / (n * interpolation_scale)` for an axis
    of `n` patches (diffusers' `arange(n) / (n / base_size) / interpolation_scale`), or
    `1 / interpolation_scale` without a `base_size`."""
    if base_size is None:
        return tuple(1.0 / interpolation_scale for _ in grid)
    return tuple(base_size / (size * interpolation_scale) for size in grid)
