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


def test_calls_at_scattered_starts_give_a_fresh_layers_bits(backend_world):
    folder, _, world, _, _ = backend_world
    outputs = np.load(folder / "scattered.npz")
    kept = [key for key in outputs.files if key.endswith("-kept")]
    assert len(kept) == 3 * 36  # three kinds of call at 36 (start, length) pairs
    for key in kept:
        fresh = key[: -len("kept")] + "fresh"
        np.testing.assert_array_equal(outputs[key], outputs[fresh], err_msg=key)
    # At most 4 MiB of blocks per input structure: 8 blocks of a 2048-wide encoding's rows,
    # 4 of a 2048-wide rotation's spread cosines and sines, 8 of its rows; every one full.
    assert world["kept"] == {"encoding": [8], "rotary": [4], "rotary-rows": [8]}
