"""An independent float64 NumPy reference, written straight from the paper's formula."""

import math
from decimal import Decimal, localcontext

import numpy as np

# The bound every test holds a layer's output to, per dtype policy: one unit in the last place
# at 1.0 of the compute dtype (the measured errors are half of it). Float64 output has no
# rounding step to hide behind: two float64 evaluations of an angle near 2**20 rad may differ
# in its last bit (~1e-10 rad), which bounds any agreement.
BOUND = {"float32": 2**-23, "mixed_float16": 2**-10, "mixed_bfloat16": 2**-7, "float64": 1e-9}
ROUNDED_POLICIES = ["float32", "mixed_bfloat16", "mixed_float16"]  # the policies that round

# 2 * pi to 60 digits, for reducing large angles exactly.
TWO_PI = 2 * Decimal("3.14159265358979323846264338327950288419716939937510582097494459")


def reference_table(positions, d_model, max_wavelength=10000, layout="interleave"):
    positions = np.asarray(positions, dtype=np.float64)
    table = np.zeros(positions.shape + (d_model,))
    for column in range(d_model):
        if layout == "interleave":
            pair, use_cosine = column // 2, column % 2 == 1
        else:
            pair, use_cosine = column % (d_model // 2), column >= d_model // 2
        angle = positions / math.pow(max_wavelength, 2 * pair / d_model)
        table[..., column] = np.cos(angle) if use_cosine else np.sin(angle)
    return table


def exact_reference_table(positions, d_model, max_wavelength=10000):
    """The interleaved table with each angle reduced modulo 2*pi in 60-digit decimals.

    Beyond a few million positions the float64 product `pos / 10000**(2i/d)` itself is off
    by more than a float32 unit; here the frequency is the float64 number
    `1 / max_wavelength**(2i/d)` and `pos * frequency` is exact, so the table is the formula's
    value for every position a layer accepts (below 2**31). Slow: for a few thousand rows.
    """
    positions = np.asarray(positions)
    frequencies = 1 / np.power(np.float64(max_wavelength), 2 * (np.arange(d_model) // 2) / d_model)
    table = np.zeros(positions.shape + (d_model,))
    with localcontext() as context:
        context.prec = 60
        for index in np.ndindex(positions.shape):
            for column, frequency in enumerate(frequencies):
                angle = Decimal(int(positions[index])) * Decimal(float(frequency))
                reduced = float(angle - TWO_PI * int(angle / TWO_PI))
                table[index + (column,)] = math.cos(reduced) if column % 2 else math.sin(reduced)
    return table


def rope_frequencies(dim, base=10000):
    """RoFormer's (and GPT-NeoX's) rotary frequencies `base ** (-2j / dim)`, in float64."""
    return 1.0 / np.power(np.float64(base), np.arange(0, dim, 2) / dim)


def keras_hub_yarn_frequencies(
    dim,
    base=10000,
    factor=1.0,
    beta_fast=32.0,
    beta_slow=1.0,
    original_max_position_embeddings=4096,
    truncate=True,
):
    """keras-hub 0.32's `RotaryEmbedding._get_yarn_inverse_freq`, restated in float64."""
    extrapolated = 1.0 / np.power(np.float64(base), np.arange(0, dim, 2) / dim)

    def correction_dim(rotations):
        return (
            dim
            * math.log(original_max_position_embeddings / (rotations * 2 * math.pi))
            / (2 * math.log(base))
        )

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    ramp = np.clip((np.arange(dim // 2) - low) / max(high - low, 0.001), 0, 1)
    extrapolation_factor = 1 - ramp
    return (extrapolated / factor) * (1 - extrapolation_factor) + extrapolated * extrapolation_factor


def reference_rotation(x, positions, frequencies, layout="half"):
    """Rotates each feature pair of `x` (`(batch, seq, ..., dim)`) in float64, from the formula."""
    x = np.asarray(x, np.float64)
    pairs = x.shape[-1] // 2
    angles = np.asarray(positions, np.float64)[..., None] * frequencies[:pairs]
    angles = angles.reshape(angles.shape[:2] + (1,) * (x.ndim - 3) + (pairs,))
    if layout == "half":
        first, second = x[..., :pairs], x[..., pairs:]
    else:
        first, second = x[..., 0::2], x[..., 1::2]
    rotated_first = first * np.cos(angles) - second * np.sin(angles)
    rotated_second = second * np.cos(angles) + first * np.sin(angles)
    if layout == "half":
        return np.concatenate([rotated_first, rotated_second], axis=-1)
    return np.stack([rotated_first, rotated_second], axis=-1).reshape(x.shape)
