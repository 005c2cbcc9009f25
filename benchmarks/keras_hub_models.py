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


def llama3(hidden, layers, heads, kv_heads, jit_compile=False):
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.Llama3Backbone(
        vocabulary_size=256, num_layers=layers, num_query_heads=heads, num_key_value_heads=kv_heads,
        hidden_dim=hidden, intermediate_dim=2 * hidden, rope_max_wavelength=500000,
        rope_frequency_adjustment_factor=8.0, rope_low_freq_factor=1.0, rope_high_freq_factor=4.0,
        rope_pretraining_sequence_length=8192,
    )  # fmt: skip
    causal_lm = keras_hub.models.Llama3CausalLM(backbone=backbone, preprocessor=None)
    # keras-hub runs `generate` under XLA where the model is compiled so (Keras's "auto" picks it
    # on machines with a GPU, not on CPU-only ones).
    causal_lm.compile(sampler="greedy", jit_compile=jit_compile)
    return causal_lm


def cached_step(causal_lm):
    """A timer of one cached single-token step (`call_with_cache`) over a 256-slot cache, at
    index 128, in ms; under XLA where the model is compiled with `jit_compile=True`."""
    tokens = np.ones((1, 256), "int32")
    _, cache = causal_lm._build_cache(tokens)
    step = tf.function(
        lambda token, cache, index: causal_lm.call_with_cache(token, cache, index)[0],
        jit_compile=causal_lm.jit_compile,
    )
    token, index = tf.constant(tokens[:, :1]), tf.constant(128)

    def timed():
        start = time.perf_counter()
        step(token, cache, index).numpy()
        return (time.perf_counter() - start) * 1000

    return timed


def generation(causal_lm):
    """A timer of one greedy `generate` of 56 tokens after an 8-token prompt, in ms."""
    prompt = {"token_ids": np.ones((1, 64), "int32"), "padding_mask": np.array([[1] * 8 + [0] * 56])}

    def timed():
        start = time.perf_counter()
        causal_lm.generate(prompt, stop_token_ids=None)
        return (time.perf_counter() - start) * 1000

    return timed


def paired(theirs, ours, rounds, warmup=5):
    """Both timers one call each per round, in alternating order, so that a slow spell of the
    machine falls on both calls of a round: the best time of each, and the median of the
    rounds' ratios."""
    for _ in range(warmup):
        theirs(), ours()
    times = {"theirs": [], "ours": []}
    for round_ in range(rounds):
        order = (("theirs", theirs), ("ours", ours))
        for who, timer in order if round_ % 2 == 0 else order[::-1]:
            times[who].append(timer())
    ratios = np.array(times["ours"]) / np.array(times["theirs"])
    return min(times["theirs"]), min(times["ours"]), float(np.median(ratios))


def cost_table(step_rounds, generate_rounds):
    """Per model and measure: keras-hub's model against the same weights swapped, in one run."""
    rows = [
        "| model | measure | keras-hub (ms) | swap (ms) | best / best | median of ratios |",
        "|---|---|---|---|---|---|",
    ]
    for label, shape in (
        ("tiny Llama 3 (2 layers, 32 wide)", (32, 2, 4, 2)),
        ("Llama 3, 4 layers, 512 wide", (512, 4, 8, 2)),
    ):
        for measure, timer, rounds in (
            ("cached step", cached_step, step_rounds),
            ("generate 56 tokens", generation, generate_rounds),
        ):
            for jit_compile, mode in ((False, "graph"), (True, "XLA")):
                # The same seed: the same weights.
                theirs, ours = llama3(*shape, jit_compile), exact_rotary(llama3(*shape, jit_compile))
                best_theirs, best_ours, median = paired(timer(theirs), timer(ours), rounds)
                rows.append(
                    f"| {label} | {measure}, {mode} | {best_theirs:.2f} | {best_ours:.2f} | "
                    f"{best_ours / best_theirs:.2f}x | {median:.2f}x |"
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
        print("\nCost (one run, the two models timed in turn; compare the ratios):\n")
        print(cost_table(*((100, 10) if arguments.quick else (1000, 60))))


if __name__ == "__main__":
    main()
