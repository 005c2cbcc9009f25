from tf_posenc.layers.positional_encoding import PositionalEncoding

__all__ = ["PositionalEncoding"]
