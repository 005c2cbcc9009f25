"""What `print_transformers.py` measures with and `test_transformers_models.py` checks against:
NumPy only, so that both environments import it."""

import numpy as np

# Values some config classes of transformers 5.25 leave unset in their defaults (their
# checkpoints give them); the printer sets them, and the test reads the configs with them (the
# keys of `ROPE_KEYS` inside `rope_parameters`, the others at the config's top level).
ROPE_KEYS = ("partial_rotary_factor",)
OVERRIDES = {
    "glm4v_text": {"partial_rotary_factor": 0.5},
    "glm4v_moe_text": {"partial_rotary_factor": 0.5, "head_dim": 128},
    # Their config classes' defaults leave these None, and their modules cannot be built so.
    "ministral": {"head_dim": 128},
    "hunyuan_v1_dense": {"head_dim": 128},
    "hunyuan_v1_moe": {"head_dim": 128},
    "nemotron": {"num_key_value_heads": 8},
    # Lists and sizes their defaults leave unset: any valid values compare alike.
    "lfm2_moe": {"layer_types": ["conv", "conv", "full_attention", "conv"] * 8},
    "deepseek_ocr2_text": {"mlp_layer_types": ["dense"] + ["sparse"] * 31},
    "chameleon": {"vocabulary_map": {"<image>": 8711}},
    "qwen3_omni_moe_text": {"head_dim": 128},  # its defaults' 73-wide heads do not rotate
    # Its defaults name no rope for their layer types; a checkpoint's pattern: sliding layers
    # rotate (by its default M-RoPE sections), full layers have none.
    "cohere_compass_text": {
        "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 10,
        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 50000.0}, "full_attention": None},
    },
    "dots1": {"n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1},
    "diffusion_gemma_text": {"num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 64},
    "qwen4_exp_text": {
        "indexer_n_heads": 4,
        "indexer_kv_heads": 1,
        "indexer_head_dim": 256,
        "indexer_budget": 2048,
        "indexer_compress_ratio": 4,
    },  # fmt: skip
}


def fixed_vectors(dim):
    """The vector rotated, and the three unit vectors its rotation is dotted with."""
    rng = np.random.default_rng(5)
    units = rng.standard_normal((3, dim))
    units /= np.linalg.norm(units, axis=1, keepdims=True)
    return np.cos(0.7 * np.arange(dim) + 0.3), units


# Inkling 2's relative-position bias, printed through transformers' `Inkling2RelativePositionBias`:
# small sizes, a clip some heads reach and others do not, and a log scale with a low floor so
# that the positions near 2**17 (and the cache's queries at the end of the keys) change it.
INKLING = {
    "num_heads": 3,
    "rel_extent": 6,
    "d_rel": 4,
    "rel_l2_clip_threshold": 2.5,
    "log_scaling_alpha": 0.1,
    "log_scaling_n_floor": 64,
    "hidden_size": 8,
    "first_positions": (2**17 - 5, 70),  # the queries' first position: near 2**17, and past the floor
    "q_len": 5,
    "k_len": 9,
}


def inkling_arguments():
    """The case's constructor arguments of `InklingRelativeBias` (all but `log_scaling`)."""
    keys = (
        "num_heads",
        "rel_extent",
        "d_rel",
        "rel_l2_clip_threshold",
        "log_scaling_alpha",
        "log_scaling_n_floor",
    )
    return {key: INKLING[key] for key in keys}


def inkling_weights():
    """The bias's input and weights, float32: hidden states (2, q_len, hidden_size) and
    transformers' `linear.weight` (num_heads * d_rel, hidden_size), `norm.scale` and `proj`."""
    rng = np.random.default_rng(11)
    case = INKLING
    heads_features = case["num_heads"] * case["d_rel"]
    hidden = rng.standard_normal((2, case["q_len"], case["hidden_size"]))
    linear = 0.4 * rng.standard_normal((heads_features, case["hidden_size"]))
    scale = 1.0 + 0.5 * rng.standard_normal((case["num_heads"], case["d_rel"]))
    proj = rng.standard_normal((case["d_rel"], case["rel_extent"]))
    return [array.astype(np.float32) for array in (hidden, linear, scale, proj)]


def inkling_positions(first):
    """The queries' and keys' positions: `q_len` queries from `first`, the last of `k_len` keys
    ending at the last query (a cache, as transformers' `get_relative_distance` makes it)."""
    queries = first + np.arange(INKLING["q_len"])
    keys = queries[-1] - INKLING["k_len"] + 1 + np.arange(INKLING["k_len"])
    return queries, keys
