"""The backend world of `backend_world.py` on PyTorch. Run by `tests/torch.sh`, in the PyTorch
environment of `tests/torch.txt` (the main test environment has no torch)."""

import numpy as np
import pytest
import tensorflow as tf
from backend_world import *  # noqa: F403 (the world's tests, on this module's backend)

from tf_posenc import layers

BACKEND = "torch"
pytestmark = pytest.mark.slow


def test_onnx_export_serves_the_tensorflow_numbers(backend_world):
    saved = np.load(backend_world[0] / "onnx.npz")
    encoding, rotary = layers.PositionalEncoding(64, 8), layers.RotaryEmbedding()
    expected = tf.reshape(
        rotary(tf.reshape(encoding(saved["data"], start_index=40), (2, 16, 2, 4))), (2, 16, 8)
    )
    np.testing.assert_array_equal(saved["onnx"], saved["eager"])
    np.testing.assert_array_equal(saved["onnx"], expected.numpy())
