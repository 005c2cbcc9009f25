"""Side-by-side benchmark: tf_posenc, keras-hub's SinePositionEncoding, and the tutorial's table.

    pip install -e ".[bench]"
    python benchmarks/benchmark.py            # prints Markdown tables
    python benchmarks/benchmark.py --quick    # fewer repetitions, no 65536-position builds

Measures, for each implementation: eager call times on the TensorFlow and JAX backends
(`eager.py`) and a decoding step in a `tf.function`; the largest difference from the float64
formula under each dtype policy; call time as a ratio to a bare `x + table[:, :seq_len, :]` in a
tf.function, with static and `None` sequence lengths, with and without XLA; build time and
peak memory for large `position`; SavedModel and `.keras` sizes.
"""

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from peak_memory import status_mib  # noqa: E402

import tf_posenc  # noqa: E402

IMPLEMENTATIONS = ("tf_posenc", "keras_hub", "tutorial_table")


class TutorialTable(keras.layers.Layer):
    """The precomputed-table design of the tutorials: a float32 table built in TF, sliced per call."""

    def __init__(self, position, d_model, **kwargs):
        super().__init__(**kwargs)
        self.position, self.d_model = position, d_model
        column = tf.range(d_model, dtype=tf.float32)[tf.newaxis, :]
        rates = 1 / tf.pow(10000.0, (2 * (column // 2)) / tf.cast(d_model, tf.float32))
        angles = tf.range(position, dtype=tf.float32)[:, tf.newaxis] * rates
        is_odd = tf.cast(tf.range(d_model) % 2, tf.bool)
        table = tf.where(is_odd, tf.cos(angles), tf.sin(angles))
        self.pos_encoding = table[tf.newaxis]

    def call(self, inputs):
        return inputs + self.pos_encoding[:, : tf.shape(inputs)[1], :]

    def get_config(self):
        return {**super().get_config(), "position": self.position, "d_model": self.d_model}


class KerasHubAdd(keras.layers.Layer):
    """keras-hub's SinePositionEncoding returns the encoding; models add it to their inputs."""

    def __init__(self, position, d_model, **kwargs):
        super().__init__(**kwargs)
        import keras_hub

        self.position, self.d_model = position, d_model
        self.encode = keras_hub.layers.SinePositionEncoding(dtype=kwargs.get("dtype"))

    def call(self, inputs):
        return inputs + self.encode(inputs)

    def get_config(self):
        return {**super().get_config(), "position": self.position, "d_model": self.d_model}


def make_layer(name, position, d_model, dtype=None):
    if name.startswith("tf_posenc"):
        return tf_posenc.PositionalEncoding(position, d_model, dtype=dtype)
    if name == "keras_hub":
        return KerasHubAdd(position, d_model, dtype=dtype)
    return TutorialTable(position, d_model, dtype=dtype)


def float64_formula(position, d_model):
    angles = np.arange(position, dtype=np.float64)[:, None] / np.power(
        10000.0, 2 * (np.arange(d_model) // 2) / d_model
    )
    return np.where(np.arange(d_model) % 2 == 1, np.cos(angles), np.sin(angles))


def accuracy_rows(positions_list, d_model):
    rows = []
    for position in positions_list:
        reference = float64_formula(position, d_model)
        for policy in ("float32", "mixed_float16", "mixed_bfloat16"):
            row = {"position": position, "policy": policy}
            for name in IMPLEMENTATIONS:
                layer = make_layer(name, position, d_model, dtype=policy)
                zeros = tf.zeros((1, position, d_model), layer.compute_dtype)
                spec = [tf.TensorSpec((None, None, d_model), layer.compute_dtype)]
                try:
                    added = traced(name, layer, zeros, input_signature=spec)(zeros)
                    added = tf.cast(added, tf.float64).numpy()[0]
                    error = np.abs(added - reference).max()
                    row[name] = "NaN" if np.isnan(error) else f"{error:.2g}"
                except Exception as failure:  # the tutorial table is float32 only
                    row[name] = "fails: " + type(failure).__name__
            rows.append(row)
    return rows


def traced(name, layer, example, jit_compile=False, input_signature=None):
    """`layer` as a tf.function, traced on `example`."""
    function = tf.function(layer, jit_compile=jit_compile, input_signature=input_signature)
    function(example)
    return function


def time_call(function, x):
    """Seconds per call: the mean of 10 calls, after the result of the last one is ready."""
    started = time.perf_counter()
    for _ in range(10):
        result = function(x)
    result.numpy()
    return (time.perf_counter() - started) / 10


def bare_add(table):
    return lambda x: x + table[:, : tf.shape(x)[1], :]


def best_times(functions, x, repeats):
    """Seconds per call of each function: timed once per round, round after round, keeping the
    best, so that slow spells of a shared machine hit all of them alike."""
    for function in functions.values():
        function(x)
    best = {name: float("inf") for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            best[name] = min(best[name], time_call(function, x))
    return best


def best_step_times(functions, arguments, repeats):
    """Seconds per call of each function over the argument tuples `arguments` (a decoding
    loop: one offset after another), in interleaved rounds keeping the best, after one warm-up
    call each. Returns name -> seconds."""
    for function in functions.values():
        function(*arguments[0])
    best = dict.fromkeys(functions, float("inf"))
    for _ in range(repeats):
        for name, function in functions.items():
            started = time.perf_counter()
            for call in arguments:
                result = function(*call)
            tf.nest.flatten(result)[0].numpy()
            best[name] = min(best[name], (time.perf_counter() - started) / len(arguments))
    return best


def speed_rows(shapes, repeats):
    """Call times of the encodings as ratios to a bare add, in each mode (see `best_times`)."""
    rows = []
    for batch, seq_len, d_model, position in shapes:
        x = tf.random.normal((batch, seq_len, d_model))
        table = tf.constant(float64_formula(seq_len, d_model)[None].astype("float32"))
        for jit in (False, True):
            for dynamic in (False, True):
                spec = [tf.TensorSpec((None, None, d_model))] if dynamic else None
                functions = {"bare": tf.function(bare_add(table), jit_compile=jit, input_signature=spec)}
                for name in IMPLEMENTATIONS:
                    functions[name] = traced(name, make_layer(name, position, d_model), x, jit, spec)
                best = best_times(functions, x, repeats)
                row = {
                    "shape": f"({batch}, {seq_len}, {d_model}), position={position}",
                    "mode": ("XLA" if jit else "graph") + (", None length" if dynamic else ""),
                    "bare add (ms)": f"{best['bare'] * 1e3:.2f}",
                }
                row.update({name: f"{best[name] / best['bare']:.2f}x" for name in IMPLEMENTATIONS})
                rows.append(row)
    return rows


def rotary_reference(x, start, frequencies):
    """The half-layout rotation of `x` (`(batch, seq, heads, dim)`) in float64."""
    x = np.asarray(x, np.float64)
    pairs = x.shape[-1] // 2
    angles = np.arange(start, start + x.shape[1])[:, None] * frequencies
    cos, sin = np.cos(angles)[None, :, None], np.sin(angles)[None, :, None]
    first, second = x[..., :pairs], x[..., pairs:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def rotary_accuracy_rows(dim=128):
    """Largest |rotation - float64 rotation| for tf_posenc's and keras-hub's RotaryEmbedding."""
    import keras_hub

    frequencies = 10000.0 ** -(np.arange(0, dim, 2) / dim)
    rows = []
    for policy in ("float32", "mixed_float16", "mixed_bfloat16"):
        ours = tf_posenc.RotaryEmbedding(dtype=policy)
        theirs = keras_hub.layers.RotaryEmbedding(dtype=policy)
        for start in (0, 4096, 65536, 2**20 - 64):
            x = tf.cast(np.random.default_rng(start).normal(size=(2, 64, 2, dim)), ours.compute_dtype)
            exact = rotary_reference(tf.cast(x, tf.float64).numpy(), start, frequencies)
            floor = np.abs(tf.cast(tf.cast(exact, ours.compute_dtype), tf.float64).numpy() - exact).max()
            row = {"policy": policy, "start": start}
            for name, layer in (("tf_posenc", ours), ("keras_hub", theirs)):
                error = np.abs(tf.cast(layer(x, start_index=start), tf.float64).numpy() - exact).max()
                row[name] = f"{error:.2g}"
            row["rounding floor"] = f"{floor:.2g}"
            rows.append(row)
    return rows


def rotary_drift_rows(dim=128, shift=2**20 - 64, pairs=256):
    """Mean |R(m) q . R(m + 5) k - exact| over random bfloat16 q, k; float32 dot products."""
    import keras_hub

    rng = np.random.default_rng(7)
    q, k = (tf.cast(rng.normal(size=(pairs, 1, 1, dim)), "bfloat16") for _ in range(2))
    frequencies = 10000.0 ** -(np.arange(0, dim, 2) / dim)
    exact = np.sum(
        rotary_reference(tf.cast(q, tf.float64).numpy(), 0, frequencies)
        * rotary_reference(tf.cast(k, tf.float64).numpy(), 5, frequencies),
        axis=(1, 2, 3),
    )
    rows = []
    for name, layer in (
        ("tf_posenc", tf_posenc.RotaryEmbedding(dtype="mixed_bfloat16")),
        ("keras_hub", keras_hub.layers.RotaryEmbedding(dtype="mixed_bfloat16")),
    ):
        row = {"implementation": name}
        for m in (0, 4096, 65536, shift):
            rotated_q = tf.cast(layer(q, start_index=m), tf.float32)
            rotated_k = tf.cast(layer(k, start_index=m + 5), tf.float32)
            scores = tf.reduce_sum(rotated_q * rotated_k, axis=(1, 2, 3)).numpy()
            row[f"m={m}"] = f"{np.mean(np.abs(scores - exact)):.2g}"
        rows.append(row)
    return rows


class TableRotation(keras.layers.Layer):
    """The limit: a rotation with precomputed float32 cos/sin tables, sliced per call."""

    def __init__(self, position, dim, **kwargs):
        super().__init__(**kwargs)
        angles = np.arange(position)[:, None] * 10000.0 ** -(np.arange(0, dim, 2) / dim)
        self.cos = tf.constant(np.cos(angles)[:, None, :].astype("float32"))
        self.sin = tf.constant(np.sin(angles)[:, None, :].astype("float32"))

    def call(self, x):
        length, pairs = tf.shape(x)[1], x.shape[-1] // 2
        cos, sin = self.cos[:length], self.sin[:length]
        first, second = x[..., :pairs], x[..., pairs:]
        return tf.concat([first * cos - second * sin, second * cos + first * sin], axis=-1)


def rotary_speed_rows(shapes, repeats):
    """Call time of the rotations as a ratio to the precomputed-table rotation in the same mode."""
    import keras_hub

    rows = []
    for batch, seq_len, heads, dim in shapes:
        x = tf.random.normal((batch, seq_len, heads, dim))
        for jit in (False, True):
            for dynamic in (False, True):
                spec = [tf.TensorSpec((None, None, heads, dim))] if dynamic else None
                layers = {
                    "table": TableRotation(seq_len, dim),
                    "tf_posenc": tf_posenc.RotaryEmbedding(),
                    "keras_hub": keras_hub.layers.RotaryEmbedding(),
                }
                functions = {
                    name: tf.function(layer, jit_compile=jit, input_signature=spec)
                    for name, layer in layers.items()
                }
                best = best_times(functions, x, repeats)
                row = {
                    "shape": f"({batch}, {seq_len}, {heads}, {dim})",
                    "mode": ("XLA" if jit else "graph") + (", None length" if dynamic else ""),
                    "table rotation (ms)": f"{best['table'] * 1e3:.2f}",
                }
                row.update(
                    {name: f"{best[name] / best['table']:.2f}x" for name in ("tf_posenc", "keras_hub")}
                )
                rows.append(row)
    return rows


ROPE_SHAPE = (8, 2048, 8, 64)
ROPE_FAMILIES = [
    ("llama-3.1-8b", None),
    ("qwen2.5-7b-yarn", None),
    ("deepseek-v3", None),
    ("gpt-oss-20b", None),
    ("phi-3-128k", None),
    ("phi-4-mini", None),
    ("gemma-3-4b", "full_attention"),
    ("gemma-4", "full_attention"),
    ("gpt-neox-20b", None),
    ("llama-2-7b-dynamic", None),
]


def transformers_float32_rotation(x, positions, frequencies, scale):
    """transformers' float32 route, restated in NumPy float32 (`LlamaRotaryEmbedding.forward`
    and `apply_rotary_pos_emb`): float32 inverse frequencies times float32 positions, cos/sin
    of those angles times the attention scaling, then the half-layout rotation of the leading
    features."""
    width = 2 * len(frequencies)
    angles = positions.astype(np.float32)[:, None] * frequencies.astype(np.float32)
    angles = np.concatenate([angles, angles], axis=-1)[None, :, None]
    cos, sin = np.cos(angles) * np.float32(scale), np.sin(angles) * np.float32(scale)
    rotary, passed = x[..., :width], x[..., width:]
    half = width // 2
    rotated = rotary * cos + np.concatenate([-rotary[..., half:], rotary[..., :half]], axis=-1) * sin
    return np.concatenate([rotated, passed], axis=-1)


def rope_type_accuracy_rows(starts=(4032, 32704, 131008)):
    """Largest |rotation - float64 rotation| of each published model's rotary embedding:
    `RotaryEmbedding.from_hf_config`, and transformers' float32 route restated."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from hf_configs import CONFIGS
    from reference import reference_partial_rotation, transformers_rope

    rows = []
    for name, layer_type in ROPE_FAMILIES:
        layer = tf_posenc.RotaryEmbedding.from_hf_config(CONFIGS[name], layer_type=layer_type, layout="half")
        row = {
            "model (config)": name if layer_type is None else f"{name} ({layer_type})",
            "rope_type": layer.rope_type,
        }
        for start in starts:
            frequencies, scale, head_dim = transformers_rope(CONFIGS[name], layer_type, seq_len=start + 64)
            x = np.random.default_rng(start).normal(size=(1, 64, 1, head_dim)).astype("float32")
            positions = np.arange(start, start + 64)
            exact = reference_partial_rotation(x, positions[None], frequencies, "half", scale)
            ours = np.abs(layer(x, start_index=start).numpy() - exact).max()
            theirs = np.abs(transformers_float32_rotation(x, positions, frequencies, scale) - exact).max()
            row[f"p={start + 63}: tf_posenc"] = f"{ours:.2g}"
            row[f"p={start + 63}: transformers"] = f"{theirs:.2g}"
        rows.append(row)
    return rows


class PartialTableRotation(TableRotation):
    """A precomputed-table rotation of the leading `width` features, the rest passed through
    (transformers' `apply_rotary_pos_emb` with a partial rotary width)."""

    def __init__(self, position, width, **kwargs):
        super().__init__(position, width, **kwargs)
        self.width = width

    def call(self, x):
        return tf.concat([super().call(x[..., : self.width]), x[..., self.width :]], axis=-1)


def rope_type_speed_rows(shape, repeats):
    """Call time of each rope type as a ratio to the precomputed-table rotation, per mode (the
    partial rotation's to a partial table rotation)."""
    batch, seq_len, heads, dim = shape
    x = tf.random.normal(shape)
    pairs = dim // 2
    types = {
        "linear": {},
        "llama3": {"rope_type": "llama3", "scaling_factor": 8.0, "original_max_position_embeddings": 1024},
        "yarn": {"rope_type": "yarn", "scaling_factor": 4.0, "original_max_position_embeddings": 1024},
        "yarn, mscale": {"rope_type": "yarn", "scaling_factor": 40.0, "mscale": 0.707, "mscale_all_dim": 1.0},
        "longrope (long)": {"rope_type": "longrope", "short_factor": [1.0] * pairs,
                            "long_factor": [4.0] * pairs, "original_max_position_embeddings": 1024,
                            "max_position_embeddings": 4096},
        "dynamic_ntk": {"rope_type": "dynamic_ntk", "scaling_factor": 2.0, "max_position_embeddings": 1024},
        "proportional": {"rope_type": "proportional", "partial_rotary_factor": 0.25},
        "ntk": {"rope_type": "ntk", "scaling_factor": 4.0},
        "partial 0.5": {"partial_rotary_factor": 0.5},
    }  # fmt: skip
    rows = []
    for jit in (False, True):
        for dynamic in (False, True):
            spec = [tf.TensorSpec((None, None, heads, dim))] if dynamic else None
            layers = {
                "table": TableRotation(seq_len, dim),
                "partial table": PartialTableRotation(seq_len, dim // 2),
            }
            layers.update({kind: tf_posenc.RotaryEmbedding(**kwargs) for kind, kwargs in types.items()})
            if dynamic:  # its frequencies need the length when the call is traced
                del layers["dynamic_ntk"]
            functions = {
                kind: tf.function(layer, jit_compile=jit, input_signature=spec)
                for kind, layer in layers.items()
            }
            best = best_times(functions, x, repeats)
            row = {
                "mode": ("XLA" if jit else "graph") + (", None length" if dynamic else ""),
                "table rotation (ms)": f"{best['table'] * 1e3:.2f}",
            }
            for kind in types:
                baseline = best["partial table" if kind.startswith("partial") else "table"]
                row[kind] = f"{best[kind] / baseline:.2f}x" if kind in best else "refused"
            rows.append(row)
    return rows


def packing_rows(repeats, batch=8, seq_len=2048, d_model=512):
    """Milliseconds of `positions_from_segment_ids` and `segment_attention_mask` on packed rows,
    next to a bare `x + table[:, :seq_len, :]` on the `(batch, seq_len, d_model)` activations."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 300, size=batch * seq_len)
    segments = np.zeros((batch, seq_len), "int32")
    for row in range(batch):
        ids = np.repeat(np.arange(1, seq_len + 1), lengths[row * seq_len : (row + 1) * seq_len])[:seq_len]
        segments[row] = ids
    segments = tf.constant(segments)
    x = tf.random.normal((batch, seq_len, d_model))
    table = tf.constant(float64_formula(seq_len, d_model)[None].astype("float32"))
    rows = []
    for jit in (False, True):
        for dynamic in (False, True):
            ids_spec = [tf.TensorSpec((None, None), tf.int32)] if dynamic else None
            add_spec = [tf.TensorSpec((None, None, d_model))] if dynamic else None
            add = tf.function(bare_add(table), jit_compile=jit, input_signature=add_spec)
            functions = {
                "positions_from_segment_ids": tf.function(
                    tf_posenc.positions_from_segment_ids, jit_compile=jit, input_signature=ids_spec
                ),
                "segment_attention_mask(causal=True)": tf.function(
                    lambda ids: tf_posenc.segment_attention_mask(ids, causal=True),
                    jit_compile=jit,
                    input_signature=ids_spec,
                ),
            }
            best = best_times(functions, segments, repeats)
            best["bare add"] = best_times({"add": add}, x, repeats)["add"]
            row = {"mode": ("XLA" if jit else "graph") + (", None length" if dynamic else "")}
            row["bare add (ms)"] = f"{best['bare add'] * 1e3:.2f}"
            for name in functions:
                row[f"{name} (ms)"] = f"{best[name] * 1e3:.2f} ({best[name] / best['bare add']:.2f}x)"
            rows.append(row)
    return rows


def eager_rows():
    """Eager call times on each Keras backend (`eager.py`, one fresh process per backend)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "eager.py")
    rows = []
    backends = [name for name in ("tensorflow", "jax", "torch") if importlib.util.find_spec(name)]
    for backend in backends:
        completed = subprocess.run(
            [sys.executable, script],
            capture_output=True,
            text=True,
            env={**os.environ, "KERAS_BACKEND": backend},
            timeout=900,
        )
        if completed.returncode:
            rows.append({"backend": backend, "eager call": "failed: " + completed.stderr[-200:]})
            continue
        result = json.loads(completed.stdout.strip().splitlines()[-1])
        for case, times in result["milliseconds"].items():
            rows.append(
                {
                    "backend": backend,
                    "eager call": case,
                    "tf_posenc (ms)": f"{times['tf_posenc']:.2f}",
                    "keras_hub (ms)": f"{times['keras_hub']:.2f}",
                    "table (ms)": f"{times['table']:.2f}" if "table" in times else "",
                    "tf_posenc / keras_hub": f"{times['tf_posenc'] / times['keras_hub']:.2f}x",
                }
            )
    return rows


def of_x_and_t(call, layer):
    """`call(layer, x, t)` as a function of exactly `(x, t)`: a `tf.function` whose Python
    function has more parameters (defaults included) binds them on every call, a cost of the
    harness that would hide part of the layers' difference."""
    return lambda x, t: call(layer, x, t)


def graph_step_rows(repeats):
    """A decoding step in a `tf.function` with a tensor `start_index`, next to keras-hub's and to
    a function of the same signature that only multiplies its input (the call's own cost)."""
    import keras_hub

    cases = [
        (
            "PositionalEncoding (1, 1, 512)",
            (1, 1, 512),
            tf_posenc.PositionalEncoding(2048, 512),
            lambda layer, x, t: x + layer(x, start_index=t),
            keras_hub.layers.SinePositionEncoding(),
        ),
        (
            "RotaryEmbedding (1, 1, 8, 64)",
            (1, 1, 8, 64),
            tf_posenc.RotaryEmbedding(),
            lambda layer, x, t: layer(x, start_index=t),
            keras_hub.layers.RotaryEmbedding(),
        ),
        (  # keras-hub has no LongRoPE: next to its plain rotation
            "RotaryEmbedding longrope (1, 1, 8, 64)",
            (1, 1, 8, 64),
            tf_posenc.RotaryEmbedding(
                rope_type="longrope",
                short_factor=[1.0 + j / 32 for j in range(32)],
                long_factor=[1.0 + j for j in range(32)],
                max_position_embeddings=131072,
            ),
            lambda layer, x, t: layer(x, start_index=t),
            keras_hub.layers.RotaryEmbedding(),
        ),
    ]
    rows = []
    for case, shape, ours, add_theirs, theirs in cases:
        x = tf.random.normal(shape)
        spec = [tf.TensorSpec((None, None, *shape[2:])), tf.TensorSpec((), tf.int32)]
        steps = [tf.constant(t) for t in range(100, 200)]
        functions = {
            "tf_posenc": tf.function(
                of_x_and_t(lambda layer, x, t: layer(x, start_index=t), ours), input_signature=spec
            ),
            "keras_hub": tf.function(of_x_and_t(add_theirs, theirs), input_signature=spec),
            "alone": tf.function(lambda x, t: x * 2.0, input_signature=spec),
        }
        best = best_step_times(functions, [(x, t) for t in steps], repeats)
        rows.append(
            {
                "tf.function step, tensor start_index": case,
                "tf_posenc (ms)": f"{best['tf_posenc'] * 1e3:.2f}",
                "keras_hub (ms)": f"{best['keras_hub'] * 1e3:.2f}",
                "tf_posenc / keras_hub": f"{best['tf_posenc'] / best['keras_hub']:.2f}x",
                "call alone (ms)": f"{best['alone'] * 1e3:.2f}",
                "added by tf_posenc / keras_hub (ms)": " / ".join(
                    f"{(best[name] - best['alone']) * 1e3:.3f}" for name in ("tf_posenc", "keras_hub")
                ),
            }
        )
    return rows


class DecoderStep:
    """A decoding step of 8 grouped-query attention layers (d_model 256, 8 query heads, 4 key/value
    heads, head 32, a key/value cache of 512 slots; no MLP, so that the positions' share is the
    largest it can be), its queries and keys rotated one of four
    ways: `"rows"`, tf_posenc's rows computed once per step and applied in every layer;
    `"table"`, a precomputed float32 cos/sin table gathered once per step; `"keras_hub"`, its
    `RotaryEmbedding` on the queries and keys of every layer; `"calls"`, a tf_posenc call per
    tensor per layer. The mask is `tf_posenc.attention_mask`, once per step, for all four."""

    layers, d_model, heads, kv_heads, head_dim, slots = 8, 256, 8, 4, 32, 512

    def __init__(self, way):
        import keras_hub

        self.way = way
        self.rope = tf_posenc.RotaryEmbedding()
        self.keras_hub_rope = keras_hub.layers.RotaryEmbedding()
        angles = np.arange(self.slots)[:, None] * self.rope.frequencies(self.head_dim)[None]
        angles = np.concatenate([angles, angles], axis=-1)
        self.cos, self.sin = (tf.constant(f(angles)[None].astype("float32")) for f in (np.cos, np.sin))
        rng = np.random.default_rng(0)

        def weight(rows, columns):
            return tf.constant(rng.normal(0, columns**-0.5, (rows, columns)).astype("float32"))

        widths = (self.heads * self.head_dim, self.kv_heads * self.head_dim, self.kv_heads * self.head_dim)
        self.weights = [
            {
                "qkv": [weight(self.d_model, width) for width in widths],
                "out": weight(self.heads * self.head_dim, self.d_model),
            }
            for _ in range(self.layers)
        ]

    def empty_cache(self):
        shape = (1, self.slots, self.kv_heads, self.head_dim)
        return [tf.zeros(shape) for _ in range(2 * self.layers)]

    def rotate_half(self, x, cos, sin):
        first, second = tf.split(x, 2, axis=-1)
        return x * cos + tf.concat([-second, first], axis=-1) * sin

    def __call__(self, x, t, cache):
        positions = tf.reshape(t, (1, 1))
        slots = tf.range(self.slots)
        mask = tf_posenc.attention_mask(positions, slots, key_mask=slots <= t)[:, None]
        if self.way == "rows":
            rows = self.rope.rows(tf.zeros((1, 1, 1, self.head_dim)), start_index=t)
        elif self.way == "table":
            cos, sin = (tf.gather(table, positions, axis=1)[:, 0, :, None] for table in (self.cos, self.sin))
        new_cache = []
        for layer, weights in enumerate(self.weights):
            q, k, v = (tf.matmul(x, w) for w in weights["qkv"])
            q = tf.reshape(q, (1, 1, self.heads, self.head_dim))
            k, v = (tf.reshape(y, (1, 1, self.kv_heads, self.head_dim)) for y in (k, v))
            if self.way == "rows":
                q, k = self.rope(q, rows=rows), self.rope(k, rows=rows)
            elif self.way == "table":
                q, k = self.rotate_half(q, cos, sin), self.rotate_half(k, cos, sin)
            elif self.way == "keras_hub":
                q, k = self.keras_hub_rope(q, start_index=t), self.keras_hub_rope(k, start_index=t)
            else:
                q, k = self.rope(q, start_index=t), self.rope(k, start_index=t)
            keys = keras.ops.slice_update(cache[2 * layer], (0, t, 0, 0), k)
            values = keras.ops.slice_update(cache[2 * layer + 1], (0, t, 0, 0), v)
            new_cache += [keys, values]
            mixed = keras.ops.dot_product_attention(q, keys, values, mask=mask)
            x = x + tf.matmul(tf.reshape(mixed, (1, 1, -1)), weights["out"])
        return x, new_cache


def model_step_rows(repeats):
    """The decoding step of `DecoderStep` in a tf.function with a tensor cache index, each way of
    rotating, as ratios to the precomputed table in the same mode."""
    rows = []
    for jit_compile in (False, True):
        ways = ("rows", "table", "keras_hub", "calls")
        specs = [
            tf.TensorSpec((1, 1, DecoderStep.d_model)),
            tf.TensorSpec((), tf.int32),
            [tf.TensorSpec((1, DecoderStep.slots, DecoderStep.kv_heads, DecoderStep.head_dim))]
            * (2 * DecoderStep.layers),
        ]
        steps = {
            way: tf.function(DecoderStep(way), input_signature=specs, jit_compile=jit_compile) for way in ways
        }
        x = tf.random.normal((1, 1, DecoderStep.d_model))
        cache = DecoderStep("table").empty_cache()
        indices = [tf.constant(t) for t in range(100, 150)]
        best = best_step_times(steps, [(x, t, cache) for t in indices], repeats)
        rows.append(
            {
                "8-layer decoding step": "XLA" if jit_compile else "graph",
                "table (ms)": f"{best['table'] * 1e3:.3f}",
                **{
                    f"{way} / table": f"{best[way] / best['table']:.3f}x"
                    for way in ("rows", "keras_hub", "calls")
                },
                "rows / keras_hub": f"{best['rows'] / best['keras_hub']:.3f}x",
            }
        )
    return rows


def bias_functions(layer, table, shape, jit_compile):
    """`layer` and the addition of its precomputed `table` to scores of `shape`, as functions of
    exactly `(scores, t)`, `t` the query's position where the scores are a decoding step's."""
    spec = [tf.TensorSpec(shape), tf.TensorSpec((), tf.int32)]
    step, everywhere = shape[2] == 1, tf.range(shape[3])

    def with_layer(x, t):
        queries = tf.reshape(t, (1, 1)) if step else everywhere
        return layer(x, query_positions=queries, key_positions=everywhere)

    def with_table(x, t):
        return x + (table[:, :, t : t + 1, :] if step else table)

    return {
        way: tf.function(function, input_signature=spec, jit_compile=jit_compile)
        for way, function in (("layer", with_layer), ("table", with_table))
    }


def bare_add_of(table):
    """`x + table`, a function of `x` alone (a default argument would be bound on every call)."""
    return lambda x: x + table


def window_bias_rows(repeats, heads=8, window=12, windows=256):
    """Swin's, BEiT's and Swin v2's window biases on `(windows, heads, N, N)` scores (`N` a
    12 x 12 window's tokens, plus BEiT's class token), as ratios to adding the same bias
    precomputed, in the same mode."""
    layers = {
        "WindowPositionBias (Swin)": tf_posenc.WindowPositionBias(window, heads),
        "WindowPositionBias (BEiT)": tf_posenc.WindowPositionBias(window, heads, num_prefix_tokens=1),
        "ContinuousPositionBias (Swin v2)": tf_posenc.ContinuousPositionBias(window, heads),
    }
    rows = []
    for name, layer in layers.items():
        table = layer.bias()[None]
        tokens = table.shape[-1]
        scores = tf.random.normal((windows, heads, tokens, tokens))
        for jit_compile in (False, True):
            spec = [tf.TensorSpec(scores.shape)]
            functions = {
                "layer": tf.function(layer, input_signature=spec, jit_compile=jit_compile),
                "table": tf.function(bare_add_of(table), input_signature=spec, jit_compile=jit_compile),
            }
            best = best_times(functions, scores, repeats)
            rows.append(
                {
                    "bias": name,
                    "scores": str(tuple(scores.shape)),
                    "mode": "XLA" if jit_compile else "graph",
                    "table (ms)": f"{best['table'] * 1e3:.3f}",
                    "layer (ms)": f"{best['layer'] * 1e3:.3f}",
                    "layer / table": f"{best['layer'] / best['table']:.2f}x",
                }
            )
    return rows


def bias_rows(repeats, heads=8, length=1024):
    """Each attention-score bias on `(8, heads, length, length)` scores and on a decoding step's
    `(1, heads, 1, length)` (a tensor query position), as ratios to adding a precomputed
    `(heads, length, length)` float32 table of the same bias, in the same mode."""
    layers = {
        "AlibiBias": tf_posenc.AlibiBias(num_heads=heads),
        "RelativePositionBias": tf_posenc.RelativePositionBias(heads, 32, 128),
    }
    everywhere = tf.range(length)
    rows = []
    for name, layer in layers.items():
        table = layer.bias(everywhere, everywhere)  # built, and the table to compare with
        for case, shape in (
            ("(8, 1024) full", (8, heads, length, length)),
            ("(1, 1) step", (1, heads, 1, length)),
        ):
            scores = tf.random.normal(shape)
            for jit_compile in (False, True):
                functions = bias_functions(layer, table, shape, jit_compile)
                best = best_step_times(
                    functions, [(scores, tf.constant(t)) for t in range(500, 520)], repeats
                )
                rows.append(
                    {
                        "bias": name,
                        "scores": case,
                        "mode": "XLA" if jit_compile else "graph",
                        "table (ms)": f"{best['table'] * 1e3:.3f}",
                        "layer (ms)": f"{best['layer'] * 1e3:.3f}",
                        "layer / table": f"{best['layer'] / best['table']:.2f}x",
                    }
                )
    return rows


BUILD_PROBE = """
import json, os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
sys.path.insert(0, {here!r})
import tensorflow as tf
import benchmark
from peak_memory import extra_peak_mib, start_peak_measurement
name, position, d_model = {name!r}, {position}, {d_model}
x = tf.zeros((2, 128, d_model))
# Load the kernels first, with a different shape so that nothing computed is reused.
benchmark.make_layer(name, 256, d_model)(tf.zeros((2, 64, d_model)))
before = start_peak_measurement()
started = time.perf_counter()
layer = benchmark.make_layer(name, position, d_model)
layer(x).numpy()
seconds = time.perf_counter() - started
print(json.dumps({{"seconds": seconds, "mib": extra_peak_mib(before)}}))
"""


def run_probe(code, timeout=900):
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    if completed.returncode:
        return None
    return json.loads(completed.stdout.strip().splitlines()[-1])


def build_rows(configs):
    here = os.path.dirname(os.path.abspath(__file__))
    rows = []
    for position, d_model, skip in configs:
        row = {"position x d_model": f"{position} x {d_model}"}
        for name in IMPLEMENTATIONS:
            if name in skip:
                row[name] = skip[name]
                continue
            result = run_probe(BUILD_PROBE.format(here=here, name=name, position=position, d_model=d_model))
            row[name] = "failed" if result is None else f"{result['seconds']:.2f} s, {result['mib']:.0f} MiB"
        rows.append(row)
    return rows


def folder_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(
        os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names
    )


def artifact_rows(position, d_model):
    rows = []
    for name in IMPLEMENTATIONS:
        inputs = keras.Input((None, d_model))
        model = keras.Model(inputs, make_layer(name, position, d_model)(inputs))
        with tempfile.TemporaryDirectory() as folder:
            model.save(os.path.join(folder, "model.keras"))
            model.export(os.path.join(folder, "exported"), verbose=False)
            rows.append(
                {
                    "implementation": name,
                    "model": f"Input((None, {d_model})) -> layer(position={position}, d_model={d_model})",
                    ".keras": f"{folder_bytes(os.path.join(folder, 'model.keras')) / 2**20:.3f} MiB",
                    "SavedModel": f"{folder_bytes(os.path.join(folder, 'exported')) / 2**20:.3f} MiB",
                }
            )
    return rows


def markdown(rows):
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(row[key]) for key in header) + " |" for row in rows]
    return "\n".join(lines)


def machine():
    model = "unknown CPU"
    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{model}, {os.cpu_count()} cores, {memory:.0f} GiB, no GPU; Python "
        f"{platform.python_version()}, TensorFlow {tf.__version__}, Keras {keras.__version__}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and sizes")
    parser.add_argument("--only", choices=["model-step", "graph-step", "biases"], help="run one table alone")
    args = parser.parse_args()
    repeats = 5 if args.quick else 15
    tutorial_too_big = {"tutorial_table": "not run: its float64 scratch needs > 24 GiB"}
    print(f"Machine: {machine()}\n")
    if args.only:
        tables = {
            "model-step": model_step_rows,
            "graph-step": graph_step_rows,
            "biases": lambda repeats: bias_rows(repeats) + window_bias_rows(repeats),
        }
        print(markdown(tables[args.only](repeats)))
        return
    print("### Eager calls: milliseconds per call, in a Python loop over start positions\n")
    print(markdown(eager_rows()))
    print("\n### A decoding step in a tf.function with a tensor start_index\n")
    print(markdown(graph_step_rows(repeats)))
    print("\n### A decoder's step: 8 layers, rows once per step, next to a precomputed table\n")
    print(markdown(model_step_rows(repeats)))
    print("\n### Largest |encoding - float64 formula| (d_model=128, `None` sequence length)\n")
    print(markdown(accuracy_rows([512, 131072] if not args.quick else [512], 128)))
    print("\n### Call time, ratio to a bare `x + table[:, :seq_len, :]` in the same mode\n")
    shapes = [(32, 512, 512, 2048), (8, 2048, 256, 8192)]
    print(markdown(speed_rows(shapes if not args.quick else shapes[:1], repeats)))
    print("\n### Build and first call on (2, 128, d_model): time and extra peak memory\n")
    configs = [(65536, 1024, {}), (2**20, 1024, tutorial_too_big)]
    print(markdown(build_rows(configs if not args.quick else configs[1:])))
    print("\n### Saved sizes\n")
    print(markdown(artifact_rows(65536 if not args.quick else 8192, 1024)))
    print("\n### RotaryEmbedding: largest |rotation - float64 rotation|, head size 128\n")
    print(markdown(rotary_accuracy_rows()))
    print("\n### RotaryEmbedding: mean |R(m) q . R(m + 5) k - exact| over 256 pairs, mixed_bfloat16\n")
    print(markdown(rotary_drift_rows()))
    print("\n### RotaryEmbedding: call time, ratio to a rotation with precomputed float32 tables\n")
    rotary_shapes = [(8, 2048, 8, 64), (32, 512, 16, 64)]
    print(markdown(rotary_speed_rows(rotary_shapes if not args.quick else rotary_shapes[1:], repeats)))
    print("\n### RotaryEmbedding from published configs: largest |rotation - float64 rotation|\n")
    print(markdown(rope_type_accuracy_rows()))
    print(f"\n### Rope types: call time on {ROPE_SHAPE}, ratio to the precomputed-table rotation\n")
    print(markdown(rope_type_speed_rows(ROPE_SHAPE, repeats)))
    print("\n### Attention-score biases, ratio to adding a precomputed bias table\n")
    print(markdown(bias_rows(repeats) + window_bias_rows(repeats)))
    print("\n### Packing: segment ids of (8, 2048) packed rows, next to a bare add on (8, 2048, 512)\n")
    print(markdown(packing_rows(repeats)))
    print(f"\nPeak memory of this process: {status_mib('VmHWM') / 1024:.1f} GiB")


if __name__ == "__main__":
    main()
