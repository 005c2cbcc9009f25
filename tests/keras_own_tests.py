"""Keras's own test files for `MultiHeadAttention` and `GroupQueryAttention` (the installed
Keras's), run on tf_posenc's classes: a pytest plugin puts them in `keras.src.layers` before the
files are collected and counts the layers the tests build, in an interpreter of the backend."""

import importlib.util
import json
import os
import pathlib
import subprocess

PLUGIN = """
import json
from keras.src import layers
import tf_posenc

BUILT = {"MultiHeadAttention": 0, "GroupQueryAttention": 0}


def counted(cls):
    # Counted where the constructor checks the position arguments: Keras reads `__init__`'s
    # own signature, which a wrapper would hide.
    init_positions = cls._init_positions

    def _init_positions(self, **arguments):
        BUILT[cls.__name__] += 1
        init_positions(self, **arguments)

    cls._init_positions = _init_positions
    return cls


layers.MultiHeadAttention = counted(tf_posenc.MultiHeadAttention)
layers.GroupQueryAttention = layers.GroupedQueryAttention = counted(tf_posenc.GroupQueryAttention)
OUTCOMES = {}


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        OUTCOMES[report.nodeid] = report.outcome


def pytest_sessionfinish(session):
    with open("keras_own_tests.json", "w") as file:
        json.dump({"built": BUILT, "outcomes": OUTCOMES}, file)
"""


def run(python, backend, folder):
    """Runs the two files with `python` on `backend` in `folder`; returns the plugin's report
    (the layers built, each test's outcome) and the run."""
    # Found, not imported: importing Keras here would import this process's backend.
    attention = pathlib.Path(importlib.util.find_spec("keras").origin).parent / "src" / "layers" / "attention"
    folder = pathlib.Path(folder)
    (folder / "keras_substitute.py").write_text(PLUGIN)
    (folder / "pytest.ini").write_text("[pytest]\n")  # not the project's options
    files = [
        str(attention / name) for name in ("multi_head_attention_test.py", "grouped_query_attention_test.py")
    ]
    command = [python, "-m", "pytest", "-q", "-c", str(folder / "pytest.ini"), "--rootdir", str(folder)]
    command += ["-p", "no:cacheprovider", "-p", "keras_substitute", *files]
    environment = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(folder)}
    result = subprocess.run(command, cwd=folder, env=environment, capture_output=True, text=True)
    report_file = folder / "keras_own_tests.json"
    assert report_file.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(report_file.read_text()), result
