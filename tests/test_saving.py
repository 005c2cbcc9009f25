"""Saved models reload in a fresh interpreter: `.keras` with tf_posenc, SavedModel without it."""

import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
from helpers import run_python
from reference import reference_table

pytestmark = pytest.mark.slow

BUILD_AND_SAVE = """
import json, numpy as np, keras, tf_posenc
inputs = keras.Input((None,), dtype="int32")
x = keras.layers.Embedding(100, 16)(inputs)
x = tf_posenc.PositionalEncoding(position=32, d_model=16)(x)
model = keras.Model(inputs, keras.layers.Dense(3)(x))
tokens = np.random.default_rng(0).integers(1, 100, size=(4, 32)).astype("int32")
np.save("tokens.npy", tokens)
np.save("expected.npy", model.predict(tokens, verbose=0))
embedding, kernel, bias = model.get_weights()
np.savez("weights.npz", embedding=embedding, kernel=kernel, bias=bias)
model.save("model.keras")
model.export("exported", verbose=False)
"""

# The serving interpreter cannot import tf_posenc: a None entry in sys.modules
# makes every import of it fail.
SERVE_WITHOUT_TF_POSENC = """
import sys
sys.modules["tf_posenc"] = None
import json, numpy as np, tensorflow as tf
try:
    import tf_posenc
except ImportError:
    pass
else:
    raise SystemExit("tf_posenc should not be importable here")
served = tf.saved_model.load("exported")
signature = served.signatures["serving_default"]
tokens = np.load("tokens.npy")
expected = np.load("expected.npy")
result = {}
for seq_len in (1, 5, 32):
    via_serve = served.serve(tf.constant(tokens[:, :seq_len])).numpy()
    np.save(f"served_{seq_len}.npy", via_serve)
    via_signature = list(signature(tf.constant(tokens[:, :seq_len])).values())[0].numpy()
    result[seq_len] = [float(np.abs(via_serve - expected[:, :seq_len]).max()),
                       float(np.abs(via_signature - via_serve).max())]
try:
    served.serve(tf.constant(np.ones((1, 33), "int32")))
except tf.errors.InvalidArgumentError as error:
    result["too_long"] = str(error)
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    run_python(BUILD_AND_SAVE, folder)
    return folder


def test_keras_file_loads_in_fresh_process_with_only_import(saved):
    output = run_python(
        """
import numpy as np, keras, tf_posenc
model = keras.models.load_model("model.keras")
layer = [l for l in model.layers if isinstance(l, tf_posenc.PositionalEncoding)][0]
tokens = np.load("tokens.npy")
got = model.predict(tokens, verbose=0)
print(np.array_equal(got, np.load("expected.npy")), layer.position, layer.d_model)
""",
        saved,
    )
    assert output.split() == ["True", "32", "16"]


def test_keras_file_without_tf_posenc_names_the_missing_class(saved):
    completed = subprocess.run(
        [sys.executable, "-c", "import keras; keras.models.load_model('model.keras')"],
        cwd=saved,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    if completed.returncode == 0:
        # Keras before 3.9 imports the module a saved config names, here tf_posenc's own.
        assert tuple(int(part) for part in keras.__version__.split(".")[:2]) < (3, 9)
    else:
        assert "tf_posenc>PositionalEncoding" in completed.stderr


def float64_model(folder, tokens):
    """The saved model's function in float64: (embedding + encoding) @ kernel + bias."""
    weights = np.load(folder / "weights.npz")
    encoded = weights["embedding"].astype(np.float64)[tokens] + reference_table(
        np.arange(tokens.shape[1]), 16
    )
    return encoded @ weights["kernel"] + weights["bias"]


def test_saved_model_serves_without_tf_posenc_at_every_length(saved):
    result = json.loads(run_python(SERVE_WITHOUT_TF_POSENC, saved).strip().splitlines()[-1])
    tokens = np.load(saved / "tokens.npy")
    for seq_len in ("1", "5", "32"):
        served_error, signature_difference = result[seq_len]
        assert served_error < 1e-5  # against model.predict, kept as an extra
        assert signature_difference == 0.0
        served = np.load(saved / f"served_{seq_len}.npy")
        expected = float64_model(saved, tokens[:, : int(seq_len)])
        assert np.abs(served - expected).max() <= 1e-5 * max(1, np.abs(expected).max())
    assert "The sequence is longer than `position`" in result["too_long"]


def test_saved_model_cli_reads_the_export(saved):
    cli = shutil.which("saved_model_cli", path=os.path.dirname(sys.executable))
    assert cli, "saved_model_cli comes with tensorflow"
    completed = subprocess.run(
        [cli, "show", "--dir", str(saved / "exported"), "--all"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "signature_def['serving_default']" in completed.stdout
    assert "shape: (-1, -1)" in completed.stdout


def test_saved_files_are_small(saved):
    keras_size = os.path.getsize(saved / "model.keras")
    export_size = sum(path.stat().st_size for path in (saved / "exported").rglob("*") if path.is_file())
    weights = (100 * 16 + 16 * 3 + 3) * 4
    assert keras_size < weights + 64 * 1024
    assert export_size < weights + 1024 * 1024
    assert np.load(saved / "expected.npy").shape == (4, 32, 3)
