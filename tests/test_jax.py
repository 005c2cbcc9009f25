"""The backend world of `backend_world.py` on JAX, and a backend that no layer family runs on."""

import json

import numpy as np
import pytest
from backend_world import *  # noqa: F403 (the world's tests, on this module's backend)
from backend_world import BACKEND_ERRORS, ENVIRONMENTS
from bounds import FLOAT32_UNIT
from helpers import run_python

BACKEND = "jax"
pytestmark = pytest.mark.slow


def test_a_backend_no_family_runs_on_is_named(tmp_path):
    # Keras's own numpy backend, in an interpreter of its own: tf_posenc imports, and its
    # layers refuse to be built with an error naming the backends they run on.
    script = "import json\nworld = {}\n" + BACKEND_ERRORS
    numpy_backend = {**ENVIRONMENTS["jax"], "KERAS_BACKEND": "numpy"}
    result = json.loads(run_python(script, tmp_path, env=numpy_backend).splitlines()[-1])
    for family, supported in (
        ("tf_posenc.layers", "backends tensorflow, jax, torch"),
        ("tf_posenc.tf_keras", "backend tensorflow"),
    ):
        assert f"runs on the Keras {supported}; set KERAS_BACKEND" in result["backend_errors"][family]
        assert "Received: keras.backend.backend()='numpy'" in result["backend_errors"][family]


def test_keras_hubs_models_swap_to_the_exact_rotation_on_jax(backend_world):
    import keras_hub
    from test_keras_hub import HEADS, LLAMA31_ROPE, SMALL, keras_hub_rotation

    from tf_posenc import RotaryEmbedding

    folder, _, world, _, _ = backend_world
    saved = np.load(folder / "keras_hub.npz")
    assert world["keras_hub_rope"] == "tf_posenc.layers.rotary_embedding"
    assert np.abs(saved["ours"] - saved["theirs"]).max() <= 2e-5 * max(1.0, np.abs(saved["theirs"]).max())
    rope = keras_hub.models.Llama3Backbone(**SMALL, **HEADS, **LLAMA31_ROPE).transformer_layers[0]
    rope = rope._self_attention_layer.rotary_embedding_layer
    x = np.random.default_rng(1).normal(size=(1, 16, 2, 8)).astype("float32")
    # The TensorFlow backend's rotation (a compiled call may fuse its multiply-add), and
    # keras-hub's float32 angles far from it.
    expected = RotaryEmbedding.from_keras_hub(rope)(x, start_index=2**20 - 16).numpy()
    for key in ("ours-far", "ours-far-jit"):
        assert np.abs(saved[key] - expected).max() <= 2 * FLOAT32_UNIT * np.abs(x).max()
    exact = keras_hub_rotation(rope, x, 2**20 - 16)
    assert np.abs(saved["theirs-far"] - exact).max() > 100 * np.abs(saved["ours-far"] - exact).max()
