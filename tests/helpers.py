import os
import subprocess
import sys

import keras
import numpy as np
import tensorflow as tf


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
