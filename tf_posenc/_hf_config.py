"""Internal: a Hugging Face transformers model config, read as `RotaryEmbedding` arguments.

The keys and their defaults are transformers' (5.x `modeling_rope_utils.py` and the model
configs): `rope_parameters`, or the 4.x `rope_scaling` with `rope_theta`; the rotary head size;
`partial_rotary_factor`; the context lengths. A key a rope type needs and the config lacks, or
two keys that disagree, is a `ValueError` naming it (transformers' validators raise for the
first and warn for some of the second; a port should not start from a guess).
"""

import copy
import json
import math
import os
from collections.abc import Mapping
from typing import NamedTuple

from tf_posenc import (
    _hf_defaults,
    _hf_encoder_defaults,
    _hf_latent,
    _hf_module_defaults,
    _rope_types,
    _validation,
)

_LAYER_TYPES = ("full_attention", "sliding_attention")


def as_dict(config):
    if isinstance(config, (str, os.PathLike)):
        path = os.path.join(config, "config.json") if os.path.isdir(config) else config
        if not os.path.isfile(path):
            raise ValueError(
                "`config` must be a config dict, a config object, a `config.json` or the checkpoint "
                f"folder holding one. Received: config={os.fspath(config)!r} "
                f"({os.fspath(path)!r} is not a file)"
            )
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    if isinstance(config, Mapping):
        return dict(config)
    if hasattr(config, "to_dict"):  # a transformers config
        return config.to_dict()
    return dict(vars(config))


def _language_model(config):
    """A multimodal model's `text_config`, where its rotary parameters live."""
    own = ("rope_parameters", "rope_scaling", "rope_theta", "head_dim", "hidden_size")
    if config.get("text_config") is not None and not any(key in config for key in own):
        return as_dict(config["text_config"])
    return config


# The model types that rotate and are not decoders (encoders, speech and audio models, towers):
# their rotation is read; the per-layer plan of those in `_ENCODER_PLANS`.
ENCODER_TYPES = tuple(sorted({*_hf_encoder_defaults.DEFAULTS, *_hf_encoder_defaults.SUB_CONFIGS}))
# Multimodal configs: the model type of their language model (decoders and encoders).
_TEXT_MODEL_TYPES = {**_hf_defaults.TEXT_MODEL_TYPES, **_hf_encoder_defaults.TEXT_MODEL_TYPES}

# Composite configs with more than one rotating part: the sub-configs to pass instead.
_ROTATING_PARTS = {
    "dia": ("encoder_config", "decoder_config"),
    "t5gemma": ("encoder", "decoder"),
    "nemo_speechlm": ("asr_config", "word_timestamp_config"),
}

# The model types whose positions need a mechanism tf_posenc does not have: the mechanism, by
# model type (transformers 5.25's modeling code). `read` refuses them, naming it.
MECHANISMS = {
    "inkling2_text": (
        "Inkling's attention, which takes per-token sinks and convolved keys (its positions are "
        "not rotations but a learned bias conditioned on each query's hidden state, "
        "`InklingRelativeBias.from_hf_config(config, layer_index)`, and on its full layers "
        "log-scaled queries, `attention_log_scale`)"
    ),
    "nanochat": "a rotation by minus the angle (nanochat's `rotate_half` with its sign flipped)",
    "mistral_large4_text": "Mistral Large 4's learned per-frequency scales (`exp(alpha)` on its frequencies)",
    "hunyuan_vl_text": (
        "HunYuan-VL's XD-RoPE: sections cut from the doubled frequencies, so a pair's two halves may "
        "turn by different axes"
    ),
    "ernie4_5_vl_moe_text": "ERNIE 4.5-VL's M-RoPE (height and width alternating over the first 44 pairs)",
    "t5gemma2_decoder": (
        "T5Gemma 2's merged attention: rotated self-attention keys and unrotated encoder keys in one softmax"
    ),
    "blt": "BLT's global transformer, whose positions are patch indices",
    "blt_global_transformer": "BLT's global transformer, whose positions are patch indices",
    "pi05": "π0.5's action expert, whose decoder config is nested in its `dit_config`",
    # Not decoders: rotations of other coordinates than a token's position.
    "musicflamingo": (
        "Music Flamingo's rotation of its audio windows by their timestamps, and of time within them"
    ),
    "llama4_vision_model": "Llama 4's vision encoder's rotation of its patch grid's rows and columns",
    "efficientloftr": "EfficientLoFTR's rotation of its feature maps' coordinates",
    "eomt_dinov3": (
        "DINOv3's patch-grid rotation, which `AxialRotaryEmbedding.from_hf_config` reads from a "
        "'dinov3_vit' config"
    ),
}
MODEL_TYPES = tuple(sorted({*_hf_defaults.DEFAULTS, *_TEXT_MODEL_TYPES, *ENCODER_TYPES, *MECHANISMS}))


def _language_model_type(config, language):
    """The model type whose rules apply: the language model's (`text_config`'s where the config
    has one), or None for a config that names none."""
    text = config.get("text_config")
    text = as_dict(text) if text is not None else {}
    model_type = text.get("model_type") or language.get("model_type") or config.get("model_type")
    if model_type is None:
        return None
    if model_type not in MODEL_TYPES:
        raise ValueError(
            "`model_type` must be a model type of transformers 5.25 that rotates queries and keys "
            "(docs/porting.md lists them; a vision tower's axial rope is "
            "`AxialRotaryEmbedding`'s). Received: "
            f"model_type={model_type!r}, which tf_posenc has no rules for"
        )
    language_type = _TEXT_MODEL_TYPES.get(model_type, model_type)
    if language_type in MECHANISMS:
        raise ValueError(
            f"The positions of model_type={model_type!r} need a mechanism tf_posenc does not have: "
            f"{MECHANISMS[language_type]}."
        )
    return language_type


def _with_defaults(config, model_type):
    """`config` with every key tf_posenc reads that it omits filled in as its model's
    transformers config class fills it (`_hf_defaults`); a key given as null stays null."""
    defaults = _hf_defaults.DEFAULTS.get(model_type) or _hf_encoder_defaults.DEFAULTS[model_type]
    rope_keys = ("rope_parameters", "rope_theta", "rope_local_base_freq", "partial_rotary_factor")
    filled = dict(config)
    for key, value in defaults.items():
        if key == "head_dim" and model_type == "falcon":
            continue  # FalconConfig's `head_dim` is a property: hidden_size // num_attention_heads
        if key in ("layer_types", "per_layer_config") and model_type in ENCODER_TYPES:
            continue  # lists of the default layer count: derived for the config's own
        if key not in rope_keys:
            filled.setdefault(key, value)
    given = _rope_parameters(config)
    default_rope = defaults["rope_parameters"]
    if _is_nested(default_rope):  # Gemma 3, 3n, 4 and others: a rope per layer type
        if not given and not any(key in config for key in ("rope_theta", "rope_local_base_freq")):
            filled["rope_parameters"] = copy.deepcopy(default_rope)
        elif not _nested_layer_types(config, given) and "rope_local_base_freq" in defaults:  # Gemma 4.x
            filled.setdefault("rope_local_base_freq", defaults["rope_local_base_freq"])
            if given.get("rope_theta") is None:
                filled.setdefault("rope_theta", defaults["rope_theta"])
        return filled
    rope = given or dict(default_rope or {})
    if not given:
        filled["rope_parameters"] = rope
    if rope.get("rope_theta") is None and "rotary_emb_base" not in config and "rope_theta" in defaults:
        filled.setdefault("rope_theta", defaults["rope_theta"])  # (GPT-NeoX's old key aside)
    partials = ("partial_rotary_factor", "rotary_pct")
    if "partial_rotary_factor" in defaults and not any(
        config.get(key) is not None or given.get(key) is not None for key in partials
    ):
        filled["partial_rotary_factor"] = defaults["partial_rotary_factor"]
    return filled


def read(config):
    """`config` (a dict, a path, a checkpoint folder or a transformers config) as a dict: the
    language model's part of a multimodal config, with the keys it omits filled in as its
    model's transformers config class fills them. A model type without rules here is a
    `ValueError`."""
    whole = as_dict(config)
    if whole.get("model_type") in _ROTATING_PARTS:
        model_type = whole["model_type"]
        parts = " or ".join(f"`{key}`" for key in _ROTATING_PARTS[model_type])
        raise ValueError(
            f"A {model_type!r} config holds models that rotate differently: pass its {parts}. "
            f"Received: the whole config (model_type={model_type!r})"
        )
    if whole.get("model_type") in _hf_encoder_defaults.SUB_CONFIGS:
        # A composite config whose rotating part is one sub-config (PE Audio's `audio_config`).
        key, part_type = _hf_encoder_defaults.SUB_CONFIGS[whole["model_type"]]
        whole = {"model_type": part_type, **as_dict(whole.get(key) or {})}
    language = _language_model(whole)
    model_type = _language_model_type(whole, language)
    if model_type is None:
        return language
    # The language model's type, whose rules apply, also where a multimodal config keeps its
    # language model's keys at the top level under its own type (Qwen2-VL's 4.x configs).
    language = _older_encoder_keys({**language, "model_type": model_type})
    for ours, theirs in _hf_defaults.ATTRIBUTE_MAPS.get(model_type, {}).items():
        if language.get(ours) is None and language.get(theirs) is not None:
            language[ours] = language[theirs]  # GPT-J's `n_embd`, Zamba2's `attention_head_dim`, ...
    language = _with_defaults(language, model_type)
    modules_of = _hf_module_defaults.ALIASES.get(model_type)
    if modules_of is not None:
        # Its own class's defaults filled in, it is the type whose modules it runs (EXAONE 3 and
        # InternLM3 run Llama's): every rule of that type applies from here on.
        own = _hf_module_defaults.DEFAULTS.get(model_type, {})
        language = {**{k: v for k, v in own.items() if v is not None}, **language, "model_type": modules_of}
    return language


# Keys of older config.json files that the encoders' config classes convert (transformers 5.25's
# `__post_init__` and `convert_rope_params_to_dict`): read below, or refused where not.
_OLDER_ENCODER_KEYS = {
    "ultrabert": ("attention_windows", "rope_theta"),
    "neomme": ("rope_theta",),
    "t5gemma2_text": ("rope_local_base_freq", "rope_theta", "rope_scaling", "sliding_window_pattern"),
    "embedding_gemma2_text": ("num_global_key_value_heads",),
    "modernbert": ("rope_scaling",),
}


def _older_encoder_keys(config):
    """ModernBERT's `global_rope_theta` and `local_rope_theta`, and EmbeddingGemma 2's
    `global_head_dim`, as their config classes convert them (ModernBERT's `local_attention` is
    read with its window, `global_attn_every_n_layers` with its layer types); the other older
    keys of an encoder's config refused, naming them."""
    model_type = config["model_type"]
    given = [key for key in _OLDER_ENCODER_KEYS.get(model_type, ()) if config.get(key) is not None]
    if given:
        raise ValueError(
            f"The config of model_type={model_type!r} gives {', '.join(f'`{key}`' for key in given)}, "
            "keys of an older config.json that its transformers config class converts and tf_posenc "
            "does not: pass the config as transformers 5.25 reads it (`AutoConfig.from_pretrained(...)`, "
            "or its `to_dict()`). Received: " + ", ".join(f"{key}={config[key]!r}" for key in given)
        )
    if model_type == "modernbert":
        config = dict(config)
        rope = copy.deepcopy(_rope_parameters(config))
        for key, layer_type in (
            ("global_rope_theta", "full_attention"),
            ("local_rope_theta", "sliding_attention"),
        ):
            if config.get(key) is not None:
                entry = rope.setdefault(layer_type, {"rope_type": "default"})
                entry["rope_theta"] = _one(
                    "rope_theta", {key: config[key], "rope_parameters": entry.get("rope_theta")}
                )
        if rope:
            config["rope_parameters"] = rope
    if model_type == "embedding_gemma2_text" and config.get("per_layer_config") is None:
        config = {**config, "global_head_dim": config.get("global_head_dim") or 512}  # its builder's default
    return config


def no_rotation(config):
    """Why the model of `config` (a dict from `read`) rotates no query or key, or None where it
    does: a setting of its config that turns positions off (transformers 5.25's code)."""
    model_type = config.get("model_type")
    if model_type == "granitemoehybrid" and config.get("position_embedding_type") != "rope":
        return "its `position_embedding_type` is not 'rope'"
    if model_type == "esm" and config.get("position_embedding_type") != "rotary":
        return "its `position_embedding_type` is not 'rotary': a learned table is added to its inputs"
    if model_type == "zamba2" and not config.get("use_mem_rope"):
        return "its `use_mem_rope` is off"
    if model_type == "falcon" and config.get("alibi"):
        return "its `alibi` is on: an ALiBi bias on the scores instead (`tf_posenc.AlibiBias`)"
    if model_type == "glm5_next_text" or (
        model_type == "olmo_hybrid" and not (_rope_parameters(config) or config.get("rope_theta"))
    ):
        return "it has no rope parameters"
    return None


def inkling_config(config):
    """An Inkling 2 config (`inkling2` or `inkling2_text`; a dict, a path, a checkpoint folder
    or a transformers config) as the dict of its language model's bias keys, `layer_types`
    included, each omitted key filled in as `Inkling2TextConfig` fills it."""
    whole = as_dict(config)
    language = _language_model(whole)
    model_type = language.get("model_type") or whole.get("model_type")
    if model_type not in ("inkling2", "inkling2_text"):
        raise ValueError(
            "`config` must be an Inkling 2 config (model_type 'inkling2' or 'inkling2_text'). "
            f"Received: model_type={model_type!r}"
        )
    given = {key: value for key, value in language.items() if value is not None}
    filled = {**_hf_defaults.INKLING2_TEXT, **given}
    if "layer_types" not in given:
        layers = filled["num_hidden_layers"]
        filled["layer_types"] = [
            "hybrid" if (index + 1) % 6 == 0 else "hybrid_sliding" for index in range(layers)
        ]
    return filled


def encoder_layer_index(layer_index, layers):
    """`layer_index` checked to be a layer of an encoder of `layers` layers (None: not known)."""
    known = isinstance(layers, int) and layers > 0
    if (
        not isinstance(layer_index, int)
        or isinstance(layer_index, bool)
        or layer_index < 0
        or (known and layer_index >= layers)
    ):
        upper = f"0 .. {layers - 1}" if known else "a non-negative integer"
        raise ValueError(
            f"`layer_index` must be an encoder layer of the config, {upper}. "
            f"{_validation.received('layer_index', layer_index)}"
        )
    return layer_index


def read_plan(config):
    """`read`, for a per-layer plan: a composite config whose plan needs a mechanism tf_posenc
    lacks is refused under its own model type, before `read` takes its rotating part (Nemotron 3.5
    Transcribe's audio model runs its encoder, whose own plan is read, chunk by chunk)."""
    _refuse_plan(as_dict(config).get("model_type"))
    return read(config)


def _refuse_plan(model_type):
    if model_type in ENCODER_PLAN_MECHANISMS:
        raise ValueError(
            f"The per-layer plan of model_type={model_type!r} needs a mechanism tf_posenc does not "
            f"have: {ENCODER_PLAN_MECHANISMS[model_type]}. `RotaryEmbedding.from_hf_config` reads its "
            "rotation; give its layers their masks."
        )


def read_vision(config, model_type):
    """`config` as a dict, for a vision model of `model_type` (a config naming another model
    type is a `ValueError`)."""
    config = as_dict(config)
    given = config.get("model_type")
    if given is not None and given != model_type:
        raise ValueError(f"`model_type` must be {model_type!r}. Received: model_type={given!r}")
    return config


def _one(name, candidates, default=None):
    """The value of a setting that several keys may give (`candidates`: key -> value, None
    where absent); two different values are a contradiction."""
    given = {key: value for key, value in candidates.items() if value is not None}
    if len(set(given.values())) > 1:
        listed = ", ".join(f"{key}={value!r}" for key, value in given.items())
        raise ValueError(f"The config gives `{name}` twice, with different values. Received: {listed}")
    return next(iter(given.values()), default)


def _rope_parameters(config):
    """The config's rope parameters, `rope_parameters` (5.x) or `rope_scaling` (4.x), which may
    both be given only alike: the one place they are read."""
    new, old = config.get("rope_parameters"), config.get("rope_scaling")
    if new and old and new != old:
        raise ValueError(
            "The config has both `rope_parameters` and `rope_scaling`, and they differ. "
            f"Received: rope_parameters={new!r}, rope_scaling={old!r}"
        )
    return dict(new or old or {})


def _is_nested(parameters):
    """Whether rope parameters are given per layer type (a dict of dicts, or of None)."""
    return bool(parameters) and all(isinstance(value, dict) or value is None for value in parameters.values())


# Models whose rope parameters are nested by a label of their own, not by layer type: the label
# of each layer type's rope (DeepSeek-V4's attention modules' `rope_layer_type`).
_ROPE_LABELS = {
    "deepseek_v4": {
        "sliding_attention": "main",
        "compressed_sparse_attention": "compress",
        "heavily_compressed_attention": "compress",
    },
}


def _nested_layer_types(config, parameters):
    """The layer types whose rope parameters `parameters` nests (Gemma 3 and 4; DeepSeek-V4's
    by their labels, which name them too)."""
    labels = _ROPE_LABELS.get(config.get("model_type"), {})
    layer_types = (*_LAYER_TYPES, *(config.get("layer_types") or ()))
    if _is_nested(parameters):  # every key a layer type (Zaya's "hybrid", derived by its class)
        nested = list(parameters)
    else:
        nested = [key for key in parameters if key in layer_types or key in labels.values()]
    return nested + [kind for kind, label in labels.items() if label in parameters and kind not in nested]


def _layer_parameters(config, layer_type):
    """The rope parameters of the layers of `layer_type`, as a flat dict."""
    parameters = _rope_parameters(config)
    nested = _nested_layer_types(config, parameters)
    if not nested and config.get("model_type") in _ROPE_BY_LAYER_TYPE:
        kinds = sorted(set(layer_types_of(config))) or ["full_attention"]
        raise ValueError(
            f"The config's rope parameters must have an entry for each of its layer types {kinds} "
            f"(model_type={config['model_type']!r} reads them by layer type). Received: "
            f"rope_parameters={parameters!r}"
        )
    if nested or "rope_local_base_freq" in config:  # Gemma 3 and 4; Gemma 3 in the 4.x format
        choices = nested or list(_LAYER_TYPES)
        if layer_type not in choices:
            raise ValueError(
                f"The config's layers rotate differently by type: `layer_type` must be one of {choices}. "
                f"Received: layer_type={layer_type!r}"
            )
        if nested:
            layer_type = _ROPE_LABELS.get(config.get("model_type"), {}).get(layer_type, layer_type)
            if parameters[layer_type] is None:
                raise ValueError(
                    f"The config's {layer_type!r} layers have no rotary embedding (rope parameters None)."
                )
            return dict(parameters[layer_type])
        if layer_type == "sliding_attention":
            return {"rope_type": "default", "rope_theta": config["rope_local_base_freq"]}
        return parameters
    listed = set(layer_types_of(config)) or _possible_layer_types(config)
    if layer_type is not None and layer_type not in listed:
        raise ValueError(
            f"`layer_type` must be None or a layer type of the config, one of {sorted(listed)} (every "
            f"layer rotates alike). Received: layer_type={layer_type!r}"
        )
    return parameters


def _head_dim(config, layer_type):
    if config.get("qk_rope_head_dim"):  # DeepSeek: only this part of each head rotates
        return config["qk_rope_head_dim"]
    if layer_type == "full_attention" and config.get("global_head_dim"):  # Gemma 4's config.json
        return config["global_head_dim"]
    # Gemma 4's transformers config object: head sizes overridden per layer index.
    overrides = {int(index): layer for index, layer in (config.get("per_layer_config") or {}).items()}
    for index, kind in enumerate(config.get("layer_types") or ()):
        if kind == layer_type and overrides.get(index, {}).get("head_dim"):
            return overrides[index]["head_dim"]
    return _attention_head_dim(config, "rotary")


def _attention_head_dim(config, what):
    """The config's attention head size: `head_dim`, else `hidden_size // num_attention_heads`
    (`what` names the size in the error: "rotary" or "attention")."""
    if config.get("head_dim"):
        return config["head_dim"]
    if config.get("hidden_size") and config.get("num_attention_heads"):
        return config["hidden_size"] // config["num_attention_heads"]
    raise ValueError(
        f"The config must give the {what} head size: `head_dim`, or `hidden_size` and "
        "`num_attention_heads`. Received: none of them"
    )


def rotary_arguments(config, layer_type=None):
    """`RotaryEmbedding` constructor arguments for the rotary embedding `config` describes."""
    config = read(config)
    reason = no_rotation(config)
    if reason is not None:
        raise ValueError(
            f"The config's model (model_type={config.get('model_type')!r}) rotates no query or key: {reason}."
        )
    parameters = _layer_parameters(config, layer_type)
    given_type = _one(
        "rope_type", {"rope_type": parameters.get("rope_type"), "type": parameters.get("type")}, "default"
    )
    if config.get("model_type") == "phi3" and given_type == "yarn":
        given_type = "longrope"  # as transformers' Phi3Config reads Phi-3's old configs
    ntk_alpha = given_type == "dynamic" and bool(parameters.get("alpha"))
    if ntk_alpha:
        # HunYuan's "dynamic" with `alpha`: a static NTK base, rope_theta * alpha ** (d / (d - 2)),
        # at every position (its modeling code renames it "ntk_alpha"; `factor` is not read).
        given_type, parameters = "ntk", {**parameters, "factor": parameters["alpha"]}
        rope_type, scaled = "ntk", True
    else:
        rope_type, scaled = _rope_types.from_transformers_name(given_type)
    record = _rope_types.REGISTRY[rope_type]
    for key in record.hf_required:
        if (key != "factor" or scaled) and parameters.get(key) is None:
            raise ValueError(
                f"The config's rope parameters must give `{key}` for rope_type={given_type!r}. "
                f"Received: {parameters!r}"
            )
    head_dim = _head_dim(config, layer_type)
    partial = _one(
        "partial_rotary_factor",
        {
            "rope_parameters['partial_rotary_factor']": parameters.get("partial_rotary_factor"),
            "partial_rotary_factor": config.get("partial_rotary_factor"),
            "rotary_pct": config.get("rotary_pct"),
            # GPT-J's and CodeGen's rotated width, read where their code reads it.
            "rotary_dim": config["rotary_dim"] / head_dim
            if config.get("model_type") in _ROTARY_DIM and config.get("rotary_dim")
            else None,
        },
        1.0,
    )
    if config.get("qk_rope_head_dim") and partial != 1.0:
        # Mistral 4's factor is of the whole latent head: it leaves the `qk_rope_head_dim` that rotate.
        whole = (
            config.get("head_dim")
            or _hf_latent.default(config.get("model_type"), "head_dim")
            or config["qk_rope_head_dim"] + (config.get("qk_nope_head_dim") or 0)
        )
        if int(whole * partial) == config["qk_rope_head_dim"]:
            partial = 1.0
    max_positions = config.get("max_position_embeddings")
    # Phi-3 keeps its pretraining length at the top level, and transformers prefers that one.
    original = config.get("original_max_position_embeddings") or parameters.get(
        "original_max_position_embeddings"
    )
    if "original_max_position_embeddings" in record.reads:
        original = original or max_positions
        if original is None:
            raise ValueError(
                f"The config must give `original_max_position_embeddings` (or `max_position_embeddings`) "
                f"for rope_type={given_type!r}. Received: neither"
            )
    if "max_position_embeddings" in record.needs and max_positions is None:
        raise ValueError(
            f"The config must give `max_position_embeddings` for rope_type={given_type!r}. Received: none"
        )
    arguments = {
        "max_wavelength": parameters.get("rope_theta")
        or config.get("rope_theta")
        or config.get("rotary_emb_base")  # GPT-NeoX
        or 10000.0,  # transformers' default_theta
        "scaling_factor": parameters.get("factor") if scaled else None,
        "rope_type": rope_type,
        "layout": "interleave" if config.get("rope_interleave", _interleaves(config)) else "half",
        "partial_rotary_factor": float(partial),
        "max_position_embeddings": max_positions,
    }
    mrope = _MROPE.get(config.get("model_type"))
    if mrope is not None:
        # The section sizes their code defaults to where the config names none, and the way
        # their code lays the sections out (`mrope_interleaved` in a config is not read).
        default_section, interleaved = mrope
        arguments.update(
            mrope_section=list(parameters.get("mrope_section") or default_section),
            mrope_interleaved=interleaved,
        )
    elif parameters.get("mrope_section") is not None:
        arguments.update(
            mrope_section=list(parameters["mrope_section"]),
            mrope_interleaved=bool(parameters.get("mrope_interleaved", False)),
        )
    for name in record.reads:
        value = original if name == "original_max_position_embeddings" else parameters.get(name)
        # A key given as null means the default, as transformers reads it.
        arguments[name] = _rope_types.ARGUMENTS[name].default if value is None else value
    rotating = _rope_types.rotated_width(rope_type, head_dim, arguments["partial_rotary_factor"])
    if config.get("model_type") in _TWO_AXES:
        # NeoMME's rows: pair j turns by the row ids where j is even, the column ids where odd.
        arguments.update(mrope_section=[rotating // 4, rotating // 4], mrope_interleaved=True)
    if (
        rotating % 2
        and config.get("model_type") in _COSINES_WIDTH
        and arguments.get("denominator_dim") is None
    ):
        # These models rotate their cosines' width: `rotating + 1` features of an odd partial
        # width, at the exponents `2j / rotating` (GLM-4.5's defaults: 21 of a 42-wide head).
        factor = (rotating + 1) / head_dim
        while int(head_dim * factor) < rotating + 1:
            factor = math.nextafter(factor, 2.0)
        arguments.update(partial_rotary_factor=factor, denominator_dim=rotating)
    _rope_types.checked_head(arguments, head_dim, f"in the config, for its rotary head size {head_dim}")
    return arguments


def _interleaves(config):
    """Whether the model's code rotates interleaved pairs: transformers' default
    `rope_interleave` for the configs of DeepSeek-V3's attention, which omit it, and the models
    whose rotation pairs `2j` with `2j + 1` in their code."""
    return config.get("model_type") in _INTERLEAVED


# Rotary modules that take a row of ids per image axis, h and w, and turn pair j by the row ids
# where j is even, the column ids where odd (NeoMME's `recomposition_frequencies`).
_TWO_AXES = ("neomme",)

# The models whose code pairs feature 2j with 2j + 1 (transformers 5.25): Cohere's and GLM's
# `repeat_interleave`, Llama 4's and DeepSeek-V2's complex products, GPT-J's `rotate_every_two`,
# `apply_rotary_pos_emb_interleave`, and the DeepSeek-V3 attention's `rope_interleave` default.
# GLM-4.5 (glm4_moe) rotates halves.
_INTERLEAVED = frozenset(
    {
        "axk1",
        "axk2",
        "bailing_hybrid",
        "blt_local_decoder",
        "blt_local_encoder",
        "blt_patcher",
        "codegen",
        "cohere",
        "cohere2",
        "cohere2_moe",
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "deepseek_v4",
        "dots3_note_text",
        "ergo",
        "ernie4_5",
        "ernie4_5_moe",
        "glm",
        "glm4",
        "glm4_moe_lite",
        "glm4v_text",
        "glm_ocr_text",
        "glm_moe_dsa",
        "gptj",
        "helium",
        "hy_v4",
        "hy_v4_vl_text",
        "llama4",
        "llama4_text",
        "longcat_flash",
        "mistral4",
        "moonshine",
        "moonshine_streaming",
        "openai_privacy_filter",
        "pe_audio_encoder",
        "pe_audio_video_encoder",
        "pe_video_encoder",
        "youtu",
    }
)
# The models whose code rotates as many features as its cosines have (`rotary_dim =
# cos.shape[-1]`), which is one more than an odd `int(head_dim * partial_rotary_factor)`.
_COSINES_WIDTH = (
    "bamba",
    "glm",
    "glm4",
    "glm4_moe",
    "glm4v_text",
    "glm4v_moe_text",
    "glm_ocr_text",
    "gpt_neox",
    "laguna",
    "mimo_v2_flash",
    "minimax_m2",
    "minimax_m3_vl_text",
    "phi3",
    "phi4_multimodal",
    "qwen3_5_text",
    "qwen3_5_moe_text",
    "qwen3_next",
    "qwen4_exp_text",
    "recurrent_gemma",
    "zaya",
)
# The models whose rotated width is `rotary_dim` features (the first), not a factor.
_ROTARY_DIM = ("gptj", "codegen")
# The models whose rotary module reads its rope parameters by layer type only (Cohere
# Compass's config class defaults to none, which its module cannot build from).
_ROPE_BY_LAYER_TYPE = ("cohere_compass_text",)
# The multimodal language models whose rotary module always takes M-RoPE's three rows of ids:
# the sections their code uses where the config names none, and whether their
# `recomposition_frequencies` interleaves them (Qwen3-VL's t, h, w, t, h, w, ...) or lays
# them out one after another (Qwen2-VL's). transformers 5.25 reads no `mrope_interleaved`.
_MROPE = {
    "cohere_compass_text": ([24, 20, 20], True),
    "cosmos3_edge_text": ([24, 20, 20], True),
    "glm4v_moe_text": ([8, 12, 12], False),
    "glm4v_text": ([8, 12, 12], False),
    "glm_ocr_text": ([8, 12, 12], False),
    "hy_v4_vl_text": ([24, 20, 20], True),
    "paddleocr_vl_text": ([16, 24, 24], False),
    "qwen2_5_omni_text": ([16, 24, 24], False),
    "qwen2_5_vl_text": ([16, 24, 24], False),
    "qwen2_vl_text": ([16, 24, 24], False),
    "qwen3_5_moe_text": ([11, 11, 10], True),
    "qwen3_5_text": ([11, 11, 10], True),
    "qwen3_omni_moe_text": ([24, 20, 20], True),
    "qwen3_vl_moe_text": ([24, 20, 20], True),
    "qwen3_vl_text": ([24, 20, 20], True),
    "qwen4_exp_text": ([11, 11, 10], True),
}


# Each model type's rules (transformers 5.24's config classes and attention modules); the keys a
# config.json omits are filled in first (`_hf_defaults`).
_ATTENTION_TYPES = (
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "indexed_attention",  # with a sparse indexer (DeepSeek-V3.2): positions as in full attention
    "hybrid",  # Falcon-H1's and Zamba2's attention blocks, Zaya's full layers
    "hybrid_sliding",  # Zaya's sliding layers
)
_SLIDING_TYPES = ("sliding_attention", "hybrid_sliding")
# Layers that no position reaches: linear attention, state-space and recurrent blocks, convolutions.
_NO_POSITIONS = ("linear_attention", "mamba", "recurrent", "conv", "mlp")
# Models whose full-attention layers do not rotate: only their sliding layers do (or, for the
# second group, only once the config sets `sliding_window`).
_SLIDING_LAYERS_ROTATE = ("cohere2", "cohere2_moe", "afmoe", "ergo", "flint", "lara_mini")
_SLIDING_LAYERS_ROTATE_WITH_WINDOW = ("exaone4", "exaone_moe", "kolibri1")
# Layer types without rotation in a model whose other layers rotate.
_UNROTATED_LAYER_TYPES = {"kolibri1_1": ("indexed_attention",)}
# Model types whose rows `RotaryEmbedding.from_hf_config` reads, but whose attention layers need
# a mechanism `hf_attention_layers` does not have.
PLAN_MECHANISMS = {
    "deepseek_v4": (
        "DeepSeek-V4's compressed attention: its compressed layers also attend to learned compressions "
        "of windows of keys (each rotated at its window's first position, and chosen by a learned "
        "indexer on its sparse layers), and every layer takes per-head sinks (docs/porting.md shows "
        "its rotations, the inverse one of the output included)"
    ),
    "beam": "Beam's query temperature (1 + (position + 1) / 2048) ** 0.1 on its layers without rotation",
    "unlimited_ocr_text": "a window that keeps every prompt and image token (`reference_sliding_attention`)",
    "muse_glimmer_text": "queries multiplied by `qk_scale_factor` after a norm without scale",
    "muse_spark_text": "queries multiplied by `qk_scale_factor` after a norm without scale",
    "minimax_m3_vl_text": "MiniMax-M3's attention layers",
}
# Layers of every `pattern`-th index full, the others sliding, where `layer_types` is absent.
_PATTERN_DEFAULTS = {
    "gemma2": 2,
    "gpt_oss": 2,
    "gemma3": 6,
    "gemma3_text": 6,
    "gemma3n": 5,
    "gemma3n_text": 5,
    "cohere2": 4,
}
_MAX_WINDOW_LAYERS = ("qwen2", "qwen3", "qwen2_5_omni_talker")
# Models without layer types whose mask slides on every layer once `sliding_window` is set.
_EVERY_LAYER_SLIDES = (
    "mistral", "mixtral", "ministral3", "phi3", "phi4_multimodal", "phimoe", "starcoder2", "qwen3_moe",
    "minimax", "voxtral_realtime_text",
)  # fmt: skip
_USE_SLIDING_WINDOW = ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "smollm3", "qwen2_5_omni_talker")
_NO_ROPE_LAYERS = ("llama4", "llama4_text", "smollm3")
_KV_SHARING = ("gemma3n", "gemma3n_text", "gemma4", "gemma4_text")
_GEMMA4_TYPES = ("gemma4", "gemma4_text", "gemma4_unified_text", "diffusion_gemma_text")


class LayerEntry(NamedTuple):
    """One decoder layer's position side, in plain Python: whether it rotates, with the rope
    of which layer type (`None`: the config's only rope), its window, chunk, temperature
    (`(floor_scale, attn_scale, offset)` or None), whether it is causal, its softmax scale,
    the layer whose keys and values it reuses (or None), and whether it is self-attention at
    all (a linear-attention, state-space or cross-attention layer has no positions)."""

    rotates: bool
    rope_key: str | None
    sliding_window: int | None
    chunk_size: int | None
    temperature: tuple | None
    causal: bool
    scaling: float | None
    kv_shared_layer_index: int | None
    self_attention: bool = True


def _count(config):
    layers = config.get("num_hidden_layers")
    if layers is None:
        raise ValueError("The config must give `num_hidden_layers`. Received: none")
    return _validation.positive_int("num_hidden_layers", layers)


def _no_rope_layers(config):
    """Llama 4's and SmolLM3's `no_rope_layers`: 1 where the layer rotates. An absent (or, for
    Llama 4, empty) list means every `no_rope_layer_interval`-th layer (default 4) does not."""
    layers = _count(config)
    given = config.get("no_rope_layers")
    if given is None or (not given and config.get("model_type") != "smollm3"):
        interval = config.get("no_rope_layer_interval") or 4
        return [int((index + 1) % interval != 0) for index in range(layers)]
    if len(given) != layers:
        raise ValueError(
            f"The config's `no_rope_layers` must have one entry per layer (num_hidden_layers={layers}). "
            f"Received: len(no_rope_layers)={len(given)}"
        )
    return [int(value) for value in given]


def _sliding_window(config):
    """The window of the config's sliding layers, after its config class's rules."""
    model_type = config.get("model_type")
    window = config.get("sliding_window")
    if model_type in _USE_SLIDING_WINDOW and not config.get("use_sliding_window", False):
        return None  # Qwen2 and SmolLM3 set a window only with `use_sliding_window`
    return window


def _every(interval, default, other, then):
    """The rule and its key: layer `i` is `then` on every `interval`-th layer (counting from 1,
    `default` where the config omits the key), `other` elsewhere."""
    return {interval: default}, lambda i, n, keys: then if (i + 1) % keys[interval] == 0 else other


def _last_layer_full(rule):
    """`rule`, with the last layer full attention (Gemma 4's, DiffusionGemma's and Beam's
    classes force it)."""
    return lambda i, n, keys: "full_attention" if i == n - 1 else rule(i, n, keys)


def _cohere2_moe(i, n, keys):
    dense = keys["first_k_dense_replace"]
    if i < dense:
        return (
            "sliding_attention" if (i + 1) % keys["prefix_dense_sliding_window_pattern"] else "full_attention"
        )
    return "sliding_attention" if (i - dense + 1) % keys["sliding_window_pattern"] else "full_attention"


def _muse(i, n, keys):
    return "full_attention" if (n - 1 - i) % 4 == 0 else "sliding_attention"


# Rules several classes share.
_FIVE_SLIDING_THEN_FULL_LAST_FULL = (  # Gemma 4's, DiffusionGemma's and Beam's
    {},
    _last_layer_full(lambda i, n, keys: "sliding_attention" if (i + 1) % 6 else "full_attention"),
)
_FULL_THEN_THREE_SLIDING = ({}, lambda i, n, keys: "sliding_attention" if i % 4 else "full_attention")
_QWEN_HYBRID = _every("full_attention_interval", 4, "linear_attention", "full_attention")
_EXAONE = _every("sliding_window_pattern", 4, "sliding_attention", "full_attention")

# How a config class derives `layer_types` where a config omits them (transformers 5.25): the
# keys the rule reads, with the class's defaults, and the type of layer `i` of `n`. Counts and
# keys other than the defaults follow the rule, as the class follows it.
_LAYER_TYPE_RULES = {
    "afmoe": _every("global_attn_every_n_layers", 4, "sliding_attention", "full_attention"),
    "embedding_gemma2_text": (
        {"sliding_window_pattern": 6},
        _last_layer_full(
            lambda i, n, keys: (
                "sliding_attention" if (i + 1) % keys["sliding_window_pattern"] else "full_attention"
            )
        ),
    ),
    "modernbert": (  # full on layers 0, n, 2n, ...
        {"global_attn_every_n_layers": 3},
        lambda i, n, keys: (
            "sliding_attention" if i % keys["global_attn_every_n_layers"] else "full_attention"
        ),
    ),
    "ultrabert": ({}, lambda i, n, keys: "sliding_attention" if (i + 1) % 3 else "full_attention"),
    "axk2": ({}, lambda i, n, keys: "indexed_attention"),
    "bailing_hybrid": _every("layer_group_size", 6, "linear_attention", "full_attention"),
    "bamba": (
        {"attn_layer_indices": None},
        lambda i, n, keys: (
            "full_attention" if i in (keys["attn_layer_indices"] or ()) else "linear_attention"
        ),
    ),
    "beam": _FIVE_SLIDING_THEN_FULL_LAST_FULL,
    "cohere2_moe": (
        {"sliding_window_pattern": 4, "prefix_dense_sliding_window_pattern": 1, "first_k_dense_replace": 0},
        _cohere2_moe,
    ),
    "cwm": _FULL_THEN_THREE_SLIDING,
    "deepseek_v32": ({}, lambda i, n, keys: "indexed_attention"),
    "diffusion_gemma_text": _FIVE_SLIDING_THEN_FULL_LAST_FULL,
    "ergo": _every("global_attention_every_n_layers", 4, "sliding_attention", "full_attention"),
    "exaone4": _EXAONE,
    "exaone_moe": _EXAONE,
    "falcon_h1": ({}, lambda i, n, keys: "hybrid"),
    "flint": (
        {},
        lambda i, n, keys: "full_attention" if i < 2 or i % 4 == 1 or i == n - 1 else "sliding_attention",
    ),
    "gemma4_text": _FIVE_SLIDING_THEN_FULL_LAST_FULL,
    "gemma4_unified_text": _FIVE_SLIDING_THEN_FULL_LAST_FULL,
    "glm5_next_text": ({}, lambda i, n, keys: "indexed_attention" if i % 4 == 3 else "linear_attention"),
    "glm_moe_dsa": ({}, lambda i, n, keys: "indexed_attention"),
    "granite_swa": _FULL_THEN_THREE_SLIDING,
    "granitemoe_swa": _FULL_THEN_THREE_SLIDING,
    "granitemoehybrid": ({}, lambda i, n, keys: "linear_attention"),
    "hy_v4": ({}, lambda i, n, keys: "indexed_attention"),
    "hy_v4_vl_text": ({}, lambda i, n, keys: "indexed_attention"),
    "kolibri1": ({}, lambda i, n, keys: "full_attention" if (i + 1) % 5 == 0 else "sliding_attention"),
    "kolibri1_1": ({}, lambda i, n, keys: "indexed_attention" if (i + 1) % 5 == 0 else "sliding_attention"),
    "lara_mini": (
        {},
        lambda i, n, keys: (
            "linear_attention",
            "sliding_attention",
            "linear_attention",
            "full_attention",
            "sliding_attention",
        )[i % 5],
    ),
    "lfm2": (
        {"full_attn_idxs": None},
        lambda i, n, keys: (
            "full_attention" if keys["full_attn_idxs"] is None or i in keys["full_attn_idxs"] else "conv"
        ),
    ),
    "lfm3": (
        {},
        lambda i, n, keys: (
            "full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i > 0 else "conv"
        ),
    ),
    "mimo_v2_flash": (
        {},
        lambda i, n, keys: "full_attention" if i == 0 or (i + 1) % 6 == 0 else "sliding_attention",
    ),
    "minimax": ({}, lambda i, n, keys: "full_attention" if (i + 1) % 2 else "linear_attention"),
    "ministral": (
        {"sliding_window": 4096},
        lambda i, n, keys: "full_attention" if keys["sliding_window"] is None else "sliding_attention",
    ),
    "modernbert-decoder": (
        {"global_attn_every_n_layers": 3},
        lambda i, n, keys: (
            "sliding_attention" if i % keys["global_attn_every_n_layers"] else "full_attention"
        ),
    ),
    "muse_glimmer_text": ({}, _muse),
    "muse_spark_text": ({}, _muse),
    "olmo3": ({}, lambda i, n, keys: "sliding_attention" if (i + 1) % 4 else "full_attention"),
    "olmo_hybrid": (
        {},
        lambda i, n, keys: "full_attention" if i % 4 == 3 or (n < 4 and i == n - 1) else "linear_attention",
    ),
    "qwen3_5_moe_text": _QWEN_HYBRID,
    "qwen3_5_text": _QWEN_HYBRID,
    "qwen3_next": _QWEN_HYBRID,
    "qwen4_exp_text": _every("full_attention_interval", 4, "linear_attention", "indexed_attention"),
    "recurrent_gemma": (
        {"block_types": ("recurrent", "recurrent", "attention")},
        lambda i, n, keys: (
            "linear_attention"
            if keys["block_types"][i % len(keys["block_types"])] == "recurrent"
            else "sliding_attention"
        ),
    ),
    "vaultgemma": ({}, lambda i, n, keys: "sliding_attention" if (i + 1) % 2 else "full_attention"),
    "zaya": ({}, lambda i, n, keys: "hybrid"),
}


def _derived_layer_types(config):
    """The layer types `config`'s class derives by its rule, or None for a class without one."""
    model_type = config.get("model_type")
    if model_type not in _LAYER_TYPE_RULES:
        return None
    defaults, rule = _LAYER_TYPE_RULES[model_type]
    keys = {key: config.get(key, default) for key, default in defaults.items()}
    for key, value in keys.items():
        if key.endswith(("interval", "n_layers", "pattern", "size")) and not (
            isinstance(value, int) and value > 0
        ):
            raise ValueError(f"`{key}` must be a positive integer. Received: {key}={value!r}")
    layers = _count(config)
    return [rule(index, layers, keys) for index in range(layers)]


def layer_types_of(config):
    """Each decoder layer's attention type: `layer_types`, or the default its model's config
    class derives; empty for a config that gives neither a list nor its number of layers."""
    listed = config.get("layer_types")
    model_type = config.get("model_type")
    if listed is None and config.get("num_hidden_layers") is not None:
        listed = _derived_layer_types(config)
    derived = _hf_defaults.default_layer_types(model_type)
    if listed is None and derived is not None:
        if config.get("num_hidden_layers") not in (None, len(derived)):
            raise ValueError(
                f"The config must give `layer_types`: model_type={model_type!r} derives them by a rule of "
                f"its config class, which tf_posenc reads at the default {len(derived)} layers only. "
                f"Received: num_hidden_layers={config['num_hidden_layers']} and no `layer_types`"
            )
        listed = derived
    if listed is not None and model_type == "dory" and set(listed[1::2]) == {"mlp"}:
        return list(listed[::2])  # Dory counts an attention block and an MLP block per decoder layer
    if listed is not None:
        if config.get("num_hidden_layers") is not None and len(listed) != config["num_hidden_layers"]:
            raise ValueError(
                "The config's `layer_types` must have one entry per layer "
                f"(num_hidden_layers={config['num_hidden_layers']}). Received: len(layer_types)={len(listed)}"
            )
        return list(listed)
    if config.get("num_hidden_layers") is None:
        return []
    layers = _count(config)
    if model_type in _PATTERN_DEFAULTS:
        pattern = config.get("sliding_window_pattern") or _PATTERN_DEFAULTS[model_type]
        return ["sliding_attention" if (index + 1) % pattern else "full_attention" for index in range(layers)]
    if model_type in _MAX_WINDOW_LAYERS:
        window, first = _sliding_window(config), config.get("max_window_layers")
        return [
            "sliding_attention" if window is not None and index >= first else "full_attention"
            for index in range(layers)
        ]
    if model_type == "qwen2_moe":  # every other layer below `max_window_layers`
        sliding, first = config.get("use_sliding_window", False), config.get("max_window_layers")
        return [
            "sliding_attention" if sliding and (index + 1) % 2 and index < first else "full_attention"
            for index in range(layers)
        ]
    if model_type in ("llama4", "llama4_text"):
        chunked = config.get("attention_chunk_size") is not None
        return [
            "chunked_attention" if rotates and chunked else "full_attention"
            for rotates in _no_rope_layers(config)
        ]
    if model_type == "smollm3":
        sliding = config.get("use_sliding_window", False) and config.get("sliding_window") is not None
        return [
            "sliding_attention" if sliding and not rotates else "full_attention"
            for rotates in _no_rope_layers(config)
        ]
    return ["full_attention"] * layers


def _possible_layer_types(config):
    """The layer types a config without `layer_types` or a layer count may have."""
    model_type = config.get("model_type")
    if model_type in (*_PATTERN_DEFAULTS, *_MAX_WINDOW_LAYERS, "qwen2_moe", "smollm3"):
        return {"full_attention", "sliding_attention"}
    if model_type in ("llama4", "llama4_text"):
        return {"full_attention", "chunked_attention"}
    return {"full_attention"}


def attention_layers(config):
    """One `LayerEntry` per decoder layer of `config` (a dict from `read`), as transformers
    5.25's attention modules decide them."""
    model_type = config.get("model_type")
    _refuse_plan(model_type)
    if model_type in ENCODER_TYPES and model_type not in _ENCODER_PLANS:
        raise ValueError(
            f"The per-layer plan of model_type={model_type!r} (not a decoder) is not read: build its "
            "layers' rotation with `RotaryEmbedding.from_hf_config`, and give them its masks."
        )
    if model_type in _ENCODER_PLANS:
        return _encoder_layers(config)
    if model_type in PLAN_MECHANISMS:
        raise ValueError(
            f"The attention layers of model_type={model_type!r} need a mechanism tf_posenc does not "
            f"have: {PLAN_MECHANISMS[model_type]}. `RotaryEmbedding.from_hf_config` reads its rotation."
        )
    types = layer_types_of(config) or ["full_attention"] * _count(config)
    unknown = sorted(set(types) - set(_ATTENTION_TYPES) - set(_NO_POSITIONS))
    if unknown:
        raise ValueError(
            f"The config's `layer_types` must hold attention types {_ATTENTION_TYPES}, or the types "
            f"of layers without positions {_NO_POSITIONS}. Received: layer types {unknown}"
        )
    parameters = _rope_parameters(config)
    per_type = bool(_nested_layer_types(config, parameters)) or "rope_local_base_freq" in config
    rotating = _rotating_layers(config, types, parameters)
    cross = set(config.get("cross_attention_layers") or ())  # Mllama's layers attending to the image
    window = _sliding_window(config)
    bidirectional = config.get("use_bidirectional_attention")
    if model_type in _GEMMA4_TYPES and bidirectional == "vision":
        # Causal for text; transformers lets an image's tokens see each other, which is the
        # attention mask the caller gives (`attention_mask`), not a rule of the positions.
        bidirectional = False
    causal = not bidirectional
    if not causal and model_type not in ("gemma3", "gemma3_text", *_GEMMA4_TYPES):
        raise ValueError(
            "`use_bidirectional_attention` is read for Gemma 3 (EmbeddingGemma) and Gemma 4 only: its "
            f"mask rule elsewhere is not known here. Received: model_type={model_type!r}"
        )
    if not causal and window is not None:
        # Gemma 3's bidirectional window: |q - k| <= W // 2. Gemma 4's "all": its config class
        # makes the window W // 2 + 1, which transformers' bidirectional mask keeps inclusive.
        window = window // 2 + (1 if model_type in _GEMMA4_TYPES else 0)
    scale = _softmax_scale(config, parameters)
    entries = []
    for index, (kind, rotates) in enumerate(zip(types, rotating, strict=True)):
        if kind in _NO_POSITIONS or index in cross:
            entries.append(LayerEntry(False, None, None, None, None, causal, None, None, False))
            continue
        if model_type in _EVERY_LAYER_SLIDES:
            layer_window = window  # its mask takes the config's window on every layer
        else:
            layer_window = window if kind in _SLIDING_TYPES else None
        chunk = config.get("attention_chunk_size") if kind == "chunked_attention" else None
        temperature = None
        if model_type in ("llama4", "llama4_text") and not rotates and config.get("attn_temperature_tuning"):
            temperature = (config["floor_scale"], config["attn_scale"], 1, True)  # at the cache's slots
        if parameters.get("llama_4_scaling_beta") is not None:
            # Ministral 3's and Mistral 4's: Llama 4's rule on every layer, from position 0
            # (`get_llama_4_attn_scale`).
            original = parameters.get("original_max_position_embeddings") or config.get(
                "original_max_position_embeddings"
            )
            temperature = (original, parameters["llama_4_scaling_beta"], 0)
        layer_scale = scale
        if _hf_latent.is_latent(model_type):  # dots.llm3's heads have their size per layer
            layer_scale = _hf_latent.softmax_scale(_hf_latent.layer_config(config, index), parameters)
        entries.append(
            LayerEntry(
                bool(rotates),
                kind if per_type else None,
                layer_window,
                chunk,
                temperature,
                causal,
                layer_scale,
                None,
            )
        )
    return [
        entry._replace(kv_shared_layer_index=source)
        for entry, source in zip(entries, _kv_sources(config, types), strict=True)
    ]


# The encoders (and speech decoders) whose plan is read: whether they are causal, and which of
# their layers slide (`|q - k| <= sliding_window` both ways: transformers'
# `create_bidirectional_sliding_window_mask`): those of type "sliding_attention", or every layer.
_ENCODER_PLANS = {
    "csm": (True, None),
    "embedding_gemma2_text": (False, "sliding_attention"),
    "esmc": (False, None),
    "eurobert": (False, None),
    "gte": (False, None),
    "higgs_audio_v2": (True, None),
    "jina_embeddings_v3": (False, None),
    "modernbert": (False, "sliding_attention"),
    "nomic_bert": (False, None),
    "openai_privacy_filter": (False, "every layer"),
    "ultrabert": (False, "sliding_attention"),
    # Speech and audio models, and ESM: their causal windows keep `0 <= q - k < sliding_window`
    # (transformers' `create_sliding_window_causal_mask`).
    "blt_patcher": (True, "every layer"),
    "csm_depth_decoder_model": (True, None),
    "dia_encoder": (False, None),
    "dia_decoder": (True, None),  # its self-attention layers (its cross-attention is not positioned)
    "dots3_note_audio_encoder": (False, None),
    "esm": (False, None),
    "glmasr_encoder": (False, None),
    "gradium_phonon_tts": (True, None),
    "lasr_encoder": (False, None),
    "mimi": (True, "every layer"),  # each of its two transformers, encoder and decoder
    "mimi_decoder": (True, "every layer"),
    "mimi_encoder": (True, "every layer"),
    "neomme": (False, "per layer"),  # `_neomme_windows`
    "nemotron3_5_transcribe_asr_audio": (False, None),
    "nemotron3_5_transcribe_word_timestamp": (False, None),
    "nemotron3_diarization_audio": (False, None),
    "pe_audio_encoder": (False, None),
    "pe_video_encoder": (False, None),
    "pe_audio_video_encoder": (False, None),
    "pocket_tts": (True, None),
    "pocket_tts_audio_tokenizer": (True, "every layer"),  # each of its two transformers
    "pocket_tts_audio_tokenizer_decoder": (True, "every layer"),
    "pocket_tts_audio_tokenizer_encoder": (True, "every layer"),
    "qwen2_5_omni_talker": (True, "sliding_attention"),
    "qwen3_omni_moe_talker_code_predictor": (True, None),
    "qwen3_omni_moe_talker_text": (True, None),  # its `sliding_window` is read by no layer
    "voxtral_realtime_encoder": (True, "every layer, if set"),  # causal on every layer without one
}
# Encoders and speech models whose per-layer plan needs a mechanism tf_posenc lacks.
_CHUNKED_RUNS = "an encoder run chunk by chunk with left and right context, positions restarting at 0"
_BY_HEAD = "a rotation of each head by its head's index, not by position (it leaves q . k as it is)"
_PREFIX = "a bidirectional prefix of `num_patches` image tokens, causal after it"
ENCODER_PLAN_MECHANISMS = {
    "deepseek_ocr2_encoder": _PREFIX,
    "deepseek_ocr2_vision": _PREFIX,
    "moonshine": "an encoder and a decoder in one config (bidirectional, then causal), both rotating",
    "moonshine_streaming": "a (left, right) window per encoder layer and a causal decoder, in one config",
    "nemo_speechlm": _CHUNKED_RUNS,
    "nemotron3_5_transcribe_audio": _CHUNKED_RUNS,
    "nemotron3_diarization": _CHUNKED_RUNS,
    "blt_local_decoder": "self-attention in its encoder's window, between cross-attention to BLT's patches",
    "blt_local_encoder": "self-attention within a window, between cross-attention to BLT's patches",
    "muse_glimmer_assistant": "a block of noise queries against the context's keys, windowed by its cache",
    "neucodec": _BY_HEAD,
    "qwen2_5_omni_dit": "block masks that look a number of blocks back and ahead, per layer",
    "qwen2_5_omni_token2wav": "block masks that look a number of blocks back and ahead, per layer",
    "t5gemma2_encoder": "an asymmetric sliding window, `-(W // 2) <= q - k <= (W + 1) // 2 - 1`",
    "t5gemma2_text": "an asymmetric sliding window, `-(W // 2) <= q - k <= (W + 1) // 2 - 1`",
    "t5_gemma_module": "one config for T5Gemma's encoder (bidirectional) and decoder (causal)",
    "timesfm2_5": "a learned per-dimension query scale (its attention is given `scaling=1`)",
    "xcodec2": _BY_HEAD,
}


# NeoMME's longer window, every other sliding layer's (a class attribute of its config).
_NEOMME_LONG_WINDOW = 1024


def _neomme_windows(config):
    """NeoMME's layer types and each layer's window (None: full), as its config class derives
    them: a full layer every sixth and last; windows from `per_layer_config`, which overrides the
    config's `sliding_window` layer by layer, or without one, every other sliding layer's long."""
    count = _count(config)
    types = config.get("layer_types") or [
        "full_attention" if (index + 1) % 6 == 0 or index == count - 1 else "sliding_attention"
        for index in range(count)
    ]
    given = config.get("per_layer_config")
    if given is None:
        windows, sliding = [], 0
        for kind in types:
            if kind == "full_attention":
                windows.append(None)
                continue
            windows.append(_NEOMME_LONG_WINDOW if sliding % 2 else config.get("sliding_window"))
            sliding += 1
        return types, windows
    overrides = {int(index): layer or {} for index, layer in given.items()}
    windows = [
        overrides.get(index, {}).get("sliding_window", config.get("sliding_window")) for index in range(count)
    ]
    return types, windows


def _encoder_layers(config):
    causal, sliding = _ENCODER_PLANS[config["model_type"]]
    if sliding == "per layer":
        types, windows = _neomme_windows(config)
    else:
        types = layer_types_of(config) or ["full_attention"] * _count(config)
        windows = _encoder_windows(config, sliding, types)
    parameters = _rope_parameters(config)
    per_type = bool(_nested_layer_types(config, parameters))
    scale = _softmax_scale(config, parameters)
    rotates = no_rotation(config) is None
    return [
        LayerEntry(rotates, kind if per_type else None, window, None, None, causal, scale, None)
        for kind, window in zip(types, windows, strict=True)
    ]


def _encoder_windows(config, sliding, types):
    """Each layer's window (None: none) by the plan's rule `sliding` (`_ENCODER_PLANS`)."""
    window = config.get("sliding_window")
    if config["model_type"] == "modernbert":  # `local_attention` is the whole window; the mask's is half
        window = _one(
            "sliding_window",
            {"local_attention // 2": config["local_attention"] // 2, "sliding_window": window},
        )
    if sliding is None and "sliding_attention" in types:
        raise ValueError(
            f"`layer_types` must not hold 'sliding_attention' for model_type={config['model_type']!r}: its "
            "layers do not slide in transformers 5.25 (Qwen3-Omni's code predictor fails on one). "
            f"Received: layer_types={types}"
        )
    windows = []
    for kind in types:
        slides = sliding == "every layer" or kind == sliding
        if sliding == "every layer, if set":
            slides = window is not None
        if slides and window is None:
            raise ValueError(
                f"The config's sliding layers need its `sliding_window`. Received: none (layer type {kind!r})"
            )
        windows.append(window if slides else None)
    return windows


def _rotating_layers(config, types, parameters):
    """1 for each layer that rotates, 0 for one that does not, by its model type's rule."""
    model_type = config.get("model_type")
    if no_rotation(config) is not None:
        return [0] * len(types)
    if model_type in _NO_ROPE_LAYERS:
        return _no_rope_layers(config)
    sliding_only = model_type in _SLIDING_LAYERS_ROTATE or (
        model_type in _SLIDING_LAYERS_ROTATE_WITH_WINDOW and config.get("sliding_window") is not None
    )
    unrotated = _UNROTATED_LAYER_TYPES.get(model_type, ())
    thetas = config.get("layer_rope_theta")  # Granite's per-layer bases: 0 for no rotation
    if thetas is not None:
        if len(thetas) != len(types):
            raise ValueError(
                f"The config's `layer_rope_theta` must have one entry per layer ({len(types)}). "
                f"Received: len(layer_rope_theta)={len(thetas)}"
            )
        bases = {float(theta) for theta in thetas if theta}
        base = parameters.get("rope_theta") or config.get("rope_theta")
        if bases - {float(base or 0)}:
            raise ValueError(
                "The config's `layer_rope_theta` must give each rotating layer the config's own "
                f"`rope_theta` ({base}): tf_posenc reads one base per layer type. Received: {sorted(bases)}"
            )
    # A layer type whose nested rope parameters are None does not rotate (Beam's full layers).
    unrotated = (
        *unrotated,
        *(kind for kind in _nested_layer_types(config, parameters) if parameters[kind] is None),
    )
    forced = _forced_rope_layers(config, len(types))
    rotating = []
    for index, kind in enumerate(types):
        rotates = not (sliding_only and kind not in _SLIDING_TYPES) and kind not in unrotated
        if thetas is not None and not thetas[index]:
            rotates = False
        rotating.append(int(rotates or index in forced))
    return rotating


def _forced_rope_layers(config, count):
    """The full layers that rotate all the same, where the attention module reads the dense
    prefix's pattern and the MLP types (printed `MODULE_READS`): Cohere2-MoE's `force_rope`, a
    layer whose MLP is dense while `prefix_dense_sliding_window_pattern` is 1 (transformers 5.25's
    `Cohere2MoeAttention`); its config class derives the dense layers from `first_k_dense_replace`
    where `mlp_layer_types` is not given."""
    reads = set(_hf_module_defaults.MODULE_READS.get(config.get("model_type"), ()))
    if not {"prefix_dense_sliding_window_pattern", "mlp_layer_types"} <= reads:
        return set()
    if (config.get("prefix_dense_sliding_window_pattern") or 1) != 1:
        return set()
    mlp = config.get("mlp_layer_types")
    if mlp is None:
        dense = config.get("first_k_dense_replace") or 0
        mlp = ["dense" if index < dense else "sparse" for index in range(count)]
    return {index for index, kind in enumerate(mlp) if kind == "dense"}


def is_latent_attention(config):
    """Whether the model of `config` (a dict from `read`) has DeepSeek's latent attention."""
    model_type = config.get("model_type")
    return _hf_latent.is_latent(_hf_module_defaults.ALIASES.get(model_type, model_type))


def _softmax_scale(config, parameters):
    """The `self.scaling` of the model's attention modules: what multiplies `q . k`."""
    model_type = config.get("model_type")
    if "query_pre_attn_scalar" in _hf_defaults.DEFAULTS.get(model_type, {}):
        # Every config class of transformers 5.25 with the key (Gemma 2 and 3, VaultGemma,
        # Step 3.5, T5Gemma 2) has modules that scale by it: read wherever the class has it.
        return config["query_pre_attn_scalar"] ** -0.5
    if model_type in (*_KV_SHARING, "gemma4_unified_text", "diffusion_gemma_text", "embedding_gemma2_text"):
        return 1.0  # Gemma 3n and 4 (and EmbeddingGemma 2) normalise their queries and keys instead
    if model_type == "esm":
        return 1.0  # ESM scales its queries by head_dim ** -0.5 before it rotates them
    if model_type in ("dia_encoder", "dia_decoder"):
        return 1.0  # Dia's attention modules set `scaling = 1.0`
    if _hf_latent.is_latent(model_type):  # DeepSeek's `yarn_apply_mscale` of the whole query head
        return _hf_latent.softmax_scale(config, parameters)
    if config.get("attention_multiplier") is not None:  # Granite's and HyperCLOVA X's
        return float(config["attention_multiplier"])
    if model_type == "zamba2":  # its attention heads are twice the width that sets the scale
        return (_attention_head_dim(config, "attention") / 2) ** -0.5
    return _attention_head_dim(config, "attention") ** -0.5


def _kv_sources(config, types):
    """For each layer, the layer whose keys and values it reuses (Gemma 3n's and 4's last
    `num_kv_shared_layers`: the last earlier layer of their type, `kv_sharing_modes`), or None."""
    shared = config.get("num_kv_shared_layers") or 0
    if config.get("model_type") not in _KV_SHARING or not shared:
        return [None] * len(types)
    first = len(types) - shared
    sources = {kind: index for index, kind in enumerate(types[:first])}  # the last of each type
    missing = sorted(set(types[first:]) - set(sources))
    if first < 0 or missing:
        raise ValueError(
            "The config's last `num_kv_shared_layers` layers must each reuse an earlier layer of their "
            f"type. Received: num_kv_shared_layers={shared}, layer_types={types}"
        )
    return [None] * first + [sources[kind] for kind in types[first:]]
