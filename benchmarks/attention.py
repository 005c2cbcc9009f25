"""What the attention layers' positions cost: `tf_posenc.MultiHeadAttention` and
`GroupQueryAttention` against the layers a Keras user has without them (or keras-hub's, for
DeBERTa-v3), in graphs and under XLA.

    python benchmarks/attention.py            # the table, as Markdown
    python benchmarks/attention.py --quick    # fewer rounds

Each row times two functions in alternating rounds within one run (these machines are noisy):
the best time of each, and the median of the per-round ratios.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

import tf_posenc  # noqa: E402

WIDTH, HEADS, KV_HEADS, HEAD_DIM, LAYERS, SLOTS = 512, 8, 2, 64, 4, 1024


def paired_times(ours, theirs, arguments, rounds, calls):
    """Best milliseconds per call of each, and the median of their per-round ratios."""
    for function in (ours, theirs):
        function(*arguments)  # trace and compile
    best, ratios = {"ours": float("inf"), "theirs": float("inf")}, []
    for _ in range(rounds):
        times = {}
        for name, function in (("ours", ours), ("theirs", theirs)):
            start = time.perf_counter()
            for _ in range(calls):
                result = function(*arguments)
            keras.ops.convert_to_numpy(tf.nest.flatten(result)[0])
            times[name] = (time.perf_counter() - start) / calls * 1000
            best[name] = min(best[name], times[name])
        ratios.append(times["ours"] / times["theirs"])
    return best["ours"], best["theirs"], statistics.median(ratios)


def decoding_step(jit_compile):
    """A cached step of a 4-layer, 512-wide grouped-query decoder: tf_posenc's layers against
    keras-hub's Llama attention (its rotary layer on queries and keys, its cache)."""
    from keras_hub.src.models.llama.llama_attention import LlamaAttention

    keras.utils.set_random_seed(0)
    rope = tf_posenc.RotaryEmbedding()
    ours = [tf_posenc.GroupQueryAttention(HEAD_DIM, HEADS, KV_HEADS, rope=rope) for _ in range(LAYERS)]
    theirs = [LlamaAttention(HEADS, KV_HEADS, rope_max_wavelength=10000) for _ in range(LAYERS)]
    x = np.random.default_rng(0).normal(size=(1, 1, WIDTH)).astype("float32")
    cache = np.zeros((1, 2, SLOTS, KV_HEADS, HEAD_DIM), "float32")
    for layer in ours:
        layer(x, x)
    for layer in theirs:
        layer(x, cache=cache, cache_update_index=0, attention_mask=np.ones((1, 1, SLOTS), bool))

    @tf.function(jit_compile=jit_compile)
    def our_step(x, cache, index):
        for layer in ours:
            x, _ = layer(x, x, cache=cache, cache_update_index=index, use_causal_mask=True)
        return x

    @tf.function(jit_compile=jit_compile)
    def their_step(x, cache, index):
        # keras-hub's decoder computes the step's mask from the cache index, as here.
        mask = ops.expand_dims(ops.less_equal(ops.arange(SLOTS), index), 0)[:, None, :]
        for layer in theirs:
            x, _ = layer(x, attention_mask=mask, cache=cache, cache_update_index=index)
        return x

    return paired_times(our_step, their_step, (x, cache, tf.constant(500)), ROUNDS, 50)


def full_pass(jit_compile, bias=None):
    """A causal pass of `(4, 512, 512)`: `MultiHeadAttention` with a rotation (or a score bias)
    against Keras's layer without positions (or the same layer given the bias precomputed)."""
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(4, 512, WIDTH)).astype("float32")
    if bias is None:
        ours = tf_posenc.MultiHeadAttention(HEADS, HEAD_DIM, rope=tf_posenc.RotaryEmbedding())
        theirs = keras.layers.MultiHeadAttention(HEADS, HEAD_DIM)
        ours(x, x)
        theirs(x, x)
        theirs.set_weights(ours.get_weights())

        def their_call(x):
            return theirs(x, x, use_causal_mask=True)

    else:
        ours = tf_posenc.MultiHeadAttention(HEADS, HEAD_DIM, position_bias=bias)
        ours(x, x)
        positions = np.arange(512)
        precomputed = ops.convert_to_tensor(bias.bias(positions, positions))
        causal = ops.convert_to_tensor(np.tril(np.ones((1, 1, 512, 512), bool)))
        masked = ops.where(causal, precomputed, -1e9)

        def their_call(x):
            q, k, v = ours._query_dense(x), ours._key_dense(x), ours._value_dense(x)
            mixed = ops.dot_product_attention(q, k, v, bias=masked, scale=HEAD_DIM**-0.5)
            return ours._output_dense(mixed)

    our_call = tf.function(lambda x: ours(x, x, use_causal_mask=True), jit_compile=jit_compile)
    return paired_times(our_call, tf.function(their_call, jit_compile=jit_compile), (x,), ROUNDS, 5)


def deberta_pass(jit_compile):
    """A bidirectional pass of `(4, 512, 512)` through DeBERTa-v3's attention (256 buckets, both
    terms, the table's LayerNorm): `MultiHeadAttention` with a `DisentangledPositionBias` against
    keras-hub's own `DisentangledSelfAttention` and `RelativeEmbedding`."""
    from keras_hub.src.models.deberta_v3.disentangled_self_attention import DisentangledSelfAttention
    from keras_hub.src.models.deberta_v3.relative_embedding import RelativeEmbedding

    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(4, 512, WIDTH)).astype("float32")
    bias = tf_posenc.DisentangledPositionBias(HEADS, WIDTH, position_buckets=256)
    ours = tf_posenc.MultiHeadAttention(HEADS, HEAD_DIM, position_bias=bias)
    ours(x, x)
    table = RelativeEmbedding(WIDTH, bucket_size=256)
    theirs = DisentangledSelfAttention(HEADS, WIDTH, bucket_size=256, dropout=0.0)
    # Both given the padding mask of a full batch (keras-hub's layer takes no `None` mask).
    pairs = ops.convert_to_tensor(np.ones((4, 512, 512), bool))
    theirs(x, table(x), attention_mask=pairs)

    def their_call(x):
        return theirs(x, table(x), attention_mask=pairs)

    our_call = tf.function(lambda x: ours(x, x, attention_mask=pairs), jit_compile=jit_compile)
    return paired_times(our_call, tf.function(their_call, jit_compile=jit_compile), (x,), ROUNDS, 5)


def timed_rows(measures, other="peer"):
    """The Markdown table of `(name, against, measure, kwargs)`: each measured in a graph and
    under XLA."""
    rows = [
        f"| measure | against | run | tf_posenc (ms) | {other} (ms) | best / best | median of ratios |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, against, measure, kwargs in measures:
        for run, jit_compile in (("graph", False), ("XLA", True)):
            ours, theirs, median = measure(jit_compile, **kwargs)
            times = f"{ours:.2f} | {theirs:.2f} | {ours / theirs:.2f}x | {median:.2f}x"
            rows.append(f"| {name} | {against} | {run} | {times} |")
    return rows


def table():
    measures = [
        ("cached decoding step, 4 layers, 512 wide, GQA 8/2", "keras-hub's LlamaAttention",
         decoding_step, {}),
        ("causal pass (4, 512, 512), rope", "keras.layers.MultiHeadAttention", full_pass, {}),
        ("causal pass (4, 512, 512), ALiBi", "the bias precomputed", full_pass,
         {"bias": tf_posenc.AlibiBias(num_heads=HEADS)}),
        ("causal pass (4, 512, 512), T5", "the bias precomputed", full_pass,
         {"bias": tf_posenc.RelativePositionBias(HEADS, bidirectional=False)}),
        ("bidirectional pass (4, 512, 512), DeBERTa-v3", "keras-hub's DisentangledSelfAttention",
         deberta_pass, {}),
    ]  # fmt: skip
    return "\n".join(timed_rows(measures))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    ROUNDS = 3 if parser.parse_args().quick else 15
    print(table())
