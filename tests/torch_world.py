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
    # At most 8 MiB (`_eager.KEPT_BYTES`) of windows per layer, every copy counted.
    for name, (windows, kept_bytes, storage_bytes) in world["kept"].items():
        assert 0 < windows <= 16 and 0 < kept_bytes == storage_bytes <= 8 * 2**20, name


def test_threads_calling_one_layer_get_a_fresh_layers_bits(backend_world):
    threads = backend_world[2]["threads"]
    assert threads["errors"] == [] and threads["calls"] == 800
    assert threads["different"] == []
    kept_bytes, storage_bytes = threads["kept"]
    assert 0 < kept_bytes == storage_bytes <= 8 * 2**20


@pytest.mark.parametrize("name", ["rotary", "rotary-new-columns", "encoding"])
def test_a_call_under_inference_mode_leaves_training_possible(backend_world, name):
    same, gradient = backend_world[2]["inference_mode"][name]
    assert same, gradient  # the error, if the backward pass raised
    rotary = name.startswith("rotary")
    data = np.random.default_rng(8).normal(size=(1, 5, 2, 8) if rotary else (1, 5, 8))
    if rotary:  # a rotation keeps lengths: the squared norm's gradient is 2x
        expected = 2 * data
    else:
        expected = 2 * layers.PositionalEncoding(64, 8)(data.astype("float32"), start_index=3).numpy()
    np.testing.assert_allclose(gradient, expected, rtol=1e-5, atol=1e-5)


def test_what_a_layer_keeps_stays_within_its_byte_cap(backend_world):
    world = backend_world[2]
    # A 65536 x 512 call's 128 MiB of rows are used once and not kept.
    assert world["kept_after"]["long call"] == [0, 0]
    kept_bytes, storage_bytes = world["kept_after"]["decoding"]
    assert 0 < kept_bytes == storage_bytes <= 8 * 2**20
    assert world["device_keys"] == ["cpu", "meta"]
