"""Internal: a Hugging Face vision tower's config whose rope type is "axial" (transformers 5.25),
read as `AxialRotaryEmbedding` arguments.

Most such towers rotate a head of `d` features by two bands of pairs: the (h, w) ids of
`vision_position_ids` turn the first `d / 4` pairs and the next `d / 4` at the same frequencies
`rope_theta ** (-4j / d)`, over the whole head in halves (`rotate_half`). The others differ in
which id turns the first band, the pair layout, their frequencies or the order of the pairs
(`_variant`), or rotate in a way the layer does not (`MECHANISMS`).
"""

from tf_posenc import _hf_config, _hf_vision_defaults


def _variant(model_type, head_dim, theta):
    """The `AxialRotaryEmbedding` arguments of a tower's rotation, but for `max_wavelength`."""
    bands = {"axes_dim": (head_dim // 2, head_dim // 2), "layout": "half", "position_axes": None}
    if model_type == "step3p5_vision":  # [w | h]
        return {**bands, "position_axes": [1, 0]}
    if model_type in ("inkling2_vision", *SAM_GRIDS):  # [w | h], in pairs (2j, 2j + 1)
        return {**bands, "position_axes": [1, 0], "layout": "interleave"}
    if model_type == "gemma4_vision":  # [h, h, w, w]: each band in halves of its own
        return {**bands, "layout": "half_per_axis"}
    if model_type == "pixtral":
        # The head's frequencies split by parity: h takes the even ones, w the odd ones, which
        # are the even ones times rope_theta ** (-2 / d).
        return {**bands, "position_scale": [1.0, theta ** (-2.0 / head_dim)]}
    if model_type == "minimax_m3_vl_vision":
        # (t, h, w) bands of 2 * (d // 3 // 2) features each, in halves over the three, on the
        # ids of `vision_position_ids(..., include_temporal=True)`; the head's tail is not turned.
        band = 2 * (head_dim // 3 // 2)
        return {"axes_dim": (band,) * 3, "layout": "half", "position_axes": None, "head_dim": head_dim}
    if model_type == "kimi_k25_vision":
        # Frequency k turns pair 2k by w and pair 2k + 1 by h: bands of one pair each.
        pairs = head_dim // 2
        return {
            "axes_dim": (2,) * pairs,
            "layout": "half",
            "position_axes": [1, 0] * (pairs // 2),
            "position_scale": [theta ** (-4.0 * (pair // 2) / head_dim) for pair in range(pairs)],
        }
    return bands


MECHANISMS = {}

# The SAM towers whose rotary module is called on a fixed grid rather than on `vision_position_ids`:
# SAM 2's (and EdgeTAM's, SAM 3's tracker's) memory attention, on its `memory_attention_rope_feat_sizes`
# grid (its keys repeat it per memory frame, and its object pointers are not rotated); SAM 3's ViT, on
# its window (its global layers scale the ids by `window_size / (image_size // patch_size)`).
SAM_GRIDS = ("edgetam_video", "sam2_video", "sam3_tracker_video", "sam3_vision_model", "sam3_vit_model")

MODEL_TYPES = tuple(sorted(set(_hf_vision_defaults.DEFAULTS) - set(MECHANISMS)))


def _vision_part(config):
    """The vision config of `config` (itself, or its `vision_config`) and its model type."""
    model_type = config.get("model_type")
    vision = config.get("vision_config")
    if vision is not None:
        vision = _hf_config.as_dict(vision)
        return vision, vision.get("model_type") or _hf_vision_defaults.PARENTS.get(model_type)
    if model_type in _hf_vision_defaults.PARENTS:  # a full config's type, its vision config omitted
        return {}, _hf_vision_defaults.PARENTS[model_type]
    return config, model_type


def _head_dim(config):
    """The tower's head size, as its rotary module reads it: `head_dim`, else the width of the
    tower's own hidden states (Qwen2-VL's `embed_dim`, else `hidden_size`) over its heads (SAM 2's
    memory attention: its width over its downsampling and heads)."""
    if config.get("head_dim"):
        return config["head_dim"]
    if config.get("memory_attention_hidden_size"):
        return config["memory_attention_hidden_size"] // (
            config["memory_attention_downsample_rate"] * config["memory_attention_num_attention_heads"]
        )
    heads = config.get("num_heads") or config.get("num_attention_heads")
    width = config.get("embed_dim") or config.get("hidden_size")
    if not heads or not width:
        raise ValueError(
            "The vision config must give its head size: `head_dim`, or `hidden_size` (or `embed_dim`) "
            "and `num_heads` (or `num_attention_heads`). Received: none of them"
        )
    return width // heads


def axial_arguments(config):
    """`AxialRotaryEmbedding` arguments for the vision tower of `config` (a dict, a path, a
    checkpoint folder or a transformers config; the vision config itself or a config holding
    one as `vision_config`)."""
    vision, model_type = _vision_part(_hf_config.as_dict(config))
    if model_type in MECHANISMS:
        raise ValueError(
            f"The vision tower of model_type={model_type!r} needs a mechanism tf_posenc does not have: "
            f"{MECHANISMS[model_type]}."
        )
    if model_type not in _hf_vision_defaults.DEFAULTS:
        raise ValueError(
            "`model_type` must be a vision config of transformers 5.25 whose rope type is 'axial', or a "
            "config holding one as `vision_config` (docs/vision.md lists them), or 'dinov3_vit'. "
            f"Received: model_type={model_type!r}"
        )
    defaults = _hf_vision_defaults.DEFAULTS[model_type]
    filled = {**defaults, **{key: value for key, value in vision.items() if value is not None}}
    rope = _hf_config._rope_parameters(filled) or dict(defaults["rope_parameters"])
    rope_type = rope.get("rope_type", rope.get("type", "axial"))
    if rope_type != "axial":
        raise ValueError(
            f"The vision tower's rope parameters must have rope_type 'axial', the only type its rotary "
            f"module takes. Received: rope_type={rope_type!r}"
        )
    head_dim = _head_dim(filled)
    theta = rope.get("rope_theta") or filled.get("rope_theta") or 10000.0
    variant = _variant(model_type, head_dim, theta)
    # A head rotated whole splits into two bands of pairs; a tower that leaves a tail
    # (`head_dim`, MiniMax-M3's) sizes its bands from the head itself.
    if head_dim % 4 and "head_dim" not in variant:
        raise ValueError(
            "The vision tower's head size must be a multiple of 4: two bands of pairs, one per axis. "
            f"Received: head size {head_dim}"
        )
    return {**variant, "max_wavelength": theta}
