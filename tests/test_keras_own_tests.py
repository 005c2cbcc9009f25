"""Keras's own tests of its attention layers, on tf_posenc's `MultiHeadAttention` and
`GroupQueryAttention` (`keras_own_tests.py`), on the TensorFlow and JAX backends; the PyTorch
world (`torch_world.py`) runs them on PyTorch."""

import sys

import keras_own_tests
import pytest

# What Keras 3.15.1's own classes give: on TensorFlow it skips 4 of its tests (flash attention).
EXPECTED = {"tensorflow": (76, 4), "jax": (80, 0)}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_keras_own_attention_tests_pass_on_tf_posenc_classes(backend, tmp_path):
    report, result = keras_own_tests.run(sys.executable, backend, tmp_path)
    outcomes = list(report["outcomes"].values())
    assert "failed" not in outcomes, result.stdout[-4000:]
    assert (outcomes.count("passed"), outcomes.count("skipped")) == EXPECTED[backend]
    # The tests built tf_posenc's layers (Keras's test harness itself may import TensorFlow:
    # the backend worlds check that tf_posenc does not).
    assert report["built"]["MultiHeadAttention"] > 50 and report["built"]["GroupQueryAttention"] > 10
