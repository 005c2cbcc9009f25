"""The backend world of `backend_world.py` on JAX, and a backend that no layer family runs on."""

import json

import pytest
from backend_world import *  # noqa: F403 (the world's tests, on this module's backend)
from backend_world import BACKEND_ERRORS, ENVIRONMENTS
from helpers import run_python
from test_docs import page_in_world

BACKEND = "jax"
pytestmark = pytest.mark.slow
# The documentation's JAX page runs in this world's interpreter, after its other checks.
WORLD_PAGE = page_in_world("backends.md", "world")


def test_the_backends_page_runs_on_jax(backend_world):
    _, _, world, _, _ = backend_world
    assert world["docs"] is None, world["docs"]


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
