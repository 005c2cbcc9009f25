"""Exact, cheap, serializable sinusoidal positional encoding for TensorFlow/Keras."""

__version__ = "0.2.0"

from tf_posenc.encoding import get_angles, positional_encoding, shift_matrix, sincos_2d
from tf_posenc.layers import (
    PatchPositionalEncoding,
    PositionalEmbedding,
    PositionalEncoding,
    RotaryEmbedding,
    TimestepEmbedding,
)
from tf_posenc.plotting import plot_patch_encoding, plot_positional_encoding, plot_similarity
from tf_posenc.positions import positions_from_mask

__all__ = [
    "__version__",
    "PatchPositionalEncoding",
    "PositionalEmbedding",
    "PositionalEncoding",
    "RotaryEmbedding",
    "TimestepEmbedding",
    "get_angles",
    "plot_patch_encoding",
    "plot_positional_encoding",
    "plot_similarity",
    "positional_encoding",
    "positions_from_mask",
    "shift_matrix",
    "sincos_2d",
]
