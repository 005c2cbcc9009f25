"""Internal: what each transformers model type's attention module does besides its positions.

One record per model type (`FAMILIES`, what differs from Llama's attention), read with the
config (`module_record`): the projections and their names, fused layouts, which projections
have a bias, the query/key norms, `clip_qkv`, the soft cap, sinks and the output gate. A config
key a record reads takes its config class's default where the config omits it
(`_hf_module_defaults`, printed from transformers 5.25). Plain Python: the layers read the
records (`GroupQueryAttention.from_hf_config`, `load_hf_attention_weights`); nothing here
imports a layer.
"""

import math
from typing import NamedTuple

from tf_posenc import _hf_encoder_defaults, _hf_module_defaults

_SEPARATE = (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "o_proj"))


class Norm(NamedTuple):
    """A module's query and key norms, as `HeadNormalization` takes them."""

    method: str = "rms"  # "rms" or "layer"
    axis: object = -1  # -1: each head; (-2, -1): the whole projection (OLMo 2's)
    per_head: bool = False  # a scale per head, normalised per head (Cohere's, Chameleon's)
    scale: bool = True
    center: bool = False
    offset: float = 0.0  # Gemma's and Qwen3-Next's `1 + weight`
    epsilon: object = "rms_norm_eps"  # a config key, or a constant
    after_rope: bool = False
    names: tuple = ("q_norm", "k_norm")
    when: str | None = None  # the config key that turns the norms on
    split: bool = False  # one module per head, `<name>.norms.<h>` (StableLM)
    rope_layers_only: bool = False  # Llama 4's: only on the layers that rotate
    values: bool = False  # and an RMS norm of each value head without scale (Gemma 3n)


class Family(NamedTuple):
    """What a model type's attention module does that Llama's does not. `names`: each role's
    state-dict child (`q`, `k`, `v`, `o`; `qkv` for a fused projection; `gate`). `fused`: the
    rows of a fused projection (`"qkv"`: [q; k; v]; `"per_head"`: GPT-NeoX's [q_h, k_h, v_h] per
    head; `"codegen"`: CodeGen's four blocks of [q, v, k]; `"falcon"`: Falcon's, by its config).
    `bias`: a config key (or a constant) and the projections it gives a bias; `out_bias` another
    for the output projection's. `norm`: a `Norm`, or a function of the config giving one (or
    None). `gate`: `"interleaved"` (the query projection gives each head's query, then its gate:
    Qwen3-Next's), `"separate"` (a projection of its own, one gate per feature) or `"per_head"`
    (one gate per head), or a function of the config giving one of them (or None);
    `gate_activation` the gate's (`sigmoid`, Laguna's `softplus`). `score_scale`: a config key
    whose value multiplies the scores of the layers without a window (Ergo's
    `global_attention_scale`). `refused`: the mechanism the layer does not have. A bias role `g`
    is the gate projection's."""

    names: dict = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj"}
    fused: str | None = None
    bias: tuple = ("attention_bias", "qkvo")
    out_bias: object = None
    norm: object = None
    clip_key: str | None = None
    soft_cap_key: str | None = None
    sinks: bool = False
    gate: object = None
    gate_activation: str = "sigmoid"
    score_scale: str | None = None
    kv_heads: str | None = None  # a config key of its own (DBRX's `attn_config.kv_n_heads`)
    derived_head_dim: bool = False  # `hidden_size // num_attention_heads`, whatever `head_dim` says
    output_norm: str | None = None  # the state-dict name of an RMS norm of the heads' output
    value_head_dim: str | None = None  # a config key: values of a head size of their own (MiMo's)
    value_scale: str | None = None  # a config key: the values scaled after their projection
    differential: bool = False  # DiffLlama's differential attention
    refused: str | None = None
    refused_unrotated: str | None = None  # the mechanism of its layers without rotation


class Module(NamedTuple):
    """One layer's attention module, read from a config: what the layer builds and the loader
    loads. `projections` maps a role (`q`, `k`, `v`, `o`, `qkv`, `gate`) to its state-dict
    child name."""

    model_type: str
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    projections: dict
    fused: str | None
    biases: frozenset
    norm: Norm | None
    epsilon: float | None
    clip_qkv: float | None
    soft_cap: float | None
    sinks: bool
    gate: str | None
    score_scale: float | None
    output_norm: tuple | None = None  # (state-dict name, epsilon): BitNet's `attn_sub_norm`
    values_from_keys: bool = False  # no value projection: the key projection's output (Gemma 4's)
    gate_activation: str = "sigmoid"  # Laguna's `softplus`
    value_head_dim: int | None = None  # narrower values, held `head_dim` wide with zeros (MiMo's)
    value_scale: float | None = None  # MiMo-V2-Flash's `attention_value_scale`
    differential: float | None = None  # DiffLlama's `lambda_init`, with its norm's epsilon below


_LLAMA = Family().names
_QK = Norm()
_QK_ALL = Norm(axis=(-2, -1))  # OLMo 2's: over all heads' features, a scale per feature
_QK_OFFSET = Norm(offset=1.0)
_QKV_ONLY = ("attention_bias", "qkv")
_SINKS = Family(sinks=True)
_PERSIMMON_QK = Norm(
    method="layer",
    center=True,
    epsilon="layer_norm_eps",
    names=("q_layernorm", "k_layernorm"),
    when="qk_layernorm",
)


def _molmo2_norm(config):
    return _QK_ALL if config_value(config, "qk_norm_type") == "olmo" else _QK


def _lfm3_gate(config):  # LFM3's `use_attention_gate`
    return None if config_value(config, "use_attention_gate") is False else "per_head"


def _step3p5_gate(config):  # Step-3.5's `gating`: off, per head, or per feature
    gating = config_value(config, "gating")
    if gating is False:
        return None
    return "per_head" if gating in (True, None, "per-head") else "separate"


def _laguna_gate(config):  # Laguna's `gating`: per head, or per feature (never off)
    return "per_head" if config_value(config, "gating") in (True, "per-head") else "separate"


def _refused(mechanism):
    return Family(refused=mechanism)


FAMILIES = {
    # Encoders: ModernBERT's fused projection (its bias by `attention_bias`, off by default);
    # EuroBERT's and UltraBERT's are Llama's; GTE's and Jina v3's always have biases, NomicBERT's none.
    "modernbert": Family(names={"qkv": "Wqkv", "o": "Wo"}, fused="qkv", derived_head_dim=True),
    **dict.fromkeys(("eurobert", "ultrabert"), Family()),
    **dict.fromkeys(("gte", "jina_embeddings_v3"), Family(bias=(True, "qkvo"))),
    "nomic_bert": Family(bias=(False, "")),
    # Biases on some projections only, or by other keys.
    **dict.fromkeys(
        ("qwen2", "qwen2_vl_text", "qwen2_5_vl_text", "qwen2_5_omni_text", "glm4v_text"),
        Family(bias=(True, "qkv")),
    ),
    "qwen2_moe": Family(bias=("qkv_bias", "qkv")),
    **dict.fromkeys(("glm", "glm4", "glm4v_moe_text", "helium", "solar_open"), Family(bias=_QKV_ONLY)),
    "glm4_moe": Family(bias=_QKV_ONLY, norm=Norm(when="use_qk_norm")),
    "paddleocr_vl_text": Family(bias=("use_bias", "qkvo")),
    "seed_oss": Family(bias=_QKV_ONLY, out_bias="attention_out_bias"),
    "recurrent_gemma": Family(bias=_QKV_ONLY, out_bias=True),
    **dict.fromkeys(
        ("ernie4_5", "ernie4_5_moe", "ernie4_5_vl_moe_text", "starcoder2"), Family(bias=("use_bias", "qkvo"))
    ),
    # Other names, fused projections.
    "gptj": Family(names={**_LLAMA, "o": "out_proj"}, bias=(False, ""), derived_head_dim=True),
    "modernbert-decoder": Family(names={**_LLAMA, "o": "Wo"}),
    **dict.fromkeys(
        ("moshi", "kyutai_speech_to_text"),
        Family(names={role: f"{name}.linear" for role, name in _LLAMA.items()}, bias=(False, "")),
    ),
    **dict.fromkeys(
        ("phi3", "phi4_multimodal"),
        Family(names={"qkv": "qkv_proj", "o": "o_proj"}, fused="qkv", bias=(False, "")),
    ),
    "dbrx": Family(
        names={"qkv": "Wqkv", "o": "out_proj"},
        fused="qkv",
        bias=(False, ""),
        clip_key="attn_config.clip_qkv",
        kv_heads="attn_config.kv_n_heads",
        derived_head_dim=True,
    ),  # fmt: skip
    "codegen": Family(
        names={"qkv": "qkv_proj", "o": "out_proj"}, fused="codegen", bias=(False, ""), derived_head_dim=True
    ),
    "gpt_neox": Family(
        names={"qkv": "query_key_value", "o": "dense"}, fused="per_head", derived_head_dim=True
    ),
    "gpt_neox_japanese": Family(
        names={"qkv": "query_key_value", "o": "dense"},
        fused="per_head",
        bias=(False, ""),
        derived_head_dim=True,
    ),
    "falcon": Family(
        names={"qkv": "query_key_value", "o": "dense"},
        fused="falcon",
        bias=("bias", "qkvo"),
        derived_head_dim=True,
    ),
    "persimmon": Family(
        names={"qkv": "query_key_value", "o": "dense"},
        fused="per_head",
        bias=(True, "qkvo"),
        norm=_PERSIMMON_QK,
        derived_head_dim=True,
    ),  # fmt: skip
    "phi": Family(names={**_LLAMA, "o": "dense"}, bias=(True, "qkvo"), norm=_PERSIMMON_QK),
    "ergo": Family(
        names={"qkv": "qkv_proj", "o": "o_proj"},
        fused="qkv",
        bias=(False, ""),
        norm=_QK,
        score_scale="global_attention_scale",
    ),
    # Query and key norms.
    **dict.fromkeys(
        (
            "qwen3",
            "qwen3_moe",
            "qwen3_vl_text",
            "qwen3_vl_moe_text",
            "qwen3_omni_moe_text",
            "apertus",
            "apertus1p5_text",
            "dots1",
            "exaone4",
            "exaone_moe",
            "hy_v3",
            "kolibri1",
            "lara_mini",
            "mellum",
        ),
        Family(norm=_QK),
    ),  # fmt: skip
    "kolibri1_1": Family(
        norm=_QK,
        refused_unrotated=(
            "Kolibri 1.1's indexed layers, which attend to the keys an indexer selects (`index_topk` of "
            "`index_pool_size`, with sink and local tokens)"
        ),
    ),
    "gemma3_text": Family(norm=_QK_OFFSET),
    # Gemma 4's norms scale by `weight` (no `1 + weight`); its head sizes, key-value heads and
    # keys reused as values come per layer (`layer_sizes`, `values_from_keys`).
    **dict.fromkeys(
        ("gemma3n_text", "gemma4_text", "gemma4_unified_text", "diffusion_gemma_text"),
        Family(norm=Norm(values=True)),
    ),
    **dict.fromkeys(("olmo2", "olmo3", "olmo_hybrid", "flex_olmo", "minimax_m2"), Family(norm=_QK_ALL)),
    "olmoe": Family(norm=_QK_ALL, clip_key="clip_qkv"),
    "olmo": Family(clip_key="clip_qkv"),
    "molmo2_text": Family(bias=_QKV_ONLY, norm=_molmo2_norm),
    "stablelm": Family(
        bias=("use_qkv_bias", "qkv"),
        norm=Norm(
            method="layer",
            epsilon="layer_norm_eps",
            names=("q_layernorm", "k_layernorm"),
            when="qk_layernorm",
            per_head=True,
            split=True,
        ),
    ),  # fmt: skip
    "cohere": Family(norm=Norm(method="layer", per_head=True, epsilon="layer_norm_eps", when="use_qk_norm")),
    "chameleon": Family(norm=Norm(method="layer", per_head=True, center=True, epsilon=1e-5)),
    **dict.fromkeys(
        ("hunyuan_v1_dense", "hunyuan_v1_moe"),
        Family(norm=Norm(after_rope=True, names=("query_layernorm", "key_layernorm"))),
    ),
    **dict.fromkeys(
        ("lfm2", "lfm2_moe"),
        Family(
            names={**_LLAMA, "o": "out_proj"},
            bias=(False, ""),
            norm=Norm(epsilon="norm_eps", names=("q_layernorm", "k_layernorm")),
        ),
    ),  # fmt: skip
    "llama4_text": Family(
        norm=Norm(scale=False, after_rope=True, names=(), when="use_qk_norm", rope_layers_only=True)
    ),
    # Soft caps, sinks, gates.
    **dict.fromkeys(("gemma2", "vaultgemma"), Family(soft_cap_key="attn_logit_softcapping")),
    **dict.fromkeys(("gpt_oss", "granite_swa", "granitemoe_swa"), _SINKS),
    "flint": Family(norm=_QK, sinks=True),
    **dict.fromkeys(
        ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"), Family(norm=_QK_OFFSET, gate="interleaved")
    ),
    "minicpm5_moe": Family(names={**_LLAMA, "q": "q_gate_proj"}, gate="interleaved"),
    "hrm_text": Family(
        names={**_LLAMA, "gate": "gate_proj"}, bias=("attention_bias", "qkvog"), gate="separate"
    ),
    "afmoe": Family(names={**_LLAMA, "gate": "gate_proj"}, norm=_QK, gate="separate"),
    "lfm3": Family(names={**_LLAMA, "gate": "g_proj"}, norm=_QK, gate=_lfm3_gate),
    "step3p5": Family(names={**_LLAMA, "gate": "g_proj"}, norm=_QK_OFFSET, gate=_step3p5_gate),
    "laguna": Family(
        names={**_LLAMA, "gate": "g_proj"}, norm=_QK, gate=_laguna_gate, gate_activation="softplus"
    ),
    "diffllama": Family(differential=True),
    # Mechanisms the layer does not have.
    "doge": _refused("Doge's dynamic mask (a learned bias per key from `dt_proj` and `A`)"),
    "dory": _refused("Dory's learned query-key scales (`sqk`) and gate (`s_gate`)"),
    # Its projections as `nn.Linear` (a checkpoint packed to ternary weights brings `weight_scale`,
    # which the loader names as unused).
    "bitnet": Family(output_norm="attn_sub_norm"),
    "jetmoe": _refused("JetMoE's mixture of attention experts (its queries and outputs routed per token)"),
    # Values of a head size of their own, scaled; its sliding layers' key-value heads and sinks
    # come per layer type (`LAYER_MODULES`).
    "mimo_v2_flash": Family(bias=_QKV_ONLY, value_head_dim="v_head_dim", value_scale="attention_value_scale"),
    "zamba2": _refused(
        "Zamba2's shared attention: inputs twice the hidden size (the hidden states with the embeddings) and "
        "per-layer adapters"
    ),
    "qwen4_exp_text": _refused("Qwen4-Exp's learned indexer, which chooses the keys each query attends to"),
    "zaya": _refused("Zaya's causal convolution of its queries and keys over time"),
}


_PLAN = "read by the plan (`hf_attention_layers`)"
_DROPOUT = "dropout, off at inference"
_RECORD = "read by the module's record"
# Every config key that a read type's attention module reads in its code (`MODULE_READS`,
# printed from transformers 5.25), and how tf_posenc accounts for it. `module_record` refuses a
# type whose module reads a key missing here, so that a new key is an error, not a wrong number.
ACCOUNTED = {
    **dict.fromkeys(
        ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim"), "read: the sizes"
    ),
    **dict.fromkeys(("d_model", "n_heads", "kv_n_heads", "attn_config"), "read: DBRX's names of the sizes"),
    **dict.fromkeys(
        (
            "layer_types",
            "sliding_window",
            "sliding_window_pattern",
            "use_sliding_window",
            "rope_parameters",
            "rope_theta",
            "partial_rotary_factor",
            "rotary_dim",
            "no_rope_layers",
            "query_pre_attn_scalar",
            "attention_multiplier",
            "attn_scale",
            "attn_temperature_tuning",
            "floor_scale",
            "kv_sharing_modes",
            "use_bidirectional_attention",
            "prefix_dense_sliding_window_pattern",
            "mlp_layer_types",
        ),
        _PLAN,
    ),
    **dict.fromkeys(
        (
            "attention_bias",
            "attention_out_bias",
            "bias",
            "qkv_bias",
            "use_bias",
            "use_qkv_bias",
            "clip_qkv",
            "qk_layernorm",
            "qk_norm_type",
            "use_qk_norm",
            "rms_norm_eps",
            "layer_norm_eps",
            "norm_eps",
            "attn_logit_softcapping",
            "gating",
            "use_attention_gate",
            "global_attention_scale",
            "key_multiplier",
            "multi_query",
            "new_decoder_architecture",
            "num_kv_heads",
            "attention_k_eq_v",
            "per_layer_config",
            "num_attention_heads_per_layer",
            "v_head_dim",
            "attention_value_scale",
        ),
        _RECORD,
    ),
    **dict.fromkeys(
        (
            "attention_dropout",
            "attention_probs_dropout_prob",
            "attn_pdrop",
            "resid_pdrop",
            "residual_dropout",
            "hidden_dropout",
            "dropout",
        ),
        _DROPOUT,
    ),
    "_attn_implementation": "transformers' choice of attention kernel, the same softmax",
    "deterministic_flash_attn": "a flash-attention kernel's determinism, the same softmax",
    "lambda_std_dev": "DiffLlama's initial lambda weights, which a checkpoint replaces",
    "alibi": "Falcon's ALiBi, which the plan refuses (`no_rotation`)",
    "max_position_embeddings": "the length of a rotary cache (Chameleon's, Falcon's), not its values",
    "max_seq_len": "DBRX's longest input, not a value of its module",
    "model_parallel_size": "Chameleon's, stored by its module and never used",
    "kv_source_layers": "Kolibri 1.1's: only its indexed layers (refused) read another layer's keys",
    "num_codebooks": "Moshi's depth decoder's per-codebook projections, not the decoder's modules read here",
    "vision_config": "IDEFICS's cross-attention widths, not its self-attention's",
}


def unaccounted(model_type):
    """The config keys the model type's attention module reads that `ACCOUNTED` lacks."""
    return sorted(set(_hf_module_defaults.MODULE_READS.get(model_type, ())) - set(ACCOUNTED))


def family(model_type):
    return FAMILIES.get(model_type, Family())


def default(config, key):
    """The config class's default of `key` for the model type of `config`, or None."""
    return _hf_module_defaults.DEFAULTS.get(config.get("model_type"), {}).get(key)


def declared(config, key):
    """Whether the config class of `config`'s model type has `key`. transformers ignores a key its
    config class lacks (config files in the wild carry such keys), so the readers do too: a key of
    the printed `KEYS` absent from the type's printed row is not the class's."""
    row = _hf_module_defaults.DEFAULTS.get(config.get("model_type"))
    return row is None or key not in _hf_module_defaults.KEYS or key in row


def config_value(config, key):
    """A config key (`"a.b"`: key `b` of the dict at `a`), or its config class's default where
    the config omits it; a constant as itself."""
    if not isinstance(key, str):
        return key
    if "." in key:
        outer, inner = key.split(".", 1)
        nested = config.get(outer)
        nested = nested if isinstance(nested, dict) else vars(nested) if nested is not None else {}
        return nested.get(inner)
    if config.get(key) is not None and declared(config, key):
        return config[key]
    return default(config, key)


def layer_sizes(config, index, layer_type):
    """The sizes layer `index` (of type `layer_type`) has of its own, as {key: value} over the
    config's (`head_dim`, `num_key_value_heads`, ...): Laguna's `num_attention_heads_per_layer`;
    its `per_layer_config` entry (keyed 5,
    "5" or "05"); else, for a type whose config class derives one (`LAYER_SIZES`, printed), the
    class's derivation (transformers 5.25's `Gemma4TextConfig.__post_init__`): `global_head_dim`
    (or its default) on that layer type, and `num_global_key_value_heads` where the keys are
    reused as values or the class has no switch for it."""
    heads = config_value(config, "num_attention_heads_per_layer")  # Laguna's query heads
    if heads is not None:
        return {"num_attention_heads": heads[index]}
    given = config.get("per_layer_config")
    if given is not None:
        for key in (index, str(index), f"{index:02d}"):
            if key in given:
                return dict(given[key] or {})
        return {}
    model_type = config.get("model_type")
    derived = _hf_module_defaults.LAYER_SIZES.get(model_type, {}).get(layer_type)
    if derived is None:
        return {}
    sizes = dict(derived)
    if config.get("global_head_dim") is not None:
        sizes["head_dim"] = config["global_head_dim"]
    switch = "attention_k_eq_v"
    shared = (
        config_value(config, switch) if switch in _hf_module_defaults.DEFAULTS.get(model_type, {}) else True
    )
    if config.get("num_global_key_value_heads") is not None and shared:
        sizes["num_key_value_heads"] = config["num_global_key_value_heads"]
    return sizes


def values_from_keys(config, layer_type):
    """Whether layers of `layer_type` take the key projection's output as their values (Gemma 4's
    `attention_k_eq_v`, printed in `VALUES_FROM_KEYS` with the key that turns it on)."""
    fact = _hf_module_defaults.VALUES_FROM_KEYS.get(config.get("model_type"))
    if fact is None or layer_type not in fact["layer_types"]:
        return False
    return fact["key"] is None or bool(config_value(config, fact["key"]))


def _falcon_layout(config, heads):
    """Falcon's key-value heads and fused layout: its new decoder architecture groups
    `num_kv_heads`; the older one has one key-value head (`multi_query`) or one per head."""
    if config_value(config, "new_decoder_architecture"):
        return config_value(config, "num_kv_heads"), "falcon"
    if config_value(config, "multi_query"):
        return 1, "falcon_multi_query"
    return heads, "per_head"


def lambda_init(layer_index):
    """Differential attention's `lambda_init` of a layer (transformers 5.25's
    `diffllama.modeling_diffllama.lambda_init_fn`)."""
    return 0.8 - 0.6 * math.exp(-0.3 * layer_index)


def module_record(config, heads, kv_heads, head_dim, layer, layer_type=None, layer_index=0):
    """The `Module` of decoder layer `layer_index` (`layer`, its `attention.AttentionLayer`, of
    type `layer_type`) of a config read by `_hf_config.read`, with the head counts and size the
    plan gives; a `ValueError` naming the mechanism for a module the layer does not build."""
    model_type = config.get("model_type") or ""
    if model_type in _hf_encoder_defaults.DEFAULTS and model_type not in FAMILIES:
        raise ValueError(
            f"The attention module of model_type={model_type!r} (not a decoder) is not read: its "
            "projections, norms and biases have no record here. `hf_attention_layers(config)` gives "
            "its positions."
        )
    record = family(model_type)
    refused = record.refused or (record.refused_unrotated if layer.rope is None else None)
    unread = unaccounted(model_type)
    if refused is None and unread:
        unread = ", ".join(map(repr, unread))
        refused = f"config keys its module reads that tf_posenc does not account for: {unread}"
    if refused is not None:
        raise ValueError(
            f"The attention module of model_type={model_type!r} needs a mechanism `GroupQueryAttention` "
            f"does not have: {refused}. `hf_attention_layers(config)` gives its positions."
        )
    if record.derived_head_dim:
        head_dim = config["hidden_size"] // heads
    by_layer = _hf_module_defaults.LAYER_MODULES.get(model_type, {}).get(layer_type, {})
    kv_heads = kv_heads * by_layer.get("kv_heads_factor", 1)
    value_head_dim = None if record.value_head_dim is None else config_value(config, record.value_head_dim)
    if value_head_dim is not None and value_head_dim > head_dim:
        raise ValueError(
            f"The attention module of model_type={model_type!r} needs a mechanism `GroupQueryAttention` "
            f"does not have: values wider than its queries and keys (`{record.value_head_dim}`). "
            f"Received: {record.value_head_dim}={value_head_dim}, head_dim={head_dim}"
        )
    value_scale = None if record.value_scale is None else config_value(config, record.value_scale)
    if record.kv_heads is not None:
        kv_heads = config_value(config, record.kv_heads) or 1  # DbrxAttentionConfig's default
    fused = record.fused
    if fused == "falcon":
        kv_heads, fused = _falcon_layout(config, heads)
    bias_key, with_bias = record.bias
    biases = set(with_bias) if config_value(config, bias_key) else set()
    if record.out_bias is not None:
        biases.discard("o")
        if config_value(config, record.out_bias):
            biases.add("o")
    norm = record.norm(config) if callable(record.norm) else record.norm
    if norm is not None and norm.when is not None and not config_value(config, norm.when):
        norm = None
    if norm is not None and norm.rope_layers_only and layer.rope is None:
        norm = None
    clip = None if record.clip_key is None else config_value(config, record.clip_key)
    soft_cap = None if record.soft_cap_key is None else config_value(config, record.soft_cap_key)
    score_scale = None
    if record.score_scale is not None and layer.sliding_window is None:
        score_scale = config_value(config, record.score_scale)
    if "key_multiplier" in _hf_module_defaults.DEFAULTS.get(model_type, {}):
        # Keys scaled after their projection (Falcon-H1's `key_multiplier`), read wherever the
        # config class has the key: the rotation is linear, so every score scales alike.
        multiplier = float(config_value(config, "key_multiplier"))
        if multiplier != 1.0:
            score_scale = multiplier * (1.0 if score_scale is None else float(score_scale))
    return Module(
        model_type=model_type,
        hidden_size=config["hidden_size"],
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        projections=dict(record.names),
        fused=fused,
        biases=frozenset(biases),
        norm=norm,
        epsilon=float(config_value(config, "rms_norm_eps"))
        if record.differential
        else None
        if norm is None
        else float(config_value(config, norm.epsilon)),
        clip_qkv=None if clip is None else float(clip),
        soft_cap=None if soft_cap is None else float(soft_cap),
        sinks=by_layer.get("sinks", record.sinks),
        gate=record.gate(config) if callable(record.gate) else record.gate,
        gate_activation=record.gate_activation,
        value_head_dim=None if value_head_dim in (None, head_dim) else int(value_head_dim),
        value_scale=None if value_scale in (None, 1.0) else float(value_scale),
        differential=lambda_init(layer_index) if record.differential else None,
        score_scale=None if score_scale is None else float(score_scale),
        output_norm=None
        if record.output_norm is None
        else (record.output_norm, float(config_value(config, "rms_norm_eps"))),
        values_from_keys=values_from_keys(config, layer_type),
    )
