"""PyTorch with triton, which torch's default wheel brings: Keras's own attention tests on
tf_posenc's classes, and triton loaded after tf_posenc. Run by `tests/torch.sh` in the PyTorch
environment with triton added. TensorFlow 2.21 and triton abort a process that loads both, so
this process imports neither Keras nor TensorFlow: each check runs in a PyTorch interpreter."""

import os
import subprocess
import sys

import keras_own_tests
import pytest

pytestmark = pytest.mark.slow


def test_keras_own_attention_tests_pass_on_tf_posenc_classes(tmp_path):
    report, result = keras_own_tests.run(sys.executable, "torch", tmp_path)
    outcomes = list(report["outcomes"].values())
    assert "failed" not in outcomes, result.stdout[-4000:]
    # What Keras 3.15.1's own classes give on PyTorch.
    assert (outcomes.count("passed"), outcomes.count("skipped")) == (80, 0)
    assert report["built"]["MultiHeadAttention"] > 50 and report["built"]["GroupQueryAttention"] > 10


def test_triton_loads_after_tf_posenc():
    # `import tensorflow; import triton` aborts ("LLVM ERROR: inconsistency in registered
    # CommandLine options"); tf_posenc imports no TensorFlow on this backend.
    script = (
        "import sys, numpy as np, keras, tf_posenc\n"
        "tf_posenc.RotaryEmbedding()(np.zeros((1, 4, 2, 8), 'float32'))\n"
        "import triton\n"
        "print('tensorflow' in sys.modules)\n"
    )
    environment = {**os.environ, "KERAS_BACKEND": "torch"}
    result = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-1] == "False"
