"""Positions for Transformers in TensorFlow/Keras, exact in every dtype at any length.

Positions added to the inputs (the sinusoidal encoding of "Attention Is All You Need", learned
tables, 2-D and 3-D grids, timesteps), rotated into queries and keys (RoPE and its scaled types,
axial and multimodal rotations), or biasing the scores (ALiBi, T5, DeBERTa, Transformer-XL, SAM,
Swin); Keras's attention layers with the position side of attention, and DeepSeek's latent
attention; and every one of them read from a Hugging Face transformers config, with the module's
own weights (`tf_posenc.hf` names those readers in one place). The public names below follow the
API pages: added, rotary, attention, positions, plotting.
"""

__version__ = "0.8.0"

import os

from tf_posenc import _command_line_start

if _command_line_start.is_command_line():
    _command_line_start.import_tensorflow_quietly()

from tf_posenc.encoding import (
    get_angles,
    grid_positions,
    positional_encoding,
    shift_matrix,
    sincos_2d,
    sincos_3d,
)

# The layers follow `tf.keras`: TensorFlow makes it tf_keras (Keras 2) under this variable, so
# the same user code builds the same models in either world. Both families stay importable:
# `tf_posenc.layers` (Keras 3) and `tf_posenc.tf_keras`.
if os.environ.get("TF_USE_LEGACY_KERAS") in ("true", "True", "1"):
    from tf_posenc.tf_keras import (
        AlibiBias,
        AxialRotaryEmbedding,
        ContinuousPositionBias,
        InklingRelativeBias,
        LearnedPatchPositionEmbedding,
        PatchPositionalEncoding,
        PositionalEmbedding,
        PositionalEncoding,
        RelativePositionBias,
        RotaryEmbedding,
        TimestepEmbedding,
        VideoPositionalEncoding,
        WindowPositionBias,
        hf_attention_layers,
    )
else:
    from tf_posenc.layers import (
        AlibiBias,
        AxialRotaryEmbedding,
        ContinuousPositionBias,
        InklingRelativeBias,
        LearnedPatchPositionEmbedding,
        PatchPositionalEncoding,
        PositionalEmbedding,
        PositionalEncoding,
        RelativePositionBias,
        RotaryEmbedding,
        TimestepEmbedding,
        VideoPositionalEncoding,
        WindowPositionBias,
    )
    from tf_posenc.layers.hf_plan import hf_attention_layers
from tf_posenc._positions import positions_from_mask
from tf_posenc.attention import attention_log_scale, attention_mask, attention_temperature
from tf_posenc.deberta import deberta_relative_positions
from tf_posenc.detection import detr_sine_embedding
from tf_posenc.hf_weights import load_hf_attention_weights
from tf_posenc.interpolation import extend_position_embeddings, interpolate_position_embeddings
from tf_posenc.layers.decomposed_position_bias import DecomposedPositionBias
from tf_posenc.layers.disentangled_position_bias import DisentangledPositionBias
from tf_posenc.layers.fourier_position_embedding import FourierPositionEmbedding
from tf_posenc.layers.head_normalization import HeadNormalization
from tf_posenc.layers.multi_head_attention import GroupQueryAttention, MultiHeadAttention
from tf_posenc.layers.multi_head_latent_attention import MultiHeadLatentAttention
from tf_posenc.layers.transformer_xl_position_bias import TransformerXLPositionBias
from tf_posenc.multimodal import mrope_positions, vision_position_ids
from tf_posenc.packing import (
    context_parallel_order,
    context_parallel_positions,
    positions_from_segment_ids,
    segment_attention_mask,
)
from tf_posenc.plotting import (
    plot_axial_angles,
    plot_pair_rotation,
    plot_patch_encoding,
    plot_positional_encoding,
    plot_similarity,
    plot_video_encoding,
)
from tf_posenc.position_ids import hf_position_ids

__all__ = [
    "__version__",
    # Added to the inputs (docs/api/added.md)
    "get_angles",
    "positional_encoding",
    "shift_matrix",
    "PositionalEncoding",
    "PositionalEmbedding",
    "TimestepEmbedding",
    "sincos_2d",
    "PatchPositionalEncoding",
    "sincos_3d",
    "VideoPositionalEncoding",
    "interpolate_position_embeddings",
    "extend_position_embeddings",
    "detr_sine_embedding",
    "FourierPositionEmbedding",
    "LearnedPatchPositionEmbedding",
    # Rotated (docs/api/rotary.md)
    "RotaryEmbedding",
    "AxialRotaryEmbedding",
    "grid_positions",
    "mrope_positions",
    "vision_position_ids",
    # Attention and score biases (docs/api/attention.md)
    "MultiHeadAttention",
    "GroupQueryAttention",
    "MultiHeadLatentAttention",
    "load_hf_attention_weights",
    "HeadNormalization",
    "attention_mask",
    "hf_attention_layers",
    "attention_temperature",
    "attention_log_scale",
    "AlibiBias",
    "RelativePositionBias",
    "DisentangledPositionBias",
    "TransformerXLPositionBias",
    "DecomposedPositionBias",
    "InklingRelativeBias",
    "WindowPositionBias",
    "ContinuousPositionBias",
    # Positions of packed, padded and sharded sequences (docs/api/positions.md)
    "positions_from_mask",
    "positions_from_segment_ids",
    "segment_attention_mask",
    "context_parallel_positions",
    "context_parallel_order",
    "hf_position_ids",
    "deberta_relative_positions",
    # Plotting (docs/api/plotting.md)
    "plot_positional_encoding",
    "plot_similarity",
    "plot_pair_rotation",
    "plot_patch_encoding",
    "plot_video_encoding",
    "plot_axial_angles",
]
