from tf_posenc.layers.positional_embedding import PositionalEmbedding
from tf_posenc.layers.positional_encoding import PositionalEncoding
from tf_posenc.layers.rotary_embedding import RotaryEmbedding

__all__ = ["PositionalEmbedding", "PositionalEncoding", "RotaryEmbedding"]
