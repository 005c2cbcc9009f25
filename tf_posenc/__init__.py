"""Exact, cheap, serializable sinusoidal positional encoding for TensorFlow/Keras."""

__version__ = "0.1.0"

from tf_posenc.encoding import get_angles, positional_encoding, shift_matrix
from tf_posenc.layers import PositionalEncoding

__all__ = [
    "__version__",
    "PositionalEncoding",
    "get_angles",
    "positional_encoding",
    "shift_matrix",
]
