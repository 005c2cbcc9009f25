"""Exact, cheap, serializable sinusoidal positional encoding for TensorFlow/Keras."""

__version__ = "0.1.0"

from tf_posenc.encoding import get_angles, positional_encoding, shift_matrix
from tf_posenc.exact_float32 import float32_only
from tf_posenc.layers import PositionalEmbedding, PositionalEncoding
from tf_posenc.plotting import plot_positional_encoding, plot_similarity

__all__ = [
    "__version__",
    "PositionalEmbedding",
    "PositionalEncoding",
    "float32_only",
    "get_angles",
    "plot_positional_encoding",
    "plot_similarity",
    "positional_encoding",
    "shift_matrix",
]
