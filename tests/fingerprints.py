"""What `tools/print_transformers.py` measures with and `test_transformers_models.py` checks against:
NumPy only, so that both environments import it."""

import numpy as np

# Values some config classes of transformers 5.25 leave unset in their defaults (their
# checkpoints give them); the printer sets them, and the test reads the configs with them (the
# keys of `ROPE_KEYS` inside `rope_parameters`, the others at the config's top level).
ROPE_KEYS = ("partial_rotary_factor",)
OVERRIDES = {
    # ModernBERT's window is `local_attention // 2`: the modules' 3 (`MODULE_SIZES`) given so.
    "modernbert": {"local_attention": 6},
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
    # Hybrids whose defaults have no rotating attention layer: some attention layers, positions on.
    "bamba": {"attn_layer_indices": list(range(3, 32, 4))},
    "granitemoehybrid": {
        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 8,
        "position_embedding_type": "rope",
    },
    "zamba2": {"use_mem_rope": True},
    # Its defaults name no rope for their layer types; a checkpoint's pattern: sliding layers
    # rotate (by its default M-RoPE sections), full layers have none.
    "cohere_compass_text": {
        "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 10,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 50000.0},
            "full_attention": None,
        },
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


# Configs whose layer types their config classes derive by a rule (`_hf_config._LAYER_TYPE_RULES`):
# other layer counts, and each key the rule reads at another value than its default.
LAYER_TYPE_CASES = {
    "afmoe": [{"num_hidden_layers": 12}, {"num_hidden_layers": 12, "global_attn_every_n_layers": 3}],
    "axk2": [{"num_hidden_layers": 12}],
    "bailing_hybrid": [{"num_hidden_layers": 12, "layer_group_size": 3}],
    "bamba": [{"num_hidden_layers": 12, "attn_layer_indices": [2, 9]}],
    "beam": [{"num_hidden_layers": 14}],
    "cohere2_moe": [
        {"num_hidden_layers": 12, "sliding_window_pattern": 3},
        {"num_hidden_layers": 12, "first_k_dense_replace": 4, "prefix_dense_sliding_window_pattern": 2},
    ],
    "cwm": [{"num_hidden_layers": 12}],
    "deepseek_v32": [{"num_hidden_layers": 12}],
    "diffusion_gemma_text": [{"num_hidden_layers": 14}],
    "ergo": [{"num_hidden_layers": 12, "global_attention_every_n_layers": 3}],
    "exaone4": [{"num_hidden_layers": 12, "sliding_window_pattern": 3}],
    "exaone_moe": [{"num_hidden_layers": 12, "sliding_window_pattern": 3}],
    "falcon_h1": [{"num_hidden_layers": 12}],
    "flint": [{"num_hidden_layers": 12}],
    "gemma4_text": [{"num_hidden_layers": 14}],
    "gemma4_unified_text": [{"num_hidden_layers": 14}],
    "glm5_next_text": [{"num_hidden_layers": 12}],
    "glm_moe_dsa": [{"num_hidden_layers": 12}],
    "granite_swa": [{"num_hidden_layers": 12}],
    "granitemoe_swa": [{"num_hidden_layers": 12}],
    "granitemoehybrid": [{"num_hidden_layers": 12}],
    "hy_v4": [{"num_hidden_layers": 12}],
    "hy_v4_vl_text": [{"num_hidden_layers": 12}],
    "kolibri1": [{"num_hidden_layers": 12}],
    "kolibri1_1": [{"num_hidden_layers": 12}],
    "lara_mini": [{"num_hidden_layers": 12}],
    "lfm2": [{"num_hidden_layers": 12}, {"num_hidden_layers": 12, "full_attn_idxs": [2, 5, 8]}],
    "lfm3": [{"num_hidden_layers": 12}],
    "mimo_v2_flash": [{"num_hidden_layers": 14}],
    "minimax": [{"num_hidden_layers": 12}],
    "ministral": [{"num_hidden_layers": 12}, {"num_hidden_layers": 12, "sliding_window": None}],
    "modernbert-decoder": [{"num_hidden_layers": 12, "global_attn_every_n_layers": 4}],
    "muse_glimmer_text": [{"num_hidden_layers": 14}],
    "muse_spark_text": [{"num_hidden_layers": 14}],
    "olmo3": [{"num_hidden_layers": 12}],
    "olmo_hybrid": [{"num_hidden_layers": 12}, {"num_hidden_layers": 2}],
    "qwen3_5_moe_text": [{"num_hidden_layers": 12, "full_attention_interval": 3}],
    "qwen3_5_text": [{"num_hidden_layers": 12, "full_attention_interval": 3}],
    "qwen3_next": [{"num_hidden_layers": 12, "full_attention_interval": 3}],
    "qwen4_exp_text": [{"num_hidden_layers": 12, "full_attention_interval": 3}],
    "recurrent_gemma": [{"num_hidden_layers": 12, "block_types": ["recurrent", "attention"]}],
    "vaultgemma": [{"num_hidden_layers": 12}],
    "zaya": [{"num_hidden_layers": 12}],
}


# Whole attention modules (`print_transformers.py modules`): each text model type's decoder
# attention, built from its config class's defaults with these sizes where the config has the key
# (and `OVERRIDES`), weights made from their state-dict names by `module_weights`, at positions
# near 1000 with a window shorter than the sequence.
MODULE_SIZES = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "sliding_window": 3}
MODULE_POSITIONS = tuple(range(1000, 1006))


def _seed(name):
    return sum((index + 1) * ord(character) for index, character in enumerate(name)) % 2**31


def module_weights(shapes):
    """{state-dict name: float64 array} for `{name: shape}`: matrices scaled by their fan-in, and
    every 1-D parameter (norms, biases, sinks, scales) moved from both 0 and 1, so that a weight
    that is skipped shows. `RandomState`: its streams never change between NumPy versions."""
    weights = {}
    for name, shape in shapes.items():
        rng = np.random.RandomState(_seed(name))
        if len(shape) == 1:
            signs = np.where(rng.uniform(size=shape) < 0.5, -1.0, 1.0)
            weights[name] = 1.0 + signs * rng.uniform(0.2, 0.5, size=shape)
        else:
            weights[name] = rng.standard_normal(shape) / np.sqrt(shape[-1])
    return weights


def module_input(hidden_size):
    """The hidden states `(1, len(MODULE_POSITIONS), hidden_size)` the modules are called on."""
    return np.random.RandomState(7).standard_normal((1, len(MODULE_POSITIONS), hidden_size))
