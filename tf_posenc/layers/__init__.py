from tf_posenc.layers.positional_embedding import PositionalEmbedding
from tf_posenc.layers.positional_encoding import PositionalEncoding

__all__ = ["PositionalEmbedding", "PositionalEncoding"]
