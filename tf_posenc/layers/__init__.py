from tf_posenc.layers.alibi_bias import AlibiBias
from tf_posenc.layers.axial_rotary_embedding import AxialRotaryEmbedding
from tf_posenc.layers.head_normalization import HeadNormalization  # noqa: F401
from tf_posenc.layers.inkling_relative_bias import InklingRelativeBias
from tf_posenc.layers.learned_patch_position_embedding import LearnedPatchPositionEmbedding
from tf_posenc.layers.multi_head_attention import GroupQueryAttention, MultiHeadAttention  # noqa: F401
from tf_posenc.layers.multi_head_latent_attention import MultiHeadLatentAttention  # noqa: F401
from tf_posenc.layers.patch_positional_encoding import PatchPositionalEncoding
from tf_posenc.layers.positional_embedding import PositionalEmbedding
from tf_posenc.layers.positional_encoding import PositionalEncoding
from tf_posenc.layers.relative_position_bias import RelativePositionBias
from tf_posenc.layers.rotary_embedding import RotaryEmbedding
from tf_posenc.layers.timestep_embedding import TimestepEmbedding
from tf_posenc.layers.video_positional_encoding import VideoPositionalEncoding
from tf_posenc.layers.window_position_bias import ContinuousPositionBias, WindowPositionBias

# The position layers, made for tf_keras too (`tf_posenc.tf_keras`). The attention layers,
# `MultiHeadAttention` and `GroupQueryAttention`, extend Keras 3's own and are Keras 3 only, as is
# `MultiHeadLatentAttention`.
__all__ = [
    "AlibiBias",
    "AxialRotaryEmbedding",
    "ContinuousPositionBias",
    "InklingRelativeBias",
    "LearnedPatchPositionEmbedding",
    "PatchPositionalEncoding",
    "PositionalEmbedding",
    "PositionalEncoding",
    "RelativePositionBias",
    "RotaryEmbedding",
    "TimestepEmbedding",
    "VideoPositionalEncoding",
    "WindowPositionBias",
]
