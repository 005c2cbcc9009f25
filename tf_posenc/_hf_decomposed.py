"""Internal: a SAM-style or ViTDet vision encoder's config, read as one layer's self-attention
with decomposed relative positions, with transformers 5.25's defaults for the keys a config
omits."""

from typing import NamedTuple

from tf_posenc import _hf_config, _validation

_SAM = {"hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 12, "patch_size": 16,
        "window_size": 14, "global_attn_indexes": [2, 5, 8, 11], "use_rel_pos": True,
        "qkv_bias": True}  # fmt: skip
# Each config class's defaults of the keys the attention reads (`to_dict()` of the class; the
# test compares them with the classes' own, as printed).
DEFAULTS = {
    "sam_vision_model": {**_SAM, "image_size": 1024},
    "sam_hq_vision_model": {**_SAM, "image_size": 1024},
    "got_ocr2_vision": {**_SAM, "image_size": 1024},
    "slanext_vision": {**_SAM, "image_size": 512},
    "pp_formulanet_vision": {**_SAM, "image_size": 512},
    "vitdet": {"hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 12, "image_size": 224,
               "patch_size": 16, "window_size": 0, "window_block_indices": [],
               "use_relative_position_embeddings": False, "qkv_bias": True},
}  # fmt: skip
# Configs that hold one as `vision_config`.
_PARENTS = {"sam": "sam_vision_model", "sam_hq": "sam_hq_vision_model", "got_ocr2": "got_ocr2_vision",
            "slanext": "slanext_vision", "pp_formulanet": "pp_formulanet_vision"}  # fmt: skip
TYPES = (*DEFAULTS, *_PARENTS)


class DecomposedAttention(NamedTuple):
    """One layer's vision self-attention, for the layer and the weight loader."""

    model_type: str
    hidden_size: int
    heads: int
    head_dim: int
    biases: bool  # `qkv` has a bias (`proj` always does)
    relative: bool  # `rel_pos_h` and `rel_pos_w`
    input_size: tuple  # the grid its tables are learned for: its window, or the whole image's


def _pair(name, value):
    pair = tuple(value) if isinstance(value, (list, tuple)) else (value, value)
    return tuple(_validation.positive_int(name, side) for side in pair)


def read(config, layer_index):
    """Layer `layer_index`'s attention of a SAM-style or ViTDet config, or a `ValueError`."""
    given = _hf_config.as_dict(config)
    model_type = given.get("model_type")
    if model_type in _PARENTS:
        given = {"model_type": _PARENTS[model_type], **_hf_config.as_dict(given.get("vision_config") or {})}
        model_type = given["model_type"]
    read = {**DEFAULTS[model_type], **{k: v for k, v in given.items() if v is not None}}
    hidden = _validation.positive_int("hidden_size", read["hidden_size"])
    heads = _validation.positive_int("num_attention_heads", read["num_attention_heads"])
    head_dim = _validation.head_size("hidden_size", hidden, "num_attention_heads", heads)
    layers = _validation.positive_int("num_hidden_layers", read["num_hidden_layers"])
    _hf_config.encoder_layer_index(layer_index, layers)
    image = _pair("image_size", read["image_size"])
    patch = _pair("patch_size", read["patch_size"])
    window = read["window_size"]
    if model_type == "vitdet":
        windowed = layer_index in read["window_block_indices"]
        relative = bool(read["use_relative_position_embeddings"])
    else:  # SAM's: windowed unless global
        windowed = layer_index not in read["global_attn_indexes"]
        relative = bool(read["use_rel_pos"])
    if windowed and window > 0:
        input_size = (window, window)
    else:
        input_size = (image[0] // patch[0], image[1] // patch[1])
    return DecomposedAttention(
        model_type, hidden, heads, head_dim, bool(read["qkv_bias"]), relative, input_size
    )
