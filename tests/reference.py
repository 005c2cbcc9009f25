"""An independent float64 NumPy reference, written straight from the paper's formula."""

import math
from decimal import Decimal, localcontext

import numpy as np

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


def transformers_rope(config, layer_type=None, seq_len=None):
    """transformers 5.24's rotary parameters of a config dict, restated in float64.

    Returns `(inv_freq, attention_factor, head_dim)`: what `ROPE_INIT_FUNCTIONS[rope_type]
    (config, seq_len=seq_len)` computes after `standardize_rope_params`, with `seq_len` the
    largest position + 1 of a forward pass (it matters to "dynamic" and "longrope"; for
    "longrope" the `longrope_frequency_update` choice), in `modeling_rope_utils.py`.
    """
    config = dict(config.get("text_config") or config)
    parameters = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    if layer_type is not None and layer_type in parameters:
        parameters = dict(parameters[layer_type])
    elif layer_type == "sliding_attention":  # Gemma 3, 4.x format
        parameters = {"rope_type": "default", "rope_theta": config["rope_local_base_freq"]}
    rope_type = parameters.get("rope_type", parameters.get("type", "default"))
    if rope_type == "su" or (config["model_type"] == "phi3" and rope_type == "yarn"):
        rope_type = "longrope"
    base = parameters.get("rope_theta", config.get("rope_theta", config.get("rotary_emb_base", 10000.0)))
    # GLM's config classes set 0.5 where the config omits it (`kwargs.setdefault`).
    default_partial = 0.5 if config["model_type"] in ("glm4", "glm4_moe") else 1.0
    partial = parameters.get(
        "partial_rotary_factor",
        config.get("partial_rotary_factor", config.get("rotary_pct", default_partial)),
    )
    head_dim = (
        config.get("qk_rope_head_dim")
        or config.get("head_dim")
        or config["hidden_size"] // config["num_attention_heads"]
    )
    if layer_type == "full_attention" and config.get("global_head_dim"):
        head_dim = config["global_head_dim"]
    dim = int(head_dim * partial)
    max_positions = config["max_position_embeddings"]
    original = config.get("original_max_position_embeddings") or parameters.get(
        "original_max_position_embeddings", max_positions
    )
    base = np.float64(base)
    plain = 1.0 / base ** (np.arange(0, dim, 2) / dim)
    factor = parameters.get("factor")
    if rope_type == "default":
        return plain, 1.0, head_dim
    if rope_type == "linear":
        return plain / factor, 1.0, head_dim
    if rope_type == "dynamic" and parameters.get("alpha"):  # HunYuan's `compute_ntk_alpha_rope_parameters`
        grown = base * parameters["alpha"] ** (head_dim / (head_dim - 2))
        return 1.0 / grown ** (np.arange(0, dim, 2) / dim), 1.0, head_dim
    if rope_type == "dynamic":
        extent = max(seq_len or max_positions, max_positions)
        grown = base * ((factor * extent / max_positions) - (factor - 1)) ** (dim / (dim - 2))
        return 1.0 / grown ** (np.arange(0, dim, 2) / dim), 1.0, head_dim
    if rope_type == "proportional":
        angles = int(partial * head_dim // 2)
        rotated = 1.0 / base ** (np.arange(0, 2 * angles, 2) / head_dim)
        return np.concatenate([rotated, np.zeros(head_dim // 2 - angles)]) / (factor or 1.0), 1.0, head_dim
    if rope_type == "llama3":
        low_wavelength = original / parameters["low_freq_factor"]
        high_wavelength = original / parameters["high_freq_factor"]
        wavelength = 2 * math.pi / plain
        scaled = np.where(wavelength > low_wavelength, plain / factor, plain)
        with np.errstate(divide="ignore", invalid="ignore"):  # equal factors: 0 / 0, never selected
            smooth = (original / wavelength - parameters["low_freq_factor"]) / (
                parameters["high_freq_factor"] - parameters["low_freq_factor"]
            )
            smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelength < high_wavelength) & ~(wavelength > low_wavelength)
        return np.where(medium, smoothed, scaled), 1.0, head_dim
    if factor is None:
        factor = max_positions / original
    attention = parameters.get("attention_factor")
    if rope_type == "longrope":
        if attention is None:
            attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
        long = seq_len is not None and seq_len > original
        divisors = np.asarray(parameters["long_factor" if long else "short_factor"], np.float64)
        return plain / divisors, attention, head_dim
    assert rope_type == "yarn", rope_type

    def mscale(scale, weight=1):
        return 1.0 if scale <= 1 else 0.1 * weight * math.log(scale) + 1.0

    if attention is None:
        if parameters.get("mscale") and parameters.get("mscale_all_dim"):
            attention = mscale(factor, parameters["mscale"]) / mscale(factor, parameters["mscale_all_dim"])
        else:
            attention = mscale(factor)
    beta_fast, beta_slow = parameters.get("beta_fast") or 32, parameters.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if parameters.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    extrapolation = 1 - np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    interpolated, extrapolated = plain / factor, plain
    return interpolated * (1 - extrapolation) + extrapolated * extrapolation, attention, head_dim


def reference_partial_rotation(x, positions, frequencies, layout="half", scale=1.0):
    """`reference_rotation` of the leading `2 * len(frequencies)` features, times `scale` (the
    cosines' and sines' factor); the other features pass through, as transformers'
    `apply_rotary_pos_emb` does with a partial rotary width."""
    x = np.asarray(x, np.float64)
    width = 2 * len(frequencies)
    rotated = reference_rotation(x[..., :width], positions, frequencies, layout) * scale
    return np.concatenate([rotated, x[..., width:]], axis=-1)
