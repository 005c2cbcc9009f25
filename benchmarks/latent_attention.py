"""What latent attention costs: `tf_posenc.MultiHeadLatentAttention` at DeepSeek-V3's head sizes
(heads of 128 + 64 query and key features and 128 value features, a latent of 512), with 16 heads
instead of 128 and a 1,024-wide model so that it fits 2 cores.

    python benchmarks/latent_attention.py            # the table, as Markdown
    python benchmarks/latent_attention.py --quick    # fewer rounds

Rows: a cached decoding step, attending in the latent space (the layer's own, with its cache of
576 numbers a token) against the same attention with its keys and values expanded and cached
(40,960 numbers a token at 128 heads); a causal pass against `GroupQueryAttention` of the same
width. Each row times the two in alternating rounds within one run (`attention.py`'s
`paired_times`), and the cache's bytes per token are counted.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from attention import paired_times, timed_rows  # noqa: E402
from keras import ops  # noqa: E402

import tf_posenc  # noqa: E402

WIDTH, HEADS, Q_RANK, KV_RANK, NOPE, ROPE, VALUE, SLOTS = 1024, 16, 384, 512, 128, 64, 128, 2048


def latent_layer():
    keras.utils.set_random_seed(0)
    layer = tf_posenc.MultiHeadLatentAttention(
        HEADS,
        KV_RANK,
        NOPE,
        ROPE,
        VALUE,
        q_lora_rank=Q_RANK,
        rope=tf_posenc.RotaryEmbedding(layout="interleave"),
    )
    x = np.random.default_rng(0).normal(size=(1, 1, WIDTH)).astype("float32")
    layer(x, x)
    return layer, x


def expanded_step(layer):
    """The layer's attention with its latent expanded into keys and values once per token and
    those cached, `(batch, slots, heads, 192)` and `(batch, slots, heads, 128)`: the decoding
    step of an implementation that does not absorb `kv_b_proj`."""

    def step(x, keys, values, index):
        queries, _, _ = layer._queries(x)
        q_nope, q_rot = queries[..., :NOPE], queries[..., NOPE:]
        latent, k_rot = layer._latent(x)
        rows = layer.rope.rows(q_rot, start_index=index)
        q_rot, k_rot = layer.rope(q_rot, rows=rows), layer.rope(k_rot, rows=rows)
        up = layer._up_projection("float32")
        k_nope = ops.einsum("bkr,rhn->bkhn", latent, up[..., :NOPE])
        value = ops.einsum("bkr,rhv->bkhv", latent, up[..., NOPE:])
        key = ops.concatenate([k_nope, ops.broadcast_to(k_rot, (1, 1, HEADS, ROPE))], axis=-1)
        keys = ops.slice_update(keys, [0, index, 0, 0], key)
        values = ops.slice_update(values, [0, index, 0, 0], value)
        scores = ops.einsum("bqhd,bkhd->bhqk", ops.concatenate([q_nope, q_rot], axis=-1), keys)
        scores = scores * layer._score_scale()
        seen = ops.less_equal(ops.arange(SLOTS), index)[None, None, None, :]
        weights = ops.softmax(ops.where(seen, scores, -1e9), axis=-1)
        output = ops.einsum("bhqk,bkhv->bqhv", weights, values)
        return layer.o_proj(ops.reshape(output, (1, 1, HEADS * VALUE)))

    return step


def decoding_step(jit_compile):
    layer, x = latent_layer()
    cache = np.zeros((1, SLOTS, layer.cache_width), "float32")
    keys = np.zeros((1, SLOTS, HEADS, NOPE + ROPE), "float32")
    values = np.zeros((1, SLOTS, HEADS, VALUE), "float32")

    @tf.function(jit_compile=jit_compile)
    def absorbed(x, cache, keys, values, index):
        return layer(x, x, cache=cache, cache_update_index=index, use_causal_mask=True)[0]

    expanded = tf.function(expanded_step(layer), jit_compile=jit_compile)

    def their(x, cache, keys, values, index):
        return expanded(x, keys, values, index)

    # The two agree (the check that the comparison is of one attention).
    full = np.random.default_rng(1).normal(size=(1, SLOTS, WIDTH)).astype("float32") * 0.1
    _, filled = layer(full[:, :1000], full[:, :1000], cache=cache, cache_update_index=0, use_causal_mask=True)
    ours_out = absorbed(x, filled, keys, values, tf.constant(1000))
    # The expanded cache of the same 1000 tokens.
    latent, k_rot = layer._latent(full[:, :1000])
    k_rot = keras.ops.convert_to_numpy(layer.rope(k_rot))[:, :, 0]
    up = keras.ops.convert_to_numpy(layer._up_projection("float32"))
    latent = keras.ops.convert_to_numpy(latent)
    k_all, v_all = keys.copy(), values.copy()
    k_all[:, :1000, :, :NOPE] = np.einsum("bkr,rhn->bkhn", latent, up[..., :NOPE])
    k_all[:, :1000, :, NOPE:] = k_rot[:, :, None]
    v_all[:, :1000] = np.einsum("bkr,rhv->bkhv", latent, up[..., NOPE:])
    their_out = expanded(x, k_all, v_all, tf.constant(1000))
    gap = float(np.abs(keras.ops.convert_to_numpy(ours_out) - keras.ops.convert_to_numpy(their_out)).max())
    assert gap < 1e-4, gap
    arguments = (x, filled, k_all, v_all, tf.constant(1000))
    return paired_times(absorbed, their, arguments, ROUNDS, 50)


def full_pass(jit_compile):
    """A causal pass of `(2, 512, 1024)`: latent attention against `GroupQueryAttention` of the
    same width (16 heads of 128, as many key-value heads), both rotating."""
    layer, _ = latent_layer()
    keras.utils.set_random_seed(0)
    gqa = tf_posenc.GroupQueryAttention(128, HEADS, HEADS, rope=tf_posenc.RotaryEmbedding())
    x = np.random.default_rng(0).normal(size=(2, 512, WIDTH)).astype("float32")
    gqa(x, x)
    ours = tf.function(lambda x: layer(x, x, use_causal_mask=True), jit_compile=jit_compile)
    theirs = tf.function(lambda x: gqa(x, x, use_causal_mask=True), jit_compile=jit_compile)
    return paired_times(ours, theirs, (x,), ROUNDS, 5)


def table():
    measures = [
        (f"cached decoding step at slot 1000 of {SLOTS}, latent cache", "the same attention, expanded cache",
         decoding_step, {}),
        ("causal pass (2, 512, 1024)", "GroupQueryAttention, 16 heads of 128", full_pass, {}),
    ]  # fmt: skip
    rows = timed_rows(measures, other="other")
    cached = [
        ("MultiHeadLatentAttention: latent and rotated shared key", KV_RANK + ROPE),
        (f"the same attention, expanded keys and values ({HEADS} heads)", HEADS * (NOPE + ROPE + VALUE)),
        (f"GroupQueryAttention, {HEADS} query heads of 128, 2 key-value heads", 2 * 2 * 128),
        (f"GroupQueryAttention, {HEADS} query heads of 128, {HEADS} key-value heads", 2 * HEADS * 128),
    ]
    rows += ["", "| cached per token and layer (float32) | numbers | bytes |", "|---|---|---|"]
    rows += [f"| {what} | {count:,} | {4 * count:,} |" for what, count in cached]
    return "\n".join(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    ROUNDS = 3 if parser.parse_args().quick else 15
    print(table())
