from tf_posenc.layers.patch_positional_encoding import PatchPositionalEncoding
from tf_posenc.layers.positional_embedding import PositionalEmbedding
from tf_posenc.layers.positional_encoding import PositionalEncoding
from tf_posenc.layers.rotary_embedding import RotaryEmbedding
from tf_posenc.layers.timestep_embedding import TimestepEmbedding

__all__ = [
    "PatchPositionalEncoding",
    "PositionalEmbedding",
    "PositionalEncoding",
    "RotaryEmbedding",
    "TimestepEmbedding",
]
