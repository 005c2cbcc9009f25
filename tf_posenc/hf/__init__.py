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

from tf_posenc.hf_weights import load_hf_attention_weights
from tf_posenc.layers.axial_rotary_embedding import AxialRotaryEmbedding
from tf_posenc.layers.disentangled_position_bias import DisentangledPositionBias
from tf_posenc.layers.hf_plan import hf_attention_layers
from tf_posenc.layers.inkling_relative_bias import InklingRelativeBias
from tf_posenc.layers.multi_head_attention import GroupQueryAttention, MultiHeadAttention
from tf_posenc.layers.multi_head_latent_attention import MultiHeadLatentAttention
from tf_posenc.layers.rotary_embedding import RotaryEmbedding
from tf_posenc.multimodal import mrope_positions, vision_position_ids
from tf_posenc.position_ids import hf_position_ids

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
