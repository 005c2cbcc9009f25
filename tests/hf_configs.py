"""Published Hugging Face model configs: the keys a rotary embedding reads, as the models' own
`config.json` files give them (model id and source on each)."""

# Phi-3's LongRoPE divisors, from microsoft/Phi-3-vision-128k-instruct config.json
# (transformers_version 4.38.1; its old rope type name "su").
PHI3_LONG_FACTOR = [
    1.0299999713897705, 1.0499999523162842, 1.0499999523162842, 1.0799999237060547,
    1.2299998998641968, 1.2299998998641968, 1.2999999523162842, 1.4499999284744263,
    1.5999999046325684, 1.6499998569488525, 1.8999998569488525, 2.859999895095825,
    3.68999981880188, 5.419999599456787, 5.489999771118164, 5.489999771118164,
    9.09000015258789, 11.579999923706055, 15.65999984741211, 15.769999504089355,
    15.789999961853027, 18.360000610351562, 21.989999771118164, 23.079999923706055,
    30.009998321533203, 32.35000228881836, 32.590003967285156, 35.56000518798828,
    39.95000457763672, 53.840003967285156, 56.20000457763672, 57.95000457763672,
    59.29000473022461, 59.77000427246094, 59.920005798339844, 61.190006256103516,
    61.96000671386719, 62.50000762939453, 63.3700065612793, 63.48000717163086,
    63.48000717163086, 63.66000747680664, 63.850006103515625, 64.08000946044922,
    64.760009765625, 64.80001068115234, 64.81001281738281, 64.81001281738281,
]  # fmt: skip
PHI3_SHORT_FACTOR = [
    1.05, 1.05, 1.05, 1.1, 1.1, 1.1, 1.2500000000000002, 1.2500000000000002,
    1.4000000000000004, 1.4500000000000004, 1.5500000000000005, 1.8500000000000008,
    1.9000000000000008, *[2.000000000000001] * 19, 2.1000000000000005, 2.1000000000000005,
    2.2, 2.3499999999999996, 2.3499999999999996, 2.3499999999999996, 2.3499999999999996,
    2.3999999999999995, 2.3999999999999995, 2.6499999999999986, 2.6999999999999984,
    2.8999999999999977, 2.9499999999999975, 3.049999999999997, 3.049999999999997,
    3.049999999999997,
]  # fmt: skip
# microsoft/Phi-4-mini-instruct config.json: 48 divisors for its 96 rotating features.
PHI4_MINI_LONG_FACTOR = [
    1, 1.118320672, 1.250641126, 1.398617824, 1.564103225, 1.74916897, 1.956131817,
    2.187582649, 2.446418898, 2.735880826, 3.059592084, 3.421605075, 3.826451687,
    4.279200023, 4.785517845, 5.351743533, 5.984965424, 6.693110555, 7.485043894,
    8.370679318, 9.36110372, 10.4687158, 11.70738129, 13.09260651, 14.64173252,
    16.37415215, 18.31155283, 20.47818807, 22.90118105, 25.61086418, 28.64115884, 32.03,
    32.1, 32.13, 32.23, 32.6, 32.61, 32.64, 32.66, 32.7, 32.71, 32.93, 32.97, 33.28, 33.49,
    33.5, 44.16, 47.77,
]  # fmt: skip

CONFIGS = {
    # meta-llama/Llama-3.1-8B config.json
    "llama-3.1-8b": {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    },
    # meta-llama/Llama-3.2-1B config.json
    "llama-3.2-1b": {
        "model_type": "llama",
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    },
    # Qwen/Qwen2.5-7B-Instruct config.json with the YaRN block its model card adds for 128K
    "qwen2.5-7b-yarn": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"},
    },
    # Qwen/Qwen3-8B config.json
    "qwen3-8b": {
        "model_type": "qwen3",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "head_dim": 128,
        "max_position_embeddings": 40960,
        "rope_theta": 1000000,
        "rope_scaling": None,
    },
    # deepseek-ai/DeepSeek-V3 config.json
    "deepseek-v3": {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_attention_heads": 128,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "max_position_embeddings": 163840,
        "rope_theta": 10000,
        "rope_scaling": {
            "beta_fast": 32,
            "beta_slow": 1,
            "factor": 40,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
            "type": "yarn",
        },
    },
    # openai/gpt-oss-20b config.json
    "gpt-oss-20b": {
        "model_type": "gpt_oss",
        "hidden_size": 2880,
        "num_attention_heads": 64,
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "rope_theta": 150000,
        "rope_scaling": {
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "rope_type": "yarn",
            "truncate": False,
        },
    },
    # microsoft/Phi-3-vision-128k-instruct config.json (its Phi-3 language model)
    "phi-3-128k": {
        "model_type": "phi3",
        "hidden_size": 3072,
        "num_attention_heads": 32,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": {"long_factor": PHI3_LONG_FACTOR, "short_factor": PHI3_SHORT_FACTOR, "type": "su"},
    },
    # microsoft/Phi-4-mini-instruct config.json
    "phi-4-mini": {
        "model_type": "phi3",
        "hidden_size": 3072,
        "num_attention_heads": 24,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "partial_rotary_factor": 0.75,
        "rope_theta": 10000.0,
        "rope_scaling": {
            "long_factor": PHI4_MINI_LONG_FACTOR,
            "short_factor": [1.0] * 48,
            "type": "longrope",
        },
    },
    # google/gemma-3-4b-it config.json (transformers 4.x format, under "text_config")
    "gemma-3-4b": {
        "model_type": "gemma3",
        "text_config": {
            "model_type": "gemma3_text",
            "hidden_size": 2560,
            "num_attention_heads": 8,
            "head_dim": 256,
            "max_position_embeddings": 131072,
            "rope_theta": 1000000.0,
            "rope_local_base_freq": 10000.0,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        },
    },
    # Gemma 4's text model as transformers 5.24's Gemma4TextConfig defaults give it
    # (google/gemma-4-e2b-it is the checkpoint it documents).
    "gemma-4": {
        "model_type": "gemma4_text",
        "hidden_size": 2304,
        "num_attention_heads": 8,
        "head_dim": 256,
        "global_head_dim": 512,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {
                "rope_type": "proportional",
                "partial_rotary_factor": 0.25,
                "rope_theta": 1000000.0,
            },
        },
    },
    # EleutherAI/gpt-neox-20b config.json
    "gpt-neox-20b": {
        "model_type": "gpt_neox",
        "hidden_size": 6144,
        "num_attention_heads": 64,
        "max_position_embeddings": 2048,
        "rotary_emb_base": 10000,
        "rotary_pct": 0.25,
    },
    # meta-llama/Llama-2-7b-hf config.json with transformers' dynamic NTK scaling turned on,
    # as transformers' documentation of `rope_scaling` shows it
    "llama-2-7b-dynamic": {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "dynamic", "factor": 2.0},
    },
    # The rope keys of a Kimi-K2 config read as `deepseek_v3` (YaRN with beta_fast = beta_slow = 1,
    # theta 50000, factor 32, mscale 1 / 1), on DeepSeek-V3's head sizes
    "kimi-k2": {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_attention_heads": 64,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "max_position_embeddings": 131072,
        "rope_theta": 50000.0,
        "rope_scaling": {
            "type": "yarn",
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 1.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
    },
    # HunYuan dense (hunyuan_v1_dense): "dynamic" with a fixed `alpha`, its static NTK base
    "hunyuan-7b": {
        "model_type": "hunyuan_v1_dense",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "head_dim": 128,
        "max_position_embeddings": 32768,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0, "beta_fast": 32, "beta_slow": 1},
    },
    # GLM-4-0414 (glm4): no `partial_rotary_factor` in its config.json, so its config class's 0.5,
    # on adjacent pairs
    "glm-4-0414": {
        "model_type": "glm4",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "head_dim": 128,
        "max_position_embeddings": 32768,
        "rope_theta": 10000.0,
    },
    # GLM-4.5 (glm4_moe): the same default, on halves
    "glm-4.5": {
        "model_type": "glm4_moe",
        "hidden_size": 5120,
        "num_attention_heads": 96,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "rope_theta": 1000000.0,
    },
    # Llama 4 Scout's text config: llama3 scaling with equal low and high factors
    "llama-4-scout": {
        "model_type": "llama4_text",
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "head_dim": 128,
        "max_position_embeddings": 10485760,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "factor": 16.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 1.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    },
    # Ministral 3 (ministral3): YaRN whose rope parameters carry Llama 4's query-scale beta
    "ministral-3": {
        "model_type": "ministral3",
        "hidden_size": 5120,
        "num_attention_heads": 32,
        "head_dim": 128,
        "max_position_embeddings": 262144,
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 1000000.0,
            "factor": 16.0,
            "original_max_position_embeddings": 16384,
            "max_position_embeddings": 262144,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "llama_4_scaling_beta": 0.1,
        },
    },
}
