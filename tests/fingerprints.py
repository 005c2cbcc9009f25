"""What `print_transformers.py` measures with and `test_transformers_models.py` checks against:
NumPy only, so that both environments import it."""

import numpy as np

# Values some config classes of transformers 5.25 leave unset in their defaults (their
# checkpoints give them); the printer sets them, and the test reads the configs with them (the
# keys of `ROPE_KEYS` inside `rope_parameters`, the others at the config's top level).
ROPE_KEYS = ("partial_rotary_factor",)
OVERRIDES = {
    "glm4v_text": {"partial_rotary_factor": 0.5},
    "glm4v_moe_text": {"partial_rotary_factor": 0.5},
    # Their config classes' defaults leave these None, and their modules cannot be built so.
    "ministral": {"head_dim": 128},
    "hunyuan_v1_dense": {"head_dim": 128},
    "hunyuan_v1_moe": {"head_dim": 128},
    "nemotron": {"num_key_value_heads": 8},
    # Lists and sizes their defaults leave unset: any valid values compare alike.
    "lfm2_moe": {"layer_types": ["conv", "conv", "full_attention", "conv"] * 8},
    "deepseek_ocr2_text": {"mlp_layer_types": ["dense"] + ["sparse"] * 31},
}


def fixed_vectors(dim):
    """The vector rotated, and the three unit vectors its rotation is dotted with."""
    rng = np.random.default_rng(5)
    units = rng.standard_normal((3, dim))
    units /= np.linalg.norm(units, axis=1, keepdims=True)
    return np.cos(0.7 * np.arange(dim) + 0.3), units
