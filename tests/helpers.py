import json
import os
import subprocess
import sys
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf


def slow_unless(quick, cases):
    """`cases` (tuples of values, or single values) as parameters named by their values, each
    marked `slow` unless its first value is in `quick` (every one quick where `quick` is None)."""
    params = []
    for case in cases:
        case = case if isinstance(case, tuple) else (case,)
        fast = quick is None or case[0] in quick
        params.append(
            pytest.param(*case, id="-".join(map(str, case)), marks=() if fast else pytest.mark.slow)
        )
    return params


def in_threads(call, work, threads=4):
    """`call(item)` for every item of each `work[i]`, `threads` threads at once (thread `i` takes
    `work[i]`): the results by item, and the errors raised (as their `repr`)."""
    results, errors = {}, []

    def run(items):
        try:
            for item in items:
                results[item] = call(item)
        except Exception as raised:  # noqa: BLE001 (returned to the caller, which asserts none)
            errors.append(repr(raised))

    running = [threading.Thread(target=run, args=(work[i],)) for i in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    return results, errors


def as_float64(tensor):
    return tf.cast(tensor, tf.float64).numpy()


def rounding_floor(exact, dtype):
    """What rounding the exact result once to `dtype` costs, at most."""
    return np.abs(as_float64(tf.cast(tf.constant(exact), dtype)) - exact).max()


def run_python(code, cwd, timeout=300, env=None):
    """Runs `code` in a fresh interpreter in `cwd` and returns its stdout; fails on a non-zero exit.

    `env` adds (or, with None values, removes) environment variables.
    """
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONWARNINGS": "ignore", **(env or {})}
    env = {name: value for name, value in env.items() if value is not None}
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed.stdout


class MaskProbeBody:
    """Returns the mask that reached it, as 0/1 floats (or -1 everywhere when none did).

    In `keras.ops`, so that it runs on either backend and, on a tf_keras base, in tf_keras.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def compute_mask(self, inputs, mask=None):
        return None

    def call(self, inputs, mask=None):
        if mask is None:
            return -keras.ops.ones(keras.ops.shape(inputs)[:2])
        return keras.ops.cast(mask, "float32")


class MaskProbe(MaskProbeBody, keras.layers.Layer):
    pass


SERVE_WITHOUT_TF_POSENC = """
import json, sys
sys.modules["tf_posenc"] = None  # importing it would fail: the SavedModel must not need it
import numpy as np, tensorflow as tf
exported = tf.saved_model.load("exported")
inputs = np.load("serve_inputs.npz")
outputs = {}
for name, count in json.load(open("serve_cases.json")).items():
    given = [tf.constant(inputs[f"{name}:{index}"]) for index in range(count)]
    outputs[name] = exported.serve(given if count > 1 else given[0]).numpy()
np.savez("served.npz", **outputs)
"""


def serve_without_tf_posenc(folder, cases):
    """The outputs of the SavedModel in `folder / "exported"` served in a fresh interpreter where
    tf_posenc cannot be imported: `cases` maps a name to the model's input arrays (a list)."""
    np.savez(
        folder / "serve_inputs.npz",
        **{f"{name}:{index}": array for name, arrays in cases.items() for index, array in enumerate(arrays)},
    )
    (folder / "serve_cases.json").write_text(
        json.dumps({name: len(arrays) for name, arrays in cases.items()})
    )
    run_python(SERVE_WITHOUT_TF_POSENC, folder)
    return dict(np.load(folder / "served.npz"))
