"""Internal: a DeBERTa-v2/v3 or SEW-D config, read as `DisentangledPositionBias` arguments and the
attention module's sizes, with transformers 5.25's defaults for the keys a config omits."""

from typing import NamedTuple

from tf_posenc import _hf_config, _validation

# Each config class's defaults of the keys its attention reads (`DebertaV2Config`'s and
# `SEWDConfig`'s `to_dict()`, and the modules' `getattr` defaults where the class sets none;
# `test_deberta.py` compares them with the classes' own, as printed).
DEFAULTS = {
    "deberta-v2": {
        "relative_attention": False,
        "max_relative_positions": -1,
        "position_buckets": -1,
        "pos_att_type": None,
        "share_att_key": False,
        "norm_rel_ebd": "none",
        "max_position_embeddings": 512,
        "hidden_size": 1536,
        "num_attention_heads": 24,
        "layer_norm_eps": 1e-7,
    },
    "sew-d": {
        "relative_attention": True,
        "max_relative_positions": -1,
        "position_buckets": 256,
        "pos_att_type": ["p2c", "c2p"],
        "share_att_key": True,
        "norm_rel_ebd": "layer_norm",
        "max_position_embeddings": 512,
        "hidden_size": 768,
        "num_attention_heads": 12,
        "layer_norm_eps": 1e-7,
    },
}

# Models with disentangled attention that the layer does not build, and why.
_REFUSED = {
    "deberta": (
        "DeBERTa (v1) fuses its projections (`in_proj`) with separate query and value biases and "
        "computes its position terms without buckets on a pre-scaled query; only DeBERTa-v2/v3's and "
        "SEW-D's disentangled attention is built"
    ),
}


TYPES = (*DEFAULTS, *_REFUSED)


class DebertaAttention(NamedTuple):
    """What a DeBERTa-v2 or SEW-D attention module is, for the layer and the weight loader."""

    model_type: str
    hidden_size: int
    heads: int
    head_dim: int
    relative_attention: bool
    pos_att_type: tuple
    share_att_key: bool
    bias_arguments: dict  # `DisentangledPositionBias`'s, when `relative_attention`


def _pos_att_type(value):
    if value is None:
        return ()
    if isinstance(value, str):  # older config.json files: "p2c|c2p", as the config class splits it
        value = [part.strip() for part in value.lower().split("|")]
    value = tuple(part for part in value if part)
    for part in value:
        if part not in ("c2p", "p2c"):
            raise ValueError(
                f'`pos_att_type` must hold "c2p" and/or "p2c". Received: pos_att_type={value!r} '
                f"(of type {type(value).__name__})"
            )
    return value


def read(config):
    """The attention of a DeBERTa-v2/v3 or SEW-D config, or a `ValueError` naming what is not
    read."""
    given = _hf_config.as_dict(config)
    model_type = given.get("model_type")
    if model_type in _REFUSED:
        raise ValueError(f"model_type={model_type!r} is not read: {_REFUSED[model_type]}.")
    if model_type not in DEFAULTS:
        raise ValueError(
            "`config` must be a DeBERTa-v2/v3 (`deberta-v2`) or SEW-D (`sew-d`) config: their attention "
            f"is disentangled. Received: model_type={model_type!r}"
        )
    read = {**DEFAULTS[model_type], **{k: v for k, v in given.items() if v is not None}}
    if given.get("pos_att_type", "absent") is None:
        read["pos_att_type"] = None
    hidden = _validation.positive_int("hidden_size", read["hidden_size"])
    heads = _validation.positive_int("num_attention_heads", read["num_attention_heads"])
    head_dim = read.get("attention_head_size")
    if head_dim is None:
        head_dim = _validation.head_size("hidden_size", hidden, "num_attention_heads", heads)
    head_dim = _validation.positive_int("attention_head_size", head_dim)
    pos_att_type = _pos_att_type(read["pos_att_type"])
    relative = _validation.boolean("relative_attention", bool(read["relative_attention"]))
    share = bool(read["share_att_key"])
    arguments = {}
    if relative and pos_att_type:
        norms = [part.strip() for part in str(read["norm_rel_ebd"]).lower().split("|")]
        arguments = {
            "num_heads": heads,
            "hidden_size": hidden,
            "position_buckets": int(read["position_buckets"]),
            "max_relative_positions": int(read["max_relative_positions"]),
            "max_position_embeddings": int(read["max_position_embeddings"]),
            "pos_att_type": list(pos_att_type),
            "share_att_key": share,
            "norm_rel_ebd": "layer_norm" if "layer_norm" in norms else "none",
            "layer_norm_eps": float(read["layer_norm_eps"]),
        }
    return DebertaAttention(model_type, hidden, heads, head_dim, relative, pos_att_type, share, arguments)
