"""The tiny random-weight decoders the port of docs/porting.md is tested with: their configs and weights,
made from a seed with NumPy alone (so the values transformers printed for them can be checked
without torch). Weight names are transformers'; `(out, in)` matrices as `torch.nn.Linear` holds
them."""

import numpy as np

LLAMA = {
    "model_type": "llama",
    "vocab_size": 16,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 128,
    "tie_word_embeddings": False,
    "rope_parameters": {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    },
}

GEMMA3 = {
    "model_type": "gemma3_text",
    "vocab_size": 16,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "query_pre_attn_scalar": 8,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 128,
    "sliding_window": 4,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
    "hidden_activation": "gelu_pytorch_tanh",
    "tie_word_embeddings": True,
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    },
}

PHI3 = {
    "model_type": "phi3",
    "vocab_size": 16,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 32,
    "original_max_position_embeddings": 8,
    "partial_rotary_factor": 0.5,
    "tie_word_embeddings": False,
    "rope_parameters": {
        "rope_type": "longrope",
        "rope_theta": 10000.0,
        "short_factor": [1.0, 1.5],
        "long_factor": [1.2, 6.0],
    },
}

TOKENS = np.array([[3, 14, 1, 5, 9, 2, 6, 5, 3, 5]], "int32")


def weights(config, seed=0):
    """Every weight of the model `config` describes, by transformers' name, in a fixed order."""
    rng = np.random.default_rng(seed)
    gemma = config["model_type"].startswith("gemma")
    hidden, head = config["hidden_size"], config["head_dim"]
    queries, keys = config["num_attention_heads"] * head, config["num_key_value_heads"] * head

    def matrix(rows, columns):
        return rng.normal(0, columns**-0.5, (rows, columns)).astype("float32")

    def norm(width):  # Gemma scales by 1 + weight
        return (rng.normal(0, 0.1, width) + (0 if gemma else 1)).astype("float32")

    named = {"model.embed_tokens.weight": rng.normal(0, 1, (config["vocab_size"], hidden)).astype("float32")}
    for index in range(config["num_hidden_layers"]):
        prefix = f"model.layers.{index}."
        named[prefix + "self_attn.q_proj.weight"] = matrix(queries, hidden)
        named[prefix + "self_attn.k_proj.weight"] = matrix(keys, hidden)
        named[prefix + "self_attn.v_proj.weight"] = matrix(keys, hidden)
        named[prefix + "self_attn.o_proj.weight"] = matrix(hidden, queries)
        if gemma:
            named[prefix + "self_attn.q_norm.weight"] = norm(head)
            named[prefix + "self_attn.k_norm.weight"] = norm(head)
        named[prefix + "mlp.gate_proj.weight"] = matrix(config["intermediate_size"], hidden)
        named[prefix + "mlp.up_proj.weight"] = matrix(config["intermediate_size"], hidden)
        named[prefix + "mlp.down_proj.weight"] = matrix(hidden, config["intermediate_size"])
        norms = ["input_layernorm", "post_attention_layernorm"]
        if gemma:
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        for name in norms:
            named[prefix + name + ".weight"] = norm(hidden)
    named["model.norm.weight"] = norm(hidden)
    if not config["tie_word_embeddings"]:
        named["lm_head.weight"] = matrix(config["vocab_size"], hidden)
    return named


BERT = {
    "model_type": "bert",
    "vocab_size": 16,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 24,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
}
# A padded batch: the second sequence is three tokens shorter (pad id 0), of two segments.
BERT_TOKENS = np.array([[2, 7, 4, 9, 3, 11, 5, 3], [2, 6, 13, 3, 8, 0, 0, 0]], "int32")
BERT_SEGMENTS = np.array([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 0, 0, 0]], "int32")


def bert_weights(config, seed=0):
    """Every weight of a `BertModel` of `config` (pooler aside), by transformers' name."""
    rng = np.random.default_rng(seed)
    hidden, inner = config["hidden_size"], config["intermediate_size"]

    def matrix(rows, columns):
        return rng.normal(0, columns**-0.5, (rows, columns)).astype("float32")

    def vector(width, center=0.0):
        return (rng.normal(0, 0.1, width) + center).astype("float32")

    named = {
        "embeddings.word_embeddings.weight": rng.normal(0, 1, (config["vocab_size"], hidden)).astype(
            "float32"
        ),
        "embeddings.position_embeddings.weight": rng.normal(
            0, 1, (config["max_position_embeddings"], hidden)
        ).astype("float32"),
        "embeddings.token_type_embeddings.weight": rng.normal(
            0, 1, (config["type_vocab_size"], hidden)
        ).astype("float32"),
        "embeddings.LayerNorm.weight": vector(hidden, 1.0),
        "embeddings.LayerNorm.bias": vector(hidden),
    }
    for index in range(config["num_hidden_layers"]):
        prefix = f"encoder.layer.{index}."
        for name in (
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
        ):
            named[f"{prefix}{name}.weight"] = matrix(hidden, hidden)
            named[f"{prefix}{name}.bias"] = vector(hidden)
        named[f"{prefix}intermediate.dense.weight"] = matrix(inner, hidden)
        named[f"{prefix}intermediate.dense.bias"] = vector(inner)
        named[f"{prefix}output.dense.weight"] = matrix(hidden, inner)
        named[f"{prefix}output.dense.bias"] = vector(hidden)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            named[f"{prefix}{norm}.weight"] = vector(hidden, 1.0)
            named[f"{prefix}{norm}.bias"] = vector(hidden)
    return named
