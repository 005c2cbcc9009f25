"""Eager call times of tf_posenc, keras-hub and a precomputed table, on the current Keras backend.

    KERAS_BACKEND=jax python benchmarks/eager.py     # prints one JSON object: milliseconds per call

`benchmark.py` runs it once per backend it finds installed (PyTorch: in an environment made from
`tests/torch.txt` plus keras-hub). Each call is timed in a loop of Python calls, as a
decoding loop or an eager notebook makes them, in interleaved rounds keeping the best.
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

import tf_posenc  # noqa: E402

POSITION = 2048


def table(d_model):
    angles = np.arange(POSITION)[:, None] / 10000.0 ** (2 * (np.arange(d_model) // 2) / d_model)
    return np.where(np.arange(d_model) % 2, np.cos(angles), np.sin(angles)).astype("float32")


def rotation_tables(dim):
    angles = np.arange(POSITION)[:, None] * 10000.0 ** -(np.arange(0, dim, 2) / dim)
    return ops.convert_to_tensor(np.cos(angles)[:, None].astype("float32")), ops.convert_to_tensor(
        np.sin(angles)[:, None].astype("float32")
    )


def table_rotation(x, start, cos, sin):
    pairs = x.shape[-1] // 2
    cos, sin = cos[start : start + x.shape[1]], sin[start : start + x.shape[1]]
    first, second = x[..., :pairs], x[..., pairs:]
    return ops.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def calls(name, x, position):
    """The call of implementation `name` for inputs `x` at a start below `position`."""
    if x.ndim == 3:
        d_model = x.shape[-1]
        if name == "tf_posenc":
            layer = tf_posenc.PositionalEncoding(position, d_model)
            return lambda t: layer(x, start_index=t)
        if name == "keras_hub":
            layer = keras_hub.layers.SinePositionEncoding()
            return lambda t: x + layer(x, start_index=t)
        rows = ops.convert_to_tensor(table(d_model))
        return lambda t: x + rows[t : t + x.shape[1]]
    if name == "tf_posenc":
        layer = tf_posenc.RotaryEmbedding()
        return lambda t: layer(x, start_index=t)
    if name == "keras_hub":
        layer = keras_hub.layers.RotaryEmbedding()
        return lambda t: layer(x, start_index=t)
    cos, sin = rotation_tables(x.shape[-1])
    return lambda t: table_rotation(x, t, cos, sin)


def best_ms(functions, rounds):
    """The best milliseconds per call of each function over `rounds`, each a list of starts."""
    for function in functions.values():
        ops.convert_to_numpy(function(rounds[0][0]))
    best = dict.fromkeys(functions, float("inf"))
    for steps in rounds:
        for name, function in functions.items():
            started = time.perf_counter()
            for t in steps:
                result = function(t)
            ops.convert_to_numpy(result)
            best[name] = min(best[name], (time.perf_counter() - started) / len(steps) * 1e3)
    return best


# shape and number of calls; the calls decode consecutive positions (a decoding loop), repeat
# one range from position 0 (a prompt of one length, or a training step), start anywhere below
# 2048 (ranges that come back), or start at new blocks each time, anywhere below 2**20 and with
# new starts in every round (no table: it would hold 2**20 rows); last, calls at new lengths.
CASES = {
    "PositionalEncoding, one decoding step (1, 1, 512)": ((1, 1, 512), 100),
    "RotaryEmbedding, one decoding step (1, 1, 8, 64)": ((1, 1, 8, 64), 100),
    "PositionalEncoding, consecutive decoding steps (1, 1, 512)": ((1, 1, 512), 128),
    "RotaryEmbedding, consecutive decoding steps (1, 1, 8, 64)": ((1, 1, 8, 64), 128),
    "PositionalEncoding, full sequence (8, 512, 512)": ((8, 512, 512), 10),
    "RotaryEmbedding, full sequence (1, 32, 4, 64)": ((1, 32, 4, 64), 50),
    "PositionalEncoding, full sequence from position 0, repeated (8, 512, 512)": ((8, 512, 512), 10),
    "RotaryEmbedding, full sequence from position 0, repeated (1, 32, 4, 64)": ((1, 32, 4, 64), 50),
    "PositionalEncoding, one decoding step at a new block (1, 1, 512)": ((1, 1, 512), 100),
    "RotaryEmbedding, one decoding step at a new block (1, 1, 8, 64)": ((1, 1, 8, 64), 100),
    "PositionalEncoding, full sequence at new blocks (8, 512, 512)": ((8, 512, 512), 10),
    "RotaryEmbedding, full sequence at new blocks (1, 32, 4, 64)": ((1, 32, 4, 64), 50),
}
FAR = 2**20
ROUNDS = 5
NEW_LENGTHS_CASE = "PositionalEncoding (1, n, 256), every call at a length no call has used (40 below 4096)"


def new_lengths_ms(rng):
    """Milliseconds per call over 40 calls, each at a length no call (of either) has used: what a
    notebook or a loop over variable lengths pays where a backend compiles per shape (JAX)."""
    lengths = [int(n) for n in rng.choice(np.arange(1, 4096), size=80, replace=False)]
    hub = keras_hub.layers.SinePositionEncoding()
    functions = {
        "tf_posenc": tf_posenc.PositionalEncoding(4096, 256),
        "keras_hub": lambda x: x + hub(x),
    }
    result = {}
    for offset, (name, function) in enumerate(functions.items()):
        started = time.perf_counter()
        for length in lengths[offset::2]:
            ops.convert_to_numpy(function(ops.zeros((1, length, 256))))
        result[name] = (time.perf_counter() - started) / 40 * 1e3
    return result


def main():
    rng = np.random.default_rng(0)
    result = {}
    for case, (shape, count) in CASES.items():
        x = ops.convert_to_tensor(rng.normal(size=shape).astype("float32"))
        position = FAR if "new block" in case else POSITION
        steps = [int(t) for t in rng.integers(0, POSITION - shape[1], size=count)]
        if "consecutive" in case:
            first = steps[0] % (POSITION - count)
            steps = list(range(first, first + count))
        if "from position 0" in case:
            steps = [0] * count
        rounds = [steps] * ROUNDS
        if "new block" in case:
            rounds = [[int(t) for t in rng.integers(0, FAR - shape[1], size=count)] for _ in range(ROUNDS)]
        names = ("tf_posenc", "keras_hub") if "new block" in case else ("tf_posenc", "keras_hub", "table")
        functions = {name: calls(name, x, position) for name in names}
        result[case] = best_ms(functions, rounds)
    result[NEW_LENGTHS_CASE] = new_lengths_ms(rng)
    print(json.dumps({"backend": keras.backend.backend(), "milliseconds": result}))


if __name__ == "__main__":
    sys.exit(main())
