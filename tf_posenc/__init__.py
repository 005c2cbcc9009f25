"""Exact, cheap, serializable sinusoidal positional encoding for TensorFlow/Keras."""

__version__ = "0.7.0"

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
    "AlibiBias",
    "AxialRotaryEmbedding",
    "ContinuousPositionBias",
    "DecomposedPositionBias",
    "DisentangledPositionBias",
    "FourierPositionEmbedding",
    "GroupQueryAttention",
    "HeadNormalization",
    "InklingRelativeBias",
    "LearnedPatchPositionEmbedding",
    "MultiHeadAttention",
    "MultiHeadLatentAttention",
    "PatchPositionalEncoding",
    "PositionalEmbedding",
    "PositionalEncoding",
    "RelativePositionBias",
    "RotaryEmbedding",
    "TimestepEmbedding",
    "TransformerXLPositionBias",
    "VideoPositionalEncoding",
    "WindowPositionBias",
    "attention_log_scale",
    "attention_mask",
    "attention_temperature",
    "context_parallel_order",
    "context_parallel_positions",
    "deberta_relative_positions",
    "detr_sine_embedding",
    "extend_position_embeddings",
    "get_angles",
    "grid_positions",
    "hf_attention_layers",
    "hf_position_ids",
    "interpolate_position_embeddings",
    "load_hf_attention_weights",
    "mrope_positions",
    "plot_axial_angles",
    "plot_pair_rotation",
    "plot_patch_encoding",
    "plot_positional_encoding",
    "plot_similarity",
    "plot_video_encoding",
    "positional_encoding",
    "positions_from_mask",
    "positions_from_segment_ids",
    "segment_attention_mask",
    "shift_matrix",
    "sincos_2d",
    "sincos_3d",
    "vision_position_ids",
]
