"""keras-hub's own models before and after `tf_posenc.keras_hub.exact_rotary`: how far each
backbone's rotation is from keras-hub's formulas in float64 at large positions, and what a cached
decoding step and `generate` cost.

    python benchmarks/keras_hub_models.py           # both tables, as Markdown
    python benchmarks/keras_hub_models.py --quick   # fewer repetitions
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from test_keras_hub import BACKBONES, built, keras_hub_rotary_sites, keras_hub_rotation  # noqa: E402

from tf_posenc import RotaryEmbedding  # noqa: E402
from tf_posenc.keras_hub import exact_rotary  # noqa: E402


def drift_table():
    """Per backbone, the largest |rotation - float64| of keras-hub's layer and of the swap."""
    rows = [
        "| backbone | keras-hub at 2^17 | swap at 2^17 | keras-hub at 2^20 | swap at 2^20 |",
        "|---|---|---|---|---|",
    ]
    for name in BACKBONES:
        errors = {}
        for _, _, layer in keras_hub_rotary_sites(built(name)):
            if type(layer).__name__ == "SmolLM3RotaryEmbedding":
                continue  # a (cos, sin) layer: its adapter's rows are tested in tests/test_keras_hub.py
            width = 8 if layer.denominator_dim is None else layer.denominator_dim
            x = np.random.default_rng(1).normal(size=(1, 16, 2, width)).astype("float32")
            ours = RotaryEmbedding.from_keras_hub(layer)
            for start in (2**17, 2**20 - 16):
                exact = keras_hub_rotation(layer, x, start)
                scale = np.abs(exact).max()
                theirs = keras.ops.convert_to_numpy(layer(x, start_index=start))
                for who, got in (("keras-hub", theirs), ("swap", ours(x, start_index=start).numpy())):
                    key = (who, start)
                    errors[key] = max(errors.get(key, 0.0), float(np.abs(got - exact).max() / scale))
        if not errors:
            continue
        cells = [
            f"{errors[(who, start)]:.1e}" for start in (2**17, 2**20 - 16) for who in ("keras-hub", "swap")
        ]
        rows.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(rows)


def llama3(hidden, layers, heads, kv_heads):
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.Llama3Backbone(
        vocabulary_size=256, num_layers=layers, num_query_heads=heads, num_key_value_heads=kv_heads,
        hidden_dim=hidden, intermediate_dim=2 * hidden, rope_max_wavelength=500000,
        rope_frequency_adjustment_factor=8.0, rope_low_freq_factor=1.0, rope_high_freq_factor=4.0,
        rope_pretraining_sequence_length=8192,
    )  # fmt: skip
    causal_lm = keras_hub.models.Llama3CausalLM(backbone=backbone, preprocessor=None)
    causal_lm.compile(sampler="greedy")
    return causal_lm


def step_ms(causal_lm, jit_compile, repeats):
    """ms per cached single-token step (`call_with_cache`) over a 256-slot cache, at index 128."""
    tokens = np.ones((1, 256), "int32")
    _, cache = causal_lm._build_cache(tokens)
    step = tf.function(
        lambda token, cache, index: causal_lm.call_with_cache(token, cache, index)[0], jit_compile=jit_compile
    )
    token, index = tf.constant(tokens[:, :1]), tf.constant(128)
    step(token, cache, index)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(20):
            step(token, cache, index).numpy()
        times.append((time.perf_counter() - start) / 20 * 1000)
    return min(times)


def generate_ms(causal_lm, repeats):
    prompt = {"token_ids": np.ones((1, 64), "int32"), "padding_mask": np.array([[1] * 8 + [0] * 56])}
    causal_lm.generate(prompt, stop_token_ids=None)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        causal_lm.generate(prompt, stop_token_ids=None)
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def cost_table(repeats):
    rows = [
        "| model | measure | keras-hub (ms) | swap (ms) | swap / keras-hub |",
        "|---|---|---|---|---|",
    ]
    for label, shape in (
        ("tiny Llama 3 (2 layers, 32 wide)", (32, 2, 4, 2)),
        ("Llama 3, 4 layers, 512 wide", (512, 4, 8, 2)),
    ):
        causal_lm = llama3(*shape)
        theirs = {
            "cached step, graph": step_ms(causal_lm, False, repeats),
            "cached step, XLA": step_ms(causal_lm, True, repeats),
            "generate 56 tokens": generate_ms(causal_lm, repeats),
        }
        exact_rotary(causal_lm)
        ours = {
            "cached step, graph": step_ms(causal_lm, False, repeats),
            "cached step, XLA": step_ms(causal_lm, True, repeats),
            "generate 56 tokens": generate_ms(causal_lm, repeats),
        }
        for measure, value in theirs.items():
            rows.append(
                f"| {label} | {measure} | {value:.2f} | {ours[measure]:.2f} | {ours[measure] / value:.2f}x |"
            )
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("drift", "cost"))
    arguments = parser.parse_args()
    if arguments.only in (None, "drift"):
        print("Rotation, largest |result - float64 keras-hub formula| / largest |float64|, tiny backbones:\n")
        print(drift_table())
    if arguments.only in (None, "cost"):
        print("\nCost (one run; compare the ratios):\n")
        print(cost_table(3 if arguments.quick else 7))


if __name__ == "__main__":
    main()
