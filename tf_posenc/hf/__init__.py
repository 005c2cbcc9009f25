"""The transformers side of tf_posenc in one place: everything that reads a Hugging Face
transformers config or state dict. Each name is also at the top level (`tf_posenc.X`, with Keras 3).

The readers (`from_hf_config`): `RotaryEmbedding` (a decoder's or encoder's rotation),
`AxialRotaryEmbedding` (a vision tower's), `GroupQueryAttention` (a decoder's whole attention
module), `MultiHeadAttention` (BERT-like, DeBERTa, Conformer and SAM-style encoders'),
`MultiHeadLatentAttention` (DeepSeek's latent attention), `DisentangledPositionBias` (DeBERTa's
shared table), `InklingRelativeBias`. The functions: `hf_attention_layers` (a decoder's plan of
positions), `hf_position_ids` (learned tables' rows), `vision_position_ids` and `mrope_positions`
(multimodal models' ids), and `load_hf_attention_weights` (a module's weights, strictly).

Example:

    >>> from tf_posenc import hf
    >>> config = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
    ...           "num_key_value_heads": 2, "num_hidden_layers": 1}
    >>> layer = hf.GroupQueryAttention.from_hf_config(config, 0)
    >>> layer.num_query_heads, layer.num_key_value_heads, layer.rope.max_wavelength
    (4, 2, 10000.0)
"""

import importlib

# Where each name lives. They are imported on first use (PEP 562), so that the readers' own
# modules may live in this package without importing the layers that use them.
_HOMES = {
    "AxialRotaryEmbedding": "tf_posenc.layers.axial_rotary_embedding",
    "DisentangledPositionBias": "tf_posenc.layers.disentangled_position_bias",
    "GroupQueryAttention": "tf_posenc.layers.multi_head_attention",
    "InklingRelativeBias": "tf_posenc.layers.inkling_relative_bias",
    "MultiHeadAttention": "tf_posenc.layers.multi_head_attention",
    "MultiHeadLatentAttention": "tf_posenc.layers.multi_head_latent_attention",
    "RotaryEmbedding": "tf_posenc.layers.rotary_embedding",
    "hf_attention_layers": "tf_posenc.layers.hf_plan",
    "hf_position_ids": "tf_posenc.position_ids",
    "load_hf_attention_weights": "tf_posenc.hf_weights",
    "mrope_positions": "tf_posenc.multimodal",
    "vision_position_ids": "tf_posenc.multimodal",
}


def __getattr__(name):
    if name not in _HOMES:
        raise AttributeError(f"module 'tf_posenc.hf' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


def __dir__():
    return sorted([*globals(), *_HOMES])


__all__ = [
    "AxialRotaryEmbedding",
    "DisentangledPositionBias",
    "GroupQueryAttention",
    "InklingRelativeBias",
    "MultiHeadAttention",
    "MultiHeadLatentAttention",
    "RotaryEmbedding",
    "hf_attention_layers",
    "hf_position_ids",
    "load_hf_attention_weights",
    "mrope_positions",
    "vision_position_ids",
]
