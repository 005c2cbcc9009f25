import json
import os
import subprocess
import sys

import pytest

from tf_posenc import demo
from tf_posenc.cli import main


def test_sentences_hold_one_dog_and_one_couch_and_label_their_order():
    import numpy as np

    tokens, labels = demo.make_sentences(200, 6, np.random.default_rng(1))
    assert tokens.shape == (200, 6)
    assert ((tokens == demo.DOG).sum(axis=1) == 1).all()
    assert ((tokens == demo.COUCH).sum(axis=1) == 1).all()
    dog_first = np.argmax(tokens == demo.DOG, axis=1) < np.argmax(tokens == demo.COUCH, axis=1)
    np.testing.assert_array_equal(labels, dog_first)
    assert 0.3 < labels.mean() < 0.7


@pytest.mark.slow
def test_demo_command_learns_word_order_only_with_the_encoding():
    # As a new user runs it: without the log level this suite sets for itself.
    env = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    completed = subprocess.run(
        [sys.executable, "-m", "tf_posenc", "demo", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads(completed.stdout.strip().splitlines()[-1])
    assert results["accuracy_with_encoding"] > 0.95
    assert 0.4 < results["accuracy_without_encoding"] < 0.6
    assert results["saved_model_serves_same_predictions"] is True
    assert "| with PositionalEncoding |" in completed.stdout
    assert "Training the model with PositionalEncoding" not in completed.stdout  # --json is quiet
    # The command line starts quietly: none of TensorFlow's start-up lines.
    assert "oneDNN" not in completed.stderr and "cuda" not in completed.stderr.lower(), completed.stderr


def test_demo_rejects_bad_epochs(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--epochs", "0"])
    assert exit_info.value.code == 2
    assert "expected a positive integer, received '0'" in capsys.readouterr().err
