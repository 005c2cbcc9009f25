"""Biases of attention scores from positions: ALiBi (BLOOM, MPT, keras-hub), T5's buckets,
Inkling 2's bias of the hidden states, and the window tables (Swin, BEiT, Swin v2)."""

import json
import math
import pathlib

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf
from bounds import FLOAT32_UNIT
from fingerprints import INKLING, inkling_arguments, inkling_positions, inkling_weights

from tf_posenc import (
    AlibiBias,
    ContinuousPositionBias,
    InklingRelativeBias,
    RelativePositionBias,
    WindowPositionBias,
    attention_log_scale,
    attention_mask,
    hf_attention_layers,
    positions_from_mask,
)
from tf_posenc.layers.alibi_bias import alibi_slopes

# Printed by transformers 5.24.0 (torch 2.14.1):
# `modeling_bloom.build_alibi_tensor(mask, heads, torch.float32)` for mask [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]],
# as (batch, heads, k_len); `modeling_mpt.build_mpt_alibi_tensor(heads, 4, alibi_bias_max)[:, 0, :]`.
PEER_ALIBI = {
    "bloom_8": [
        [
            [0.0, 0.0, 0.0, 0.5, 1.0],
            [0.0, 0.0, 0.0, 0.25, 0.5],
            [0.0, 0.0, 0.0, 0.125, 0.25],
            [0.0, 0.0, 0.0, 0.0625, 0.125],
            [0.0, 0.0, 0.0, 0.03125, 0.0625],
            [0.0, 0.0, 0.0, 0.015625, 0.03125],
            [0.0, 0.0, 0.0, 0.0078125, 0.015625],
            [0.0, 0.0, 0.0, 0.00390625, 0.0078125],
        ],
        [
            [0.0, 0.5, 1.0, 1.5, 2.0],
            [0.0, 0.25, 0.5, 0.75, 1.0],
            [0.0, 0.125, 0.25, 0.375, 0.5],
            [0.0, 0.0625, 0.125, 0.1875, 0.25],
            [0.0, 0.03125, 0.0625, 0.09375, 0.125],
            [0.0, 0.015625, 0.03125, 0.046875, 0.0625],
            [0.0, 0.0078125, 0.015625, 0.0234375, 0.03125],
            [0.0, 0.00390625, 0.0078125, 0.01171875, 0.015625],
        ],
    ],
    "bloom_12": [
        [
            [0.0, 0.0, 0.0, 0.5, 1.0],
            [0.0, 0.0, 0.0, 0.25, 0.5],
            [0.0, 0.0, 0.0, 0.125, 0.25],
            [0.0, 0.0, 0.0, 0.0625, 0.125],
            [0.0, 0.0, 0.0, 0.03125, 0.0625],
            [0.0, 0.0, 0.0, 0.015625, 0.03125],
            [0.0, 0.0, 0.0, 0.0078125, 0.015625],
            [0.0, 0.0, 0.0, 0.00390625, 0.0078125],
            [0.0, 0.0, 0.0, 0.7071067690849304, 1.4142135381698608],
            [0.0, 0.0, 0.0, 0.3535533845424652, 0.7071067690849304],
            [0.0, 0.0, 0.0, 0.1767766773700714, 0.3535533547401428],
            [0.0, 0.0, 0.0, 0.0883883386850357, 0.1767766773700714],
        ],
        [
            [0.0, 0.5, 1.0, 1.5, 2.0],
            [0.0, 0.25, 0.5, 0.75, 1.0],
            [0.0, 0.125, 0.25, 0.375, 0.5],
            [0.0, 0.0625, 0.125, 0.1875, 0.25],
            [0.0, 0.03125, 0.0625, 0.09375, 0.125],
            [0.0, 0.015625, 0.03125, 0.046875, 0.0625],
            [0.0, 0.0078125, 0.015625, 0.0234375, 0.03125],
            [0.0, 0.00390625, 0.0078125, 0.01171875, 0.015625],
            [0.0, 0.7071067690849304, 1.4142135381698608, 2.1213202476501465, 2.8284270763397217],
            [0.0, 0.3535533845424652, 0.7071067690849304, 1.0606601238250732, 1.4142135381698608],
            [0.0, 0.1767766773700714, 0.3535533547401428, 0.5303300619125366, 0.7071067094802856],
            [0.0, 0.0883883386850357, 0.1767766773700714, 0.2651650309562683, 0.3535533547401428],
        ],
    ],
    "bloom_6": [
        [
            [0.0, 0.0, 0.0, 0.25, 0.5],
            [0.0, 0.0, 0.0, 0.0625, 0.125],
            [0.0, 0.0, 0.0, 0.015625, 0.03125],
            [0.0, 0.0, 0.0, 0.00390625, 0.0078125],
            [0.0, 0.0, 0.0, 0.5, 1.0],
            [0.0, 0.0, 0.0, 0.125, 0.25],
        ],
        [
            [0.0, 0.25, 0.5, 0.75, 1.0],
            [0.0, 0.0625, 0.125, 0.1875, 0.25],
            [0.0, 0.015625, 0.03125, 0.046875, 0.0625],
            [0.0, 0.00390625, 0.0078125, 0.01171875, 0.015625],
            [0.0, 0.5, 1.0, 1.5, 2.0],
            [0.0, 0.125, 0.25, 0.375, 0.5],
        ],
    ],
    "mpt_8_8": [
        [-1.5, -1.0, -0.5, 0.0],
        [-0.75, -0.5, -0.25, 0.0],
        [-0.375, -0.25, -0.125, 0.0],
        [-0.1875, -0.125, -0.0625, 0.0],
        [-0.09375, -0.0625, -0.03125, 0.0],
        [-0.046875, -0.03125, -0.015625, 0.0],
        [-0.0234375, -0.015625, -0.0078125, 0.0],
        [-0.01171875, -0.0078125, -0.00390625, 0.0],
    ],
    "mpt_12_8": [
        [-1.5, -1.0, -0.5, 0.0],
        [-0.75, -0.5, -0.25, 0.0],
        [-0.375, -0.25, -0.125, 0.0],
        [-0.1875, -0.125, -0.0625, 0.0],
        [-0.09375, -0.0625, -0.03125, 0.0],
        [-0.046875, -0.03125, -0.015625, 0.0],
        [-0.0234375, -0.015625, -0.0078125, 0.0],
        [-0.01171875, -0.0078125, -0.00390625, 0.0],
        [-2.1213202476501465, -1.4142135381698608, -0.7071067690849304, 0.0],
        [-1.0606601238250732, -0.7071067690849304, -0.3535533845424652, 0.0],
        [-0.5303300619125366, -0.3535533845424652, -0.1767766922712326, 0.0],
        [-0.2651650309562683, -0.1767766922712326, -0.0883883461356163, 0.0],
    ],
    "mpt_6_16": [
        [-0.1875, -0.125, -0.0625, 0.0],
        [-0.01171875, -0.0078125, -0.00390625, 0.0],
        [-0.000732421875, -0.00048828125, -0.000244140625, 0.0],
        [-4.57763671875e-05, -3.0517578125e-05, -1.52587890625e-05, 0.0],
        [-0.75, -0.5, -0.25, 0.0],
        [-0.046875, -0.03125, -0.015625, 0.0],
    ],
    "mpt_3_6": [
        [-0.375, -0.25, -0.125, 0.0],
        [-0.046875, -0.03125, -0.015625, 0.0],
        [-1.0606601238250732, -0.7071067690849304, -0.3535533845424652, 0.0],
    ],
}
# `T5Attention._relative_position_bucket(torch.arange(-4 * D, 4 * D + 1), bidirectional, num_buckets,
# max_distance=D)` in run-length form: [first relative position of a run, its bucket], for
# (num_buckets, max_distance, bidirectional).
TRANSFORMERS_BUCKETS = {
    (32, 128, True): [
        [-512, 15],
        [-90, 14],
        [-63, 13],
        [-45, 12],
        [-31, 11],
        [-22, 10],
        [-15, 9],
        [-11, 8],
        [-7, 7],
        [-6, 6],
        [-5, 5],
        [-4, 4],
        [-3, 3],
        [-2, 2],
        [-1, 1],
        [0, 0],
        [1, 17],
        [2, 18],
        [3, 19],
        [4, 20],
        [5, 21],
        [6, 22],
        [7, 23],
        [8, 24],
        [12, 25],
        [16, 26],
        [23, 27],
        [32, 28],
        [46, 29],
        [64, 30],
        [91, 31],
    ],
    (32, 128, False): [
        [-512, 31],
        [-112, 30],
        [-98, 29],
        [-86, 28],
        [-76, 27],
        [-66, 26],
        [-58, 25],
        [-51, 24],
        [-45, 23],
        [-39, 22],
        [-34, 21],
        [-30, 20],
        [-26, 19],
        [-23, 18],
        [-20, 17],
        [-18, 16],
        [-15, 15],
        [-14, 14],
        [-13, 13],
        [-12, 12],
        [-11, 11],
        [-10, 10],
        [-9, 9],
        [-8, 8],
        [-7, 7],
        [-6, 6],
        [-5, 5],
        [-4, 4],
        [-3, 3],
        [-2, 2],
        [-1, 1],
        [0, 0],
    ],
    (64, 256, True): [
        [-1024, 31],
        [-215, 30],
        [-181, 29],
        [-152, 28],
        [-127, 27],
        [-107, 26],
        [-90, 25],
        [-76, 24],
        [-63, 23],
        [-53, 22],
        [-45, 21],
        [-38, 20],
        [-31, 19],
        [-26, 18],
        [-22, 17],
        [-19, 16],
        [-15, 15],
        [-14, 14],
        [-13, 13],
        [-12, 12],
        [-11, 11],
        [-10, 10],
        [-9, 9],
        [-8, 8],
        [-7, 7],
        [-6, 6],
        [-5, 5],
        [-4, 4],
        [-3, 3],
        [-2, 2],
        [-1, 1],
        [0, 0],
        [1, 33],
        [2, 34],
        [3, 35],
        [4, 36],
        [5, 37],
        [6, 38],
        [7, 39],
        [8, 40],
        [9, 41],
        [10, 42],
        [11, 43],
        [12, 44],
        [13, 45],
        [14, 46],
        [15, 47],
        [16, 48],
        [20, 49],
        [23, 50],
        [27, 51],
        [32, 52],
        [39, 53],
        [46, 54],
        [54, 55],
        [64, 56],
        [77, 57],
        [91, 58],
        [108, 59],
        [128, 60],
        [153, 61],
        [182, 62],
        [216, 63],
    ],
    (64, 256, False): [
        [-1024, 63],
        [-239, 62],
        [-224, 61],
        [-210, 60],
        [-197, 59],
        [-184, 58],
        [-173, 57],
        [-162, 56],
        [-152, 55],
        [-142, 54],
        [-133, 53],
        [-125, 52],
        [-117, 51],
        [-109, 50],
        [-103, 49],
        [-96, 48],
        [-90, 47],
        [-84, 46],
        [-79, 45],
        [-74, 44],
        [-69, 43],
        [-65, 42],
        [-61, 41],
        [-57, 40],
        [-53, 39],
        [-50, 38],
        [-47, 37],
        [-44, 36],
        [-41, 35],
        [-38, 34],
        [-36, 33],
        [-34, 32],
        [-31, 31],
        [-30, 30],
        [-29, 29],
        [-28, 28],
        [-27, 27],
        [-26, 26],
        [-25, 25],
        [-24, 24],
        [-23, 23],
        [-22, 22],
        [-21, 21],
        [-20, 20],
        [-19, 19],
        [-18, 18],
        [-17, 17],
        [-16, 16],
        [-15, 15],
        [-14, 14],
        [-13, 13],
        [-12, 12],
        [-11, 11],
        [-10, 10],
        [-9, 9],
        [-8, 8],
        [-7, 7],
        [-6, 6],
        [-5, 5],
        [-4, 4],
        [-3, 3],
        [-2, 2],
        [-1, 1],
        [0, 0],
    ],
    (20, 160, True): [
        [-640, 9],
        [-79, 8],
        [-39, 7],
        [-19, 6],
        [-9, 5],
        [-4, 4],
        [-3, 3],
        [-2, 2],
        [-1, 1],
        [0, 0],
        [1, 11],
        [2, 12],
        [3, 13],
        [4, 14],
        [5, 15],
        [10, 16],
        [20, 17],
        [40, 18],
        [80, 19],
    ],
    (20, 160, False): [
        [-640, 19],
        [-121, 18],
        [-91, 17],
        [-69, 16],
        [-52, 15],
        [-39, 14],
        [-30, 13],
        [-22, 12],
        [-17, 11],
        [-13, 10],
        [-9, 9],
        [-8, 8],
        [-7, 7],
        [-6, 6],
        [-5, 5],
        [-4, 4],
        [-3, 3],
        [-2, 2],
        [-1, 1],
        [0, 0],
    ],
    (16, 40, True): [
        [-160, 7],
        [-22, 6],
        [-12, 5],
        [-7, 4],
        [-3, 3],
        [-2, 2],
        [-1, 1],
        [0, 0],
        [1, 9],
        [2, 10],
        [3, 11],
        [4, 12],
        [8, 13],
        [13, 14],
        [23, 15],
    ],
    (16, 40, False): [
        [-160, 15],
        [-32, 14],
        [-26, 13],
        [-21, 12],
        [-17, 11],
        [-14, 10],
        [-11, 9],
        [-9, 8],
        [-7, 7],
        [-6, 6],
        [-5, 5],
        [-4, 4],
        [-3, 3],
        [-2, 2],
        [-1, 1],
        [0, 0],
    ],
    (8, 20, True): [[-80, 3], [-6, 2], [-1, 1], [0, 0], [1, 5], [2, 6], [7, 7]],
    (8, 20, False): [[-80, 7], [-13, 6], [-8, 5], [-5, 4], [-3, 3], [-2, 2], [-1, 1], [0, 0]],
}


def expand_runs(runs, span):
    relative = np.arange(-span, span + 1)
    buckets = np.zeros_like(relative)
    starts = [start for start, _ in runs] + [span + 1]
    for (start, bucket), end in zip(runs, starts[1:], strict=True):
        buckets[(relative >= start) & (relative < end)] = bucket
    return relative, buckets


def float64_buckets(relative, num_buckets, max_distance, bidirectional):
    """T5's formula restated in float64 (not what its checkpoints use: see the float32 test)."""
    if bidirectional:
        num_buckets //= 2
        offset, distance = (relative > 0) * num_buckets, np.abs(relative)
    else:
        offset, distance = 0, np.maximum(-relative, 0)
    exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        scaled = np.log(distance / exact) / math.log(max_distance / exact) * (num_buckets - exact)
    large = np.minimum(exact + np.trunc(np.nan_to_num(scaled, neginf=0)).astype(int), num_buckets - 1)
    return offset + np.where(distance < exact, distance, large)


# ---------------------------------------------------------------------------------------------
# ALiBi


@pytest.mark.parametrize("heads", [8, 12, 6])
def test_alibi_is_blooms_bias_for_left_padded_rows(heads):
    # BLOOM adds m k with k counted from each row's first real token; -m (q - k) at q = 0 is it.
    mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    keys = positions_from_mask(mask)
    bias = AlibiBias(num_heads=heads).bias(np.zeros((2, 1), "int32"), keys).numpy()[:, :, 0, :]
    bloom = np.array(PEER_ALIBI[f"bloom_{heads}"], "float32")
    # BLOOM raises float32 bases to integer powers: some of its slopes are a unit off the
    # correctly rounded ones (heads that are not a power of two); ours are the rounded formula.
    assert np.all(np.abs(bias * mask[:, None, :] - bloom) <= np.spacing(np.abs(bloom)))
    if heads & (heads - 1) == 0:
        np.testing.assert_array_equal(bias * mask[:, None, :], bloom)


@pytest.mark.parametrize("heads, bias_max", [(8, 8), (12, 8), (6, 16), (3, 6)], ids=lambda v: str(v))
def test_alibi_without_positions_is_mpts_and_keras_hubs(heads, bias_max):
    bias = AlibiBias(bias_max)(np.zeros((2, heads, 4, 4), "float32")).numpy()
    mpt = np.broadcast_to(
        np.array(PEER_ALIBI[f"mpt_{heads}_{bias_max}"], "float32")[None, :, None], bias.shape
    )
    # MPT divides 1 by float32 powers of two: a unit off for some heads, exact for the others.
    assert np.all(np.abs(bias - mpt) <= np.spacing(np.abs(mpt)))
    scores = np.random.default_rng(heads).normal(size=(2, heads, 4, 4)).astype("float32")
    ours = AlibiBias(bias_max)(scores).numpy()
    np.testing.assert_array_equal(
        ours, keras.ops.convert_to_numpy(keras_hub.layers.AlibiBias(bias_max)(scores))
    )


KERAS_HUB_EXPECTATIONS = {  # keras-hub 0.32's alibi_bias_test.py: (heads, alibi_bias_max) -> rows at k_len 3
    (8, 8): [[-1.0, -0.5, 0.0], [-0.5, -0.25, 0.0], [-0.25, -0.125, 0.0], [-0.125, -0.0625, 0.0],
             [-0.0625, -0.03125, 0.0], [-0.03125, -0.015625, 0.0], [-0.015625, -0.0078125, 0.0],
             [-0.0078125, -0.00390625, 0.0]],
    (14, 8): [[-1.0, -0.5, 0.0], [-0.5, -0.25, 0.0], [-0.25, -0.125, 0.0], [-0.125, -0.0625, 0.0],
              [-0.0625, -0.03125, 0.0], [-0.03125, -0.015625, 0.0], [-0.015625, -0.0078125, 0.0],
              [-0.0078125, -0.00390625, 0.0], [-1.4142135, -0.70710677, 0.0], [-0.70710677, -0.35355338, 0.0],
              [-0.35355338, -0.17677669, 0.0], [-0.17677669, -0.08838835, 0.0],
              [-0.08838835, -0.04419417, 0.0],
              [-0.04419417, -0.02209709, 0.0]],
    (2, 12): [[-0.03125, -0.015625, 0.0], [-0.00048828, -0.00024414, 0.0]],
    (3, 6): [[-0.25, -0.125, 0.0], [-0.03125, -0.015625, 0.0], [-0.70710677, -0.35355338, 0.0]],
}  # fmt: skip


@pytest.mark.parametrize("heads, bias_max", KERAS_HUB_EXPECTATIONS, ids=lambda v: str(v))
def test_keras_hub_alibi_expectations_pass(heads, bias_max):
    output = AlibiBias(alibi_bias_max=bias_max)(np.zeros((1, heads, 1, 3), "float32")).numpy()
    np.testing.assert_allclose(output[0, :, 0], KERAS_HUB_EXPECTATIONS[heads, bias_max], rtol=1e-6, atol=1e-8)
    assert AlibiBias(bias_max, dtype="float16")(keras.Input((heads, 5, 10))).dtype == "float16"


@pytest.mark.parametrize("heads", [1, 5, 8, 12, 32, 40])
def test_alibi_slopes_and_bias_are_the_float64_formula_rounded(heads):
    below = 2 ** math.floor(math.log2(heads))
    expected = [2 ** (-8 * h / below) for h in range(1, below + 1)]
    expected += [2 ** (-8 * h / (2 * below)) for h in range(1, 2 * (heads - below), 2)]
    np.testing.assert_allclose(alibi_slopes(heads), expected, rtol=1e-15)
    queries, keys = np.arange(2000, 2004), np.arange(0, 2004)
    bias = AlibiBias(num_heads=heads).bias(queries, keys).numpy()[0]
    exact = np.array(expected)[:, None, None] * (keys[None, None, :] - queries[None, :, None])
    # float32 slopes times exact distances: two roundings, within two units of the exact product
    assert np.all(np.abs(bias - exact) <= 2 * np.spacing(np.abs(exact).astype("float32")))


@pytest.mark.parametrize("heads", [4, 12])
def test_bidirectional_alibi_is_the_encoders_symmetric_bias(heads):
    # MosaicBERT's and Jina BERT v2's `rebuild_alibi_tensor`, restated in float64:
    # `relative_position = abs(memory_position - context_position)`, `alibi = slopes * -relative_position`.
    slopes = alibi_slopes(heads)
    layer = AlibiBias(num_heads=heads, bidirectional=True)
    queries, keys = np.arange(1990, 2004), np.arange(1980, 2010)
    exact = slopes[:, None, None] * -np.abs(keys[None, None, :] - queries[None, :, None])
    bias = layer.bias(queries, keys).numpy()[0]
    assert np.all(np.abs(bias - exact) <= 2 * np.spacing(np.abs(exact).astype("float32")))
    np.testing.assert_array_equal(bias, np.swapaxes(layer.bias(keys, queries).numpy()[0], 1, 2))
    # Without positions an encoder's queries are its keys: the bias of arange against arange.
    scores = np.zeros((2, heads, 7, 7), "float32")
    np.testing.assert_array_equal(layer(scores).numpy()[0], layer.bias(np.arange(7), np.arange(7)).numpy()[0])
    # ... and a shorter run of queries is the keys' last positions.
    np.testing.assert_array_equal(
        layer(scores[:, :, 4:]).numpy()[0], layer.bias(np.arange(4, 7), np.arange(7)).numpy()[0]
    )
    config = json.loads(json.dumps(layer.get_config()))
    assert config["bidirectional"] is True
    np.testing.assert_array_equal(
        AlibiBias.from_config(config).bias([3], keys).numpy(), layer.bias([3], keys).numpy()
    )


def test_alibi_steps_give_the_full_pass_rows_and_a_bias_for_dot_product_attention():
    layer = AlibiBias(num_heads=4)
    full = layer.bias(np.arange(9), np.arange(9)).numpy()
    for step in range(5, 9):
        row = layer.bias([step], np.arange(step + 1)).numpy()
        np.testing.assert_array_equal(row[0, :, 0], full[0, :, step, : step + 1])
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 9, 4, 8)).astype("float32") for _ in range(3))
    mask = attention_mask(np.arange(9), np.arange(9))
    mixed = keras.ops.dot_product_attention(
        q, k, v, bias=layer.bias(np.arange(9), np.arange(9)), mask=mask[:, None]
    )
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(8) + full
    scores = np.where(np.tril(np.ones((9, 9), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    expected = np.einsum("bhqk,bkhd->bqhd", weights / weights.sum(-1, keepdims=True), v)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(mixed), expected, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# T5's buckets


@pytest.mark.parametrize(
    "num_buckets, max_distance, bidirectional", TRANSFORMERS_BUCKETS, ids=lambda v: str(v)
)
def test_buckets_are_the_checkpoints_for_every_distance(num_buckets, max_distance, bidirectional):
    relative, expected = expand_runs(
        TRANSFORMERS_BUCKETS[num_buckets, max_distance, bidirectional], 4 * max_distance
    )
    layer = RelativePositionBias(2, num_buckets, max_distance, bidirectional)
    np.testing.assert_array_equal(layer.buckets(relative).numpy(), expected)
    graph = tf.function(layer.buckets, input_signature=[tf.TensorSpec(None, tf.int32)], jit_compile=True)
    np.testing.assert_array_equal(graph(relative.reshape(-1, 1)).numpy()[:, 0], expected)


def test_float64_buckets_differ_where_the_checkpoints_round():
    # The float32 arithmetic of T5's checkpoints matters: 20 buckets over 160 (bidirectional) put
    # distances 10, 20 and 80 one bucket lower in float64.
    relative, expected = expand_runs(TRANSFORMERS_BUCKETS[20, 160, True], 640)
    wrong = relative[float64_buckets(relative, 20, 160, True) != expected]
    assert sorted(set(np.abs(wrong).tolist())) == [10, 20, 80]
    for key in [(32, 128, True), (64, 256, True)]:
        relative, expected = expand_runs(TRANSFORMERS_BUCKETS[key], 4 * key[1])
        np.testing.assert_array_equal(float64_buckets(relative, *key), expected)


def test_t5_bias_is_its_table_at_the_buckets_shared_and_cached():
    layer = RelativePositionBias(num_heads=3, num_buckets=16, max_distance=40, bidirectional=False)
    scores = np.random.default_rng(1).normal(size=(2, 3, 7, 7)).astype("float32")
    output = layer(scores).numpy()  # builds the table
    table = layer.relative_attention_bias.numpy()
    relative, buckets = expand_runs(TRANSFORMERS_BUCKETS[16, 40, False], 160)
    # T5's compute_bias: the bucket of key minus query, its row of the table.
    key_minus_query = np.arange(7)[None, :] - np.arange(7)[:, None]
    expected = table[buckets[key_minus_query + 160]].transpose(2, 0, 1)
    np.testing.assert_array_equal(output, scores + expected[None])
    # A decoding step at 30 over a cache of 31 slots: the full pass's last row.
    full = layer.bias(np.arange(31), np.arange(31)).numpy()
    np.testing.assert_array_equal(layer.bias([30], np.arange(31)).numpy()[0, :, 0], full[0, :, 30])
    # One layer shared by every attention block, as T5 shares its first layer's: one table.
    assert len(layer.weights) == 1 and layer.weights[0].shape == (16, 3)


# ---------------------------------------------------------------------------------------------
# Both: errors, saving, runtimes


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: RelativePositionBias(0), ValueError, r"`num_heads` must be a positive integer"),
        (lambda: RelativePositionBias(4, num_buckets=0), ValueError, r"`num_buckets` must be a positive"),
        (lambda: RelativePositionBias(4, num_buckets=3), ValueError, r"at least 2 buckets per direction"),
        (lambda: RelativePositionBias(4, 32, max_distance=8), ValueError, r"`max_distance` must be greater"),
        (lambda: RelativePositionBias(4, bidirectional=1), ValueError, r"`bidirectional` must be a boolean"),
        (lambda: AlibiBias(0), ValueError, r"`alibi_bias_max` must be a finite number greater than 0"),
        (lambda: AlibiBias(num_heads=0), ValueError, r"`num_heads` must be a positive integer"),
        (lambda: AlibiBias()(np.zeros((1, 0, 2, 2), "float32")), ValueError,
         r"must have at least one head \(axis 1\).*Received: attention_scores.shape=\(1, 0, 2, 2\)"),
        (lambda: AlibiBias(bidirectional="yes"), ValueError, r"`bidirectional` must be a boolean"),
        (lambda: AlibiBias().bias([0], [0]), ValueError, r"needs `num_heads` to compute a bias alone"),
        (lambda: AlibiBias()(np.zeros((2, 3, 4), "float32")), ValueError,
         r"`attention_scores` must have shape \(batch, num_heads, q_len, k_len\)"),
        (lambda: AlibiBias(num_heads=4)(np.zeros((1, 8, 2, 2), "float32")), ValueError, r"num_heads=4 heads"),
        (lambda: AlibiBias()(np.zeros((1, 8, 2, 2), "float32"), query_positions=[0, 1]), ValueError,
         r"Pass `query_positions` and `key_positions` together"),
        (lambda: AlibiBias()(np.zeros((1, 8, 2, 2), "float32"), query_positions=[0, 1],
                             key_positions=[0, 1, 2]),
         ValueError, r"`key_positions` must have one entry per key of `attention_scores` \(2\)"),
        (lambda: AlibiBias()(np.zeros((2, 8, 1, 2), "float32"), query_positions=np.zeros((3, 1), "int32"),
                             key_positions=[0, 1]), ValueError, r"one row per example of `attention_scores`"),
        (lambda: RelativePositionBias(8).bias([-1], [0]), tf.errors.InvalidArgumentError,
         r"`query_positions` must be non-negative"),
    ],
    ids=[
        "heads-0", "buckets-0", "buckets-too-few", "distance-inside-exact-range", "bidirectional-not-bool",
        "alibi-max-0", "alibi-heads-0", "alibi-scores-no-heads", "alibi-bidirectional-not-bool",
        "bias-without-heads", "scores-rank-3", "heads-differ", "one-position",
        "positions-length", "positions-batch", "negative-positions",
    ],
)  # fmt: skip
def test_bad_bias_arguments_are_clear_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize(
    "make", [lambda: AlibiBias(4), lambda: RelativePositionBias(4, 16, 40)], ids=["alibi", "t5"]
)
def test_biases_round_trip_through_keras_files(make, tmp_path):
    scores = keras.Input((4, None, None))
    positions = keras.Input((None,), dtype="int32")
    layer = make()
    model = keras.Model(
        [scores, positions], layer(scores, query_positions=positions, key_positions=positions)
    )
    model.save(tmp_path / "bias.keras")
    reloaded = keras.models.load_model(tmp_path / "bias.keras")
    data = [
        np.random.default_rng(2).normal(size=(2, 4, 6, 6)).astype("float32"),
        np.arange(6)[None].repeat(2, 0),
    ]
    np.testing.assert_array_equal(reloaded.predict(data, verbose=0), model.predict(data, verbose=0))
    assert type(reloaded.layers[-1]).__name__ == type(layer).__name__


def bias_model():
    """Scores and positions in, both biases added: a model of `None` lengths."""
    scores = keras.Input((4, None, None), name="scores")
    positions = keras.Input((None,), dtype="int32", name="positions")
    alibi = AlibiBias(name="alibi")(scores, query_positions=positions, key_positions=positions)
    t5 = RelativePositionBias(4, 16, 40, name="t5", embeddings_initializer="glorot_uniform")
    return keras.Model([scores, positions], t5(alibi, query_positions=positions, key_positions=positions))


@pytest.mark.slow
def test_biases_serve_from_saved_model_litert_onnx_and_xla(tmp_path):
    from helpers import serve_without_tf_posenc
    from test_runtimes import to_onnx_with_positions, to_tflite_with_positions

    model = bias_model()
    rng = np.random.default_rng(4)
    cases = {}
    for length in (3, 17):
        positions = np.sort(rng.integers(0, 300, (2, length)), axis=1).astype("int32")
        cases[length] = (rng.normal(size=(2, 4, length, length)).astype("float32"), positions)
    expected = {length: model.predict(list(case), verbose=0) for length, case in cases.items()}
    model.export(str(tmp_path / "exported"), verbose=False)
    served = serve_without_tf_posenc(tmp_path, {str(length): list(case) for length, case in cases.items()})
    litert = to_tflite_with_positions(model, tmp_path, exported=tmp_path / "exported")
    specs = [tf.TensorSpec((None, 4, None, None), tf.float32), tf.TensorSpec((None, None), tf.int32)]
    onnx = to_onnx_with_positions(model, specs)
    xla = tf.function(lambda s, p: model([s, p]), input_signature=specs, jit_compile=True)
    for length, (scores, positions) in cases.items():
        for runtime, output in (
            ("served", served[str(length)]),
            ("litert", litert(scores, positions)),
            ("onnx", onnx(scores, positions)),
            ("xla", xla(scores, positions).numpy()),
        ):
            np.testing.assert_array_equal(output, expected[length], err_msg=runtime)
    assert len(xla.get_concrete_function(*specs).graph.get_operations()) > 0
    assert xla.experimental_get_tracing_count() == 1  # one trace for every length


def test_tf_keras_biases_are_the_keras_3_ones():
    import tf_keras

    from tf_posenc import tf_keras as keras_2

    scores = np.random.default_rng(5).normal(size=(2, 6, 5, 5)).astype("float32")
    positions = np.array([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]], "int32")
    new_t5, old_t5 = RelativePositionBias(6, 8, 20), keras_2.RelativePositionBias(6, 8, 20)
    new_t5(scores)
    old_t5(scores)
    old_t5.set_weights(new_t5.get_weights())
    for new, old in ((AlibiBias(), keras_2.AlibiBias()), (new_t5, old_t5)):
        assert isinstance(old, tf_keras.layers.Layer)
        for arguments in ({}, {"query_positions": positions, "key_positions": positions}):
            np.testing.assert_array_equal(old(scores, **arguments).numpy(), new(scores, **arguments).numpy())
    # Inkling's bias: tf_keras builds it from the scores' shape alone, so its call makes the weights.
    new_inkling, hidden = inkling_layer(True, dtype="mixed_bfloat16")
    old_inkling = keras_2.InklingRelativeBias(**inkling_arguments(), log_scaling=True, dtype="mixed_bfloat16")
    inkling_scores = scores[:, :3]
    expected = new_inkling(inkling_scores, hidden, query_positions=positions, key_positions=positions)
    old_inkling(inkling_scores, hidden)
    old_inkling.set_weights(new_inkling.get_weights())
    given = old_inkling(inkling_scores, hidden, query_positions=positions, key_positions=positions)
    assert [weight.dtype for weight in old_inkling.weights] == ["float32"] * 3
    np.testing.assert_array_equal(given.numpy(), keras.ops.convert_to_numpy(expected))


# ---------------------------------------------------------------------------------------------
# Inkling 2: a bias conditioned on each query's hidden state

# Printed by `tools/print_transformers.py inkling` (transformers 5.25.0, torch 2.13.0):
# `Inkling2RelativePositionBias` in float32 on `fingerprints`' inputs and weights, and
# `Inkling2LogScale` of some positions.
PRINTED_INKLING = json.loads((pathlib.Path(__file__).parent / "transformers_5_25.json").read_text())[
    "inkling"
]
INKLING_CASES = [
    (log_scaling, first) for log_scaling in (False, True) for first in INKLING["first_positions"]
]
# Printed by transformers 5.25.0: for `Inkling2TextConfig(num_hidden_layers=12,
# swa_num_attention_heads=16, sliding_window_size=512, rel_extent=2048, d_rel=8,
# rel_l2_clip_threshold=6.0, log_scaling_alpha=0.2, log_scaling_n_floor=4096)`, each layer's
# attention module's `relative_position_bias`: (num_heads, rel_extent, proj.shape[0], log scaling).
TRANSFORMERS_INKLING_LAYERS = {0: (16, 512, 8, False), 5: (48, 2048, 8, True), 10: (16, 512, 8, False),
                               11: (48, 2048, 8, True)}  # fmt: skip


def inkling_layer(log_scaling, **kwargs):
    layer = InklingRelativeBias(**inkling_arguments(), log_scaling=log_scaling, **kwargs)
    hidden, linear, scale, proj = inkling_weights()
    layer.build(None, hidden.shape)
    layer.set_weights([linear.T, scale, proj])
    return layer, hidden


def float64_inkling_bias(hidden, linear, scale, proj, queries, keys, log_scaling):
    """transformers' `Inkling2RelativePositionBias.forward` restated in float64."""
    batch, q_len, _ = hidden.shape
    heads, d_rel = scale.shape
    states = (hidden.astype(float) @ linear.T.astype(float)).reshape(batch, q_len, heads, d_rel) * scale
    norm = np.linalg.norm(states, axis=-1, keepdims=True)
    clipped = np.minimum(INKLING["rel_l2_clip_threshold"] / (norm + 1e-6), 1.0)
    states = states * clipped
    if log_scaling:
        ratio = np.maximum((queries + 1) / INKLING["log_scaling_n_floor"], 1.0)
        states = states * (1 + INKLING["log_scaling_alpha"] * np.log(ratio))[None, :, None, None]
    logits = np.einsum("bqhd,de->bhqe", states, proj.astype(float))
    distance = queries[:, None] - keys[None, :]
    index = np.broadcast_to(np.clip(distance, 0, proj.shape[1] - 1), (batch, heads, q_len, len(keys)))
    bias = np.take_along_axis(logits, index, axis=-1)
    return np.where((distance >= 0) & (distance < proj.shape[1]), bias, 0.0), clipped


@pytest.mark.parametrize("log_scaling, first", INKLING_CASES, ids=lambda value: str(value))
def test_inkling_bias_is_transformers_in_float64_and_as_printed(log_scaling, first):
    layer, hidden = inkling_layer(log_scaling)
    queries, keys = inkling_positions(first)
    bias = keras.ops.convert_to_numpy(layer.bias(hidden, queries, keys))
    exact, clipped = float64_inkling_bias(*inkling_weights(), queries, keys, log_scaling)
    # The case reaches every branch: heads clipped and not, keys in the band, later and past it.
    assert (clipped < 1).any() and (clipped == 1).any()
    distance = queries[:, None] - keys[None, :]
    assert {-1, 0, INKLING["rel_extent"] - 1, INKLING["rel_extent"]} <= set(distance.ravel())
    # Float32 matmuls and a norm, against float64: a few units of the largest bias.
    scale = np.abs(exact).max()
    assert np.abs(bias - exact).max() <= 4 * FLOAT32_UNIT * scale
    printed = np.array(PRINTED_INKLING[f"log_scaling={log_scaling},first={first}"])
    assert np.abs(printed - exact).max() <= 4 * FLOAT32_UNIT * scale  # transformers' own float32 noise
    np.testing.assert_array_equal(bias[(distance < 0) | (distance >= INKLING["rel_extent"])[None, None]
                                       .repeat(2, 0).repeat(3, 1)], 0.0)  # fmt: skip
    # The scores' call adds it rounded once; with no positions, the queries end the keys.
    scores = np.random.default_rng(3).normal(size=bias.shape).astype("float32")
    added = layer(scores, hidden, query_positions=queries, key_positions=keys)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(added), scores + bias)
    if first == INKLING["first_positions"][1] and not log_scaling:  # only the distances matter here
        defaulted = layer(scores, hidden)
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(defaulted), scores + bias)


def test_inkling_log_scale_is_transformers():
    positions = np.array(PRINTED_INKLING["log_scale_positions"])
    alpha, floor = INKLING["log_scaling_alpha"], INKLING["log_scaling_n_floor"]
    scale = keras.ops.convert_to_numpy(attention_log_scale(positions, alpha, floor))
    exact = 1 + alpha * np.log(np.maximum((positions + 1) / floor, 1.0))
    assert scale.dtype == np.float32
    # transformers' float32 arithmetic (p + 1 and the ratio rounded, the log's rounding scaled
    # by alpha, the result's): about a unit in the last place of the float64 value, 1.02 at 2**31 - 2.
    assert (np.abs(scale - exact) <= 2 * FLOAT32_UNIT * exact).all()
    assert (np.abs(scale - np.array(PRINTED_INKLING["log_scale"])) <= 2 * FLOAT32_UNIT * exact).all()
    np.testing.assert_array_equal(scale[positions < floor], 1.0)


def test_inkling_bias_from_the_config_is_each_transformers_layers():
    config = {
        "model_type": "inkling2",
        "text_config": {
            "model_type": "inkling2_text", "num_hidden_layers": 12, "swa_num_attention_heads": 16,
            "sliding_window_size": 512, "rel_extent": 2048, "d_rel": 8, "rel_l2_clip_threshold": 6.0,
            "log_scaling_alpha": 0.2, "log_scaling_n_floor": 4096,
        },
    }  # fmt: skip
    for index, (heads, extent, d_rel, log_scaling) in TRANSFORMERS_INKLING_LAYERS.items():
        layer = InklingRelativeBias.from_hf_config(config, index, name=f"bias_{index}")
        assert (layer.num_heads, layer.rel_extent, layer.d_rel, layer.log_scaling) == (
            heads,
            extent,
            d_rel,
            log_scaling,
        )
        assert (layer.rel_l2_clip_threshold, layer.log_scaling_alpha, layer.log_scaling_n_floor) == (
            6.0,
            0.2,
            4096,
        )
        assert layer.name == f"bias_{index}"
    # A config without the keys gets Inkling2TextConfig's defaults: 48 heads, bands of 1024.
    defaults = InklingRelativeBias.from_hf_config({"model_type": "inkling2_text"}, 47)
    assert (defaults.num_heads, defaults.rel_extent, defaults.d_rel, defaults.log_scaling) == (
        48,
        1024,
        16,
        True,
    )
    assert not InklingRelativeBias.from_hf_config({"model_type": "inkling2_text"}, 46).log_scaling
    with pytest.raises(ValueError, match=r"InklingRelativeBias.from_hf_config\(config, layer_index\)"):
        hf_attention_layers(config)


def test_inkling_bias_saves_compiles_and_keeps_positions_out_of_bfloat16(tmp_path):
    layer, hidden = inkling_layer(True)
    scores_in, hidden_in = keras.Input((3, None, None)), keras.Input((None, INKLING["hidden_size"]))
    positions_in = keras.Input((None,), dtype="int32")
    model = keras.Model(
        [scores_in, hidden_in, positions_in],
        layer(scores_in, hidden_in, query_positions=positions_in, key_positions=positions_in),
    )
    positions = np.array([[2**17 - 5 + step for step in range(5)]] * 2, "int32")
    data = [np.zeros((2, 3, 5, 5), "float32"), hidden, positions]
    expected = model.predict(data, verbose=0)
    np.testing.assert_array_equal(
        expected, keras.ops.convert_to_numpy(layer.bias(hidden, positions, positions))
    )
    model.save(tmp_path / "inkling.keras")
    reloaded = keras.models.load_model(tmp_path / "inkling.keras")
    np.testing.assert_array_equal(reloaded.predict(data, verbose=0), expected)
    with tf.GradientTape() as tape:  # every weight trains (the gather passes gradients to the bank)
        loss = tf.reduce_sum(tf.square(layer.bias(hidden, positions, positions)))
    assert all(float(tf.reduce_max(tf.abs(g))) > 0 for g in tape.gradient(loss, layer.trainable_weights))
    xla = tf.function(lambda s, h, p: model([s, h, p]), jit_compile=True)
    np.testing.assert_allclose(
        xla(*data).numpy(), expected, rtol=0, atol=4 * FLOAT32_UNIT * np.abs(expected).max()
    )
    # Under mixed_bfloat16, float positions 131067.0, ... (131068 in bfloat16) reach the log
    # scale and the distances unrounded: the float32 bias, rounded once.
    mixed, _ = inkling_layer(True, dtype="mixed_bfloat16")
    added = mixed(np.zeros((2, 3, 5, 5), "float32"), hidden, query_positions=positions.astype("float32"),
                  key_positions=positions.astype("float32"))  # fmt: skip
    assert keras.backend.standardize_dtype(added.dtype) == "bfloat16"
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(keras.ops.cast(added, "float32")),
        keras.ops.convert_to_numpy(keras.ops.cast(keras.ops.cast(expected, "bfloat16"), "float32")),
    )


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: InklingRelativeBias(0, 8), r"`num_heads` must be a positive integer"),
        (lambda: InklingRelativeBias(2, 0), r"`rel_extent` must be a positive integer"),
        (lambda: InklingRelativeBias(2, 8, d_rel=0), r"`d_rel` must be a positive integer"),
        (lambda: InklingRelativeBias(2, 8, rel_l2_clip_threshold=0), r"`rel_l2_clip_threshold` must be"),
        (lambda: InklingRelativeBias(2, 8, log_scaling=1), r"`log_scaling` must be a boolean"),
        (lambda: InklingRelativeBias(2, 8, log_scaling_n_floor=-1), r"`log_scaling_n_floor` must be"),
        (lambda: InklingRelativeBias(2, 8)(np.zeros((1, 2, 3, 3), "float32"), np.zeros((1, 3), "float32")),
         r"`hidden_states` must have shape \(batch, q_len, hidden_size\).*shape=\(1, 3\)"),
        (lambda: InklingRelativeBias(2, 8)(np.zeros((1, 2, 3, 3), "float32"), np.zeros((1, 4, 6), "float32")),
         r"one state per query of the scores.*\(1, 4, 6\) for attention_scores.shape=\(1, 2, 3, 3\)"),
        (lambda: InklingRelativeBias(2, 8)(np.zeros((2, 2, 3, 3), "float32"), np.zeros((3, 3, 6), "float32")),
         r"one state per query of the scores.*\(3, 3, 6\) for attention_scores.shape=\(2, 2, 3, 3\)"),
        (lambda: InklingRelativeBias(2, 8)(keras.Input((2, 3)), keras.Input((3, 6))),
         r"`attention_scores` must have shape \(batch, num_heads, q_len, k_len\)"),
        (lambda: inkling_layer(False)[0].bias(np.zeros((1, 5, 6), "float32"), [0], [0]),
         r"`hidden_states` must have hidden_size 8, as the layer was built with"),
        (lambda: InklingRelativeBias(2, 8).bias(np.zeros((1, 1, 6), "int32"), [0], [0]),
         r"`hidden_states` must be floating-point"),
        (lambda: InklingRelativeBias(2, 8)(np.zeros((1, 3, 1, 1), "float32"), np.zeros((1, 1, 6), "float32")),
         r"`attention_scores` must have num_heads=2 heads"),
        (lambda: InklingRelativeBias.from_hf_config({"model_type": "llama"}, 0),
         r"`config` must be an Inkling 2 config.*model_type='llama'"),
        (lambda: InklingRelativeBias.from_hf_config({"model_type": "inkling2_text"}, 48),
         r"`layer_index` must be a decoder layer of the config, 0 to 47. Received: layer_index=48"),
        (lambda: attention_log_scale([0], log_scaling_n_floor=0), r"`log_scaling_n_floor` must be"),
        (lambda: attention_log_scale([-1]), r"`positions` must be non-negative"),
    ],
    ids=["heads-0", "extent-0", "d-rel-0", "threshold-0", "log-scaling-not-bool", "floor-negative",
         "hidden-rank-2", "hidden-length", "hidden-batch", "symbolic-scores-rank-3", "hidden-size",
         "hidden-int", "heads-differ", "other-model", "layer-index", "log-scale-floor", "log-scale-negative"],
)  # fmt: skip
def test_bad_inkling_arguments_are_clear_errors(make, message):
    with pytest.raises((ValueError, TypeError, tf.errors.InvalidArgumentError), match=message):
        make()


# ---------------------------------------------------------------------------------------------
# Window tables: Swin, BEiT, Swin v2

# Printed by transformers 5.24.0 (torch 2.14.1): `SwinRelativePositionBias(2, (3, 4))
# .relative_position_index`, `BeitRelativePositionBias.generate_relative_position_index((2, 3))`,
# `Swinv2SelfAttention(Swinv2Config(), 32, 2, (3, 4), pretrained_window_size)` 's
# `relative_coords_table[0]` and `relative_position_index`, and its `16 * sigmoid` bias with the
# MLP weights of `swinv2_weights()` (transformers' float32 coordinates, rounded here to 9 digits).
SWIN_INDEX_3X4 = np.array(
    [
        [17, 16, 15, 14, 10, 9, 8, 7, 3, 2, 1, 0],
        [18, 17, 16, 15, 11, 10, 9, 8, 4, 3, 2, 1],
        [19, 18, 17, 16, 12, 11, 10, 9, 5, 4, 3, 2],
        [20, 19, 18, 17, 13, 12, 11, 10, 6, 5, 4, 3],
        [24, 23, 22, 21, 17, 16, 15, 14, 10, 9, 8, 7],
        [25, 24, 23, 22, 18, 17, 16, 15, 11, 10, 9, 8],
        [26, 25, 24, 23, 19, 18, 17, 16, 12, 11, 10, 9],
        [27, 26, 25, 24, 20, 19, 18, 17, 13, 12, 11, 10],
        [31, 30, 29, 28, 24, 23, 22, 21, 17, 16, 15, 14],
        [32, 31, 30, 29, 25, 24, 23, 22, 18, 17, 16, 15],
        [33, 32, 31, 30, 26, 25, 24, 23, 19, 18, 17, 16],
        [34, 33, 32, 31, 27, 26, 25, 24, 20, 19, 18, 17],
    ]
)
BEIT_INDEX_2X3 = np.array(
    [
        [17, 15, 15, 15, 15, 15, 15],
        [16, 7, 6, 5, 2, 1, 0],
        [16, 8, 7, 6, 3, 2, 1],
        [16, 9, 8, 7, 4, 3, 2],
        [16, 12, 11, 10, 7, 6, 5],
        [16, 13, 12, 11, 8, 7, 6],
        [16, 14, 13, 12, 9, 8, 7],
    ]
)
SWINV2_INDEX_3X4 = np.array(
    [
        [17, 16, 15, 14, 10, 9, 8, 7, 3, 2, 1, 0],
        [18, 17, 16, 15, 11, 10, 9, 8, 4, 3, 2, 1],
        [19, 18, 17, 16, 12, 11, 10, 9, 5, 4, 3, 2],
        [20, 19, 18, 17, 13, 12, 11, 10, 6, 5, 4, 3],
        [24, 23, 22, 21, 17, 16, 15, 14, 10, 9, 8, 7],
        [25, 24, 23, 22, 18, 17, 16, 15, 11, 10, 9, 8],
        [26, 25, 24, 23, 19, 18, 17, 16, 12, 11, 10, 9],
        [27, 26, 25, 24, 20, 19, 18, 17, 13, 12, 11, 10],
        [31, 30, 29, 28, 24, 23, 22, 21, 17, 16, 15, 14],
        [32, 31, 30, 29, 25, 24, 23, 22, 18, 17, 16, 15],
        [33, 32, 31, 30, 26, 25, 24, 23, 19, 18, 17, 16],
        [34, 33, 32, 31, 27, 26, 25, 24, 20, 19, 18, 17],
    ]
)
SWINV2_TABLE_3X4 = np.array(
    [
        [
            [-1.056641698, -1.056641698],
            [-1.056641698, -0.88765502],
            [-1.056641698, -0.624823034],
            [-1.056641698, 0.0],
            [-1.056641698, 0.624823034],
            [-1.056641698, 0.88765502],
            [-1.056641698, 1.056641698],
        ],
        [
            [-0.773976028, -1.056641698],
            [-0.773976028, -0.88765502],
            [-0.773976028, -0.624823034],
            [-0.773976028, 0.0],
            [-0.773976028, 0.624823034],
            [-0.773976028, 0.88765502],
            [-0.773976028, 1.056641698],
        ],
        [
            [0.0, -1.056641698],
            [0.0, -0.88765502],
            [0.0, -0.624823034],
            [0.0, 0.0],
            [0.0, 0.624823034],
            [0.0, 0.88765502],
            [0.0, 1.056641698],
        ],
        [
            [0.773976028, -1.056641698],
            [0.773976028, -0.88765502],
            [0.773976028, -0.624823034],
            [0.773976028, 0.0],
            [0.773976028, 0.624823034],
            [0.773976028, 0.88765502],
            [0.773976028, 1.056641698],
        ],
        [
            [1.056641698, -1.056641698],
            [1.056641698, -0.88765502],
            [1.056641698, -0.624823034],
            [1.056641698, 0.0],
            [1.056641698, 0.624823034],
            [1.056641698, 0.88765502],
            [1.056641698, 1.056641698],
        ],
    ]
)
SWINV2_TABLE_3X4_PRETRAINED_5X6 = np.array(
    [
        [
            [-0.773976028, -0.845350981],
            [-0.773976028, -0.690129757],
            [-0.773976028, -0.459503859],
            [-0.773976028, 0.0],
            [-0.773976028, 0.459503859],
            [-0.773976028, 0.690129757],
            [-0.773976028, 0.845350981],
        ],
        [
            [-0.528320849, -0.845350981],
            [-0.528320849, -0.690129757],
            [-0.528320849, -0.459503859],
            [-0.528320849, 0.0],
            [-0.528320849, 0.459503859],
            [-0.528320849, 0.690129757],
            [-0.528320849, 0.845350981],
        ],
        [
            [0.0, -0.845350981],
            [0.0, -0.690129757],
            [0.0, -0.459503859],
            [0.0, 0.0],
            [0.0, 0.459503859],
            [0.0, 0.690129757],
            [0.0, 0.845350981],
        ],
        [
            [0.528320849, -0.845350981],
            [0.528320849, -0.690129757],
            [0.528320849, -0.459503859],
            [0.528320849, 0.0],
            [0.528320849, 0.459503859],
            [0.528320849, 0.690129757],
            [0.528320849, 0.845350981],
        ],
        [
            [0.773976028, -0.845350981],
            [0.773976028, -0.690129757],
            [0.773976028, -0.459503859],
            [0.773976028, 0.0],
            [0.773976028, 0.459503859],
            [0.773976028, 0.690129757],
            [0.773976028, 0.845350981],
        ],
    ]
)
SWINV2_BIAS_3X4 = np.array(
    [
        [
            [
                7.074210644,
                6.331930637,
                6.307629585,
                6.378007889,
                6.369334698,
                6.09896946,
                6.090540886,
                6.177539825,
                6.354733944,
                6.19422245,
                6.154989719,
                6.145884991,
            ],
            [
                7.950640202,
                7.074210644,
                6.331930637,
                6.307629585,
                6.951901913,
                6.369334698,
                6.09896946,
                6.090540886,
                6.667681217,
                6.354733944,
                6.19422245,
                6.154989719,
            ],
            [
                8.220787048,
                7.950640202,
                7.074210644,
                6.331930637,
                7.066609859,
                6.951901913,
                6.369334698,
                6.09896946,
                6.73642683,
                6.667681217,
                6.354733944,
                6.19422245,
            ],
            [
                8.41180706,
                8.220787048,
                7.950640202,
                7.074210644,
                7.045373917,
                7.066609859,
                6.951901913,
                6.369334698,
                6.749210358,
                6.73642683,
                6.667681217,
                6.354733944,
            ],
            [
                8.114829063,
                6.860886097,
                6.626331806,
                6.46753931,
                7.074210644,
                6.331930637,
                6.307629585,
                6.378007889,
                6.369334698,
                6.09896946,
                6.090540886,
                6.177539825,
            ],
            [
                9.401847839,
                8.114829063,
                6.860886097,
                6.626331806,
                7.950640202,
                7.074210644,
                6.331930637,
                6.307629585,
                6.951901913,
                6.369334698,
                6.09896946,
                6.090540886,
            ],
            [
                9.609295845,
                9.401847839,
                8.114829063,
                6.860886097,
                8.220787048,
                7.950640202,
                7.074210644,
                6.331930637,
                7.066609859,
                6.951901913,
                6.369334698,
                6.09896946,
            ],
            [
                9.768034935,
                9.609295845,
                9.401847839,
                8.114829063,
                8.41180706,
                8.220787048,
                7.950640202,
                7.074210644,
                7.045373917,
                7.066609859,
                6.951901913,
                6.369334698,
            ],
            [
                8.487895012,
                7.040002346,
                6.797495365,
                6.654283047,
                8.114829063,
                6.860886097,
                6.626331806,
                6.46753931,
                7.074210644,
                6.331930637,
                6.307629585,
                6.378007889,
            ],
            [
                9.675905228,
                8.487895012,
                7.040002346,
                6.797495365,
                9.401847839,
                8.114829063,
                6.860886097,
                6.626331806,
                7.950640202,
                7.074210644,
                6.331930637,
                6.307629585,
            ],
            [
                9.96407795,
                9.675905228,
                8.487895012,
                7.040002346,
                9.609295845,
                9.401847839,
                8.114829063,
                6.860886097,
                8.220787048,
                7.950640202,
                7.074210644,
                6.331930637,
            ],
            [
                10.088035583,
                9.96407795,
                9.675905228,
                8.487895012,
                9.768034935,
                9.609295845,
                9.401847839,
                8.114829063,
                8.41180706,
                8.220787048,
                7.950640202,
                7.074210644,
            ],
        ],
        [
            [
                4.872459412,
                4.748207569,
                4.766960621,
                4.873763084,
                3.737884998,
                4.321463108,
                4.655225277,
                4.815580845,
                3.485141277,
                4.136511326,
                4.468299389,
                4.705260277,
            ],
            [
                4.440131187,
                4.872459412,
                4.748207569,
                4.766960621,
                3.438361645,
                3.737884998,
                4.321463108,
                4.655225277,
                3.066277027,
                3.485141277,
                4.136511326,
                4.468299389,
            ],
            [
                4.2991786,
                4.440131187,
                4.872459412,
                4.748207569,
                3.280618906,
                3.438361645,
                3.737884998,
                4.321463108,
                2.900197744,
                3.066277027,
                3.485141277,
                4.136511326,
            ],
            [
                4.215764046,
                4.2991786,
                4.440131187,
                4.872459412,
                3.207050323,
                3.280618906,
                3.438361645,
                3.737884998,
                2.794057608,
                2.900197744,
                3.066277027,
                3.485141277,
            ],
            [
                5.466666698,
                5.123781204,
                5.127315044,
                5.152434826,
                4.872459412,
                4.748207569,
                4.766960621,
                4.873763084,
                3.737884998,
                4.321463108,
                4.655225277,
                4.815580845,
            ],
            [
                5.633000851,
                5.466666698,
                5.123781204,
                5.127315044,
                4.440131187,
                4.872459412,
                4.748207569,
                4.766960621,
                3.438361645,
                3.737884998,
                4.321463108,
                4.655225277,
            ],
            [
                5.442321301,
                5.633000851,
                5.466666698,
                5.123781204,
                4.2991786,
                4.440131187,
                4.872459412,
                4.748207569,
                3.280618906,
                3.438361645,
                3.737884998,
                4.321463108,
            ],
            [
                5.2918396,
                5.442321301,
                5.633000851,
                5.466666698,
                4.215764046,
                4.2991786,
                4.440131187,
                4.872459412,
                3.207050323,
                3.280618906,
                3.438361645,
                3.737884998,
            ],
            [
                5.484723091,
                5.264649391,
                5.299493313,
                5.281177521,
                5.466666698,
                5.123781204,
                5.127315044,
                5.152434826,
                4.872459412,
                4.748207569,
                4.766960621,
                4.873763084,
            ],
            [
                5.784135342,
                5.484723091,
                5.264649391,
                5.299493313,
                5.633000851,
                5.466666698,
                5.123781204,
                5.127315044,
                4.440131187,
                4.872459412,
                4.748207569,
                4.766960621,
            ],
            [
                5.630600452,
                5.784135342,
                5.484723091,
                5.264649391,
                5.442321301,
                5.633000851,
                5.466666698,
                5.123781204,
                4.2991786,
                4.440131187,
                4.872459412,
                4.748207569,
            ],
            [
                5.476244926,
                5.630600452,
                5.784135342,
                5.484723091,
                5.2918396,
                5.442321301,
                5.633000851,
                5.466666698,
                4.215764046,
                4.2991786,
                4.440131187,
                4.872459412,
            ],
        ],
    ]
)


def swinv2_weights():
    """Seeded MLP weights, torch's `(out, in)` layout: Linear(2, 512) weight and bias, Linear(512, 2)."""
    rng = np.random.default_rng(0)
    return (
        rng.normal(0, 0.5, (512, 2)).astype("float32"),
        rng.normal(0, 0.5, 512).astype("float32"),
        rng.normal(0, 0.05, (2, 512)).astype("float32"),
    )


def test_window_indices_are_swins_and_beits():
    np.testing.assert_array_equal(WindowPositionBias((3, 4), 2).relative_position_index, SWIN_INDEX_3X4)
    np.testing.assert_array_equal(WindowPositionBias((3, 4), 2).relative_position_index, SWINV2_INDEX_3X4)
    beit = WindowPositionBias((2, 3), 2, num_prefix_tokens=1)
    np.testing.assert_array_equal(beit.relative_position_index, BEIT_INDEX_2X3)
    beit.build()
    assert beit.relative_position_bias_table.shape == (3 * 5 + 3, 2)


def test_window_bias_is_its_table_at_the_index():
    layer = WindowPositionBias((3, 4), 3, num_prefix_tokens=1)
    layer.build()
    table = np.random.default_rng(3).normal(size=(5 * 7 + 3, 3)).astype("float32")
    layer.set_weights([table])
    expected = table[layer.relative_position_index].transpose(2, 0, 1)
    np.testing.assert_array_equal(layer.bias().numpy(), expected)
    scores = np.random.default_rng(4).normal(size=(6, 3, 13, 13)).astype("float32")
    np.testing.assert_array_equal(layer(scores).numpy(), scores + expected[None])


# transformers 5.24's `BeitRelativePositionBias(BeitConfig(image_size=128, patch_size=16,
# num_attention_heads=3))` with `relative_position_bias_table[i, h] = sin(0.37 i + 1.3 h) + 0.01 i`,
# printed from `module(window_size)[0]` (float32, torch 2.13 CPU): the sum, and entries (head, query, key).
BEIT_RESIZED = {
    (12, 12): (71539.8828125, {(0, 0, 0): 3.009953737258911, (1, 5, 17): 0.3750761151313782,
                               (2, 0, 9): 1.3942501544952393, (0, 9, 0): 3.193122625350952,
                               (1, 144, 3): 3.094597339630127, (2, 20, 143): -0.6480807065963745}),
    (10, 14): (67696.171875, {(0, 0, 0): 3.009953737258911, (1, 5, 17): 0.7808853983879089,
                              (2, 0, 9): 1.3942501544952393, (0, 9, 0): 3.193122625350952,
                              (1, 140, 3): 3.0518882274627686, (2, 20, 139): 0.038611769676208496}),
    (5, 6): (3441.5859375, {(0, 0, 0): 3.009953737258911, (1, 5, 17): 1.4960278272628784,
                            (2, 0, 9): 1.3942501544952393, (0, 9, 0): 3.193122625350952,
                            (1, 30, 3): 3.0929975509643555, (2, 20, 29): 0.6172841191291809}),
}  # fmt: skip


def torch_bilinear_matrix(source, target):
    """torch's `interpolate(mode="bilinear", align_corners=False)` along one axis, float64."""
    where = np.maximum((np.arange(target) + 0.5) * source / target - 0.5, 0.0)
    low = np.floor(where).astype(int)
    high, fraction = np.minimum(low + 1, source - 1), where - low
    matrix = np.zeros((target, source))
    np.add.at(matrix, (np.arange(target), low), 1 - fraction)
    np.add.at(matrix, (np.arange(target), high), fraction)
    return matrix


@pytest.mark.parametrize("window", list(BEIT_RESIZED), ids=lambda window: f"{window[0]}x{window[1]}")
def test_beit_bias_at_another_window_is_transformers_resized_table(window):
    layer = WindowPositionBias(8, 3, num_prefix_tokens=1)
    layer.build()
    index, head = np.arange(15 * 15 + 3)[:, None], np.arange(3)[None, :]
    table = np.sin(0.37 * index + 1.3 * head) + 0.01 * index
    layer.set_weights([table.astype("float32")])
    bias = layer.bias(window).numpy()
    total, entries = BEIT_RESIZED[window]
    tokens = window[0] * window[1] + 1
    assert bias.shape == (3, tokens, tokens)
    assert abs(bias.sum() - total) <= 1e-6 * abs(total)
    for where, value in entries.items():
        assert abs(bias[where] - value) <= 1e-5, where
    # The float64 restatement: the (15, 15) grid of distances resized per axis, the class
    # token's three entries kept, read at the new window's index.
    grid = table.astype("float32").astype("float64")
    resized = np.einsum(
        "Hh,Ww,hwk->HWk",
        torch_bilinear_matrix(15, 2 * window[0] - 1),
        torch_bilinear_matrix(15, 2 * window[1] - 1),
        grid[:-3].reshape(15, 15, 3),
    ).reshape(-1, 3)
    new_index = WindowPositionBias(window, 3, num_prefix_tokens=1).relative_position_index
    exact = np.concatenate([resized, grid[-3:]])[new_index].transpose(2, 0, 1)
    assert np.abs(bias - exact).max() <= 1e-5
    scores = np.zeros((2, 3, tokens, tokens), "float32")
    np.testing.assert_array_equal(layer(scores, window_size=window).numpy()[1], bias)
    np.testing.assert_array_equal(layer.bias((8, 8)).numpy(), layer.bias().numpy())  # its own: no resize


@pytest.mark.parametrize("pretrained", [(0, 0), (5, 6)], ids=["window", "pretrained-5x6"])
def test_continuous_coordinates_and_bias_are_swin_v2s(pretrained):
    layer = ContinuousPositionBias((3, 4), 2, pretrained_window_size=pretrained)
    expected = SWINV2_TABLE_3X4 if pretrained == (0, 0) else SWINV2_TABLE_3X4_PRETRAINED_5X6
    # float64 rounded once against transformers' float32 arithmetic: within a unit (and 9 digits)
    assert np.abs(layer.relative_coords_table - expected).max() <= FLOAT32_UNIT * 1.5
    np.testing.assert_array_equal(layer.relative_position_index, SWINV2_INDEX_3X4)
    if pretrained == (0, 0):
        hidden, hidden_bias, output = swinv2_weights()
        layer.build()
        layer.set_weights([hidden.T, hidden_bias, output.T])
        bias = layer.bias().numpy()
        assert bias.shape == (2, 12, 12)
        assert np.abs(bias - SWINV2_BIAS_3X4).max() <= 1e-5
        # and a float64 restatement of the MLP on our table
        coords = layer.relative_coords_table.reshape(-1, 2).astype("float64")
        table = np.maximum(coords @ hidden.T.astype("float64") + hidden_bias, 0) @ output.T.astype("float64")
        exact = 16 / (1 + np.exp(-table[layer.relative_position_index].transpose(2, 0, 1)))
        assert np.abs(bias - exact).max() <= 1e-5


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: WindowPositionBias(0, 2), r"`window_size` must be a positive integer"),
        (lambda: WindowPositionBias((3, 4, 5), 2), r"`window_size` must be an integer or a \(height"),
        (lambda: WindowPositionBias(3, 0), r"`num_heads` must be a positive integer"),
        (lambda: WindowPositionBias(3, 2, num_prefix_tokens=2), r"`num_prefix_tokens` must be 0 \(Swin\)"),
        (lambda: ContinuousPositionBias(3, 2, pretrained_window_size=(0, 4)), r"must be \(0, 0\) \(none\)"),
        (lambda: ContinuousPositionBias(3, 2, pretrained_window_size=(1, 1)), r"larger than 1 on each side"),
        (lambda: WindowPositionBias(3, 2)(np.zeros((1, 2, 8, 8), "float32")),
         r"must have shape \(batch \* windows, 2, 9, 9\)"),
        (lambda: ContinuousPositionBias(3, 2)(np.zeros((1, 4, 9, 9), "float32")),
         r"\(batch \* windows, 2, 9, 9\)"),
        (lambda: WindowPositionBias(3, 2)(np.zeros((1, 2, 9, 9), "float32"), window_size=(4, 4)),
         r"16 tokens of a 4 x 4 window. Received: attention_scores.shape=\(1, 2, 9, 9\)"),
        (lambda: WindowPositionBias(3, 2).bias(window_size=0), r"`window_size` must be a positive integer"),
        (lambda: ContinuousPositionBias(3, 2)(np.zeros((1, 2, 9, 9), "float32"), window_size=3),
         r"`window_size` must be None: `ContinuousPositionBias` serves the window it was built for"),
    ],
    ids=["window-0", "window-3-sides", "heads-0", "prefix-2", "pretrained-half", "pretrained-1",
         "grid-mismatch", "heads-mismatch", "call-window-mismatch", "bias-window-0", "continuous-window"],
)  # fmt: skip
def test_bad_window_arguments_are_clear_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.slow
def test_window_biases_save_reload_serve_and_run_in_tf_keras(tmp_path):
    import tf_keras
    from helpers import serve_without_tf_posenc
    from test_runtimes import to_onnx, to_tflite

    from tf_posenc import tf_keras as keras_2

    scores = keras.Input((2, 13, 13))
    window = WindowPositionBias((3, 4), 2, num_prefix_tokens=1, name="beit")
    continuous = ContinuousPositionBias((3, 4), 2, name="swinv2")
    inner = keras.ops.pad(continuous(scores[:, :, 1:, 1:]), ((0, 0), (0, 0), (1, 0), (1, 0)))
    model = keras.Model(scores, window(scores) + inner)
    window.set_weights([np.random.default_rng(5).normal(size=(38, 2)).astype("float32")])
    data = np.random.default_rng(6).normal(size=(3, 2, 13, 13)).astype("float32")
    expected = model.predict(data, verbose=0)
    model.save(tmp_path / "windows.keras")
    np.testing.assert_array_equal(
        keras.models.load_model(tmp_path / "windows.keras").predict(data, verbose=0), expected
    )
    model.export(str(tmp_path / "exported"), verbose=False)
    served = serve_without_tf_posenc(tmp_path, {"data": [data]})["data"]
    (tmp_path / "litert").mkdir()
    litert = to_tflite(model, tmp_path / "litert")
    onnx = to_onnx(model, tf.TensorSpec((None, 2, 13, 13), tf.float32))
    # The MLP's matmuls of a graph (folded on its constant coordinates) or of a converter round
    # apart from eager ones: float32 noise.
    for runtime, output in (("served", served), ("litert", litert(data)),
                            ("onnx", onnx(data))):  # fmt: skip
        np.testing.assert_allclose(output, expected, rtol=1e-6, atol=1e-6, err_msg=runtime)
    for new in (window, continuous):
        old = getattr(keras_2, type(new).__name__)(**{k: v for k, v in new.get_config().items() if k in (
            "window_size", "num_heads", "num_prefix_tokens", "pretrained_window_size")})  # fmt: skip
        old.build()
        old.set_weights(new.get_weights())
        assert isinstance(old, tf_keras.layers.Layer)
        np.testing.assert_array_equal(old.bias().numpy(), new.bias().numpy())


class PositionBiasedAttention(keras.layers.MultiHeadAttention):
    """Keras's `MultiHeadAttention` whose scores take a position bias: the bias of the call's
    positions, added in `_compute_attention`, Keras's hook for custom attention."""

    def __init__(self, position_bias, **kwargs):
        super().__init__(**kwargs)
        self.position_bias = position_bias

    def call(self, query, value, key=None, query_positions=None, key_positions=None, attention_mask=None):
        self._position_bias = self.position_bias.bias(query_positions, key_positions)
        return super().call(query, value, key=key, attention_mask=attention_mask)

    def _compute_attention(self, query, key, value, attention_mask=None, *args, **kwargs):
        scores = keras.ops.einsum("bqhd,bkhd->bhqk", query, key) / math.sqrt(query.shape[-1])
        scores = scores + self._position_bias
        if attention_mask is not None:
            scores = keras.ops.where(keras.ops.expand_dims(attention_mask, 1), scores, -1e9)
        weights = keras.ops.softmax(scores, axis=-1)
        return keras.ops.einsum("bhqk,bkhd->bqhd", weights, value), weights


@pytest.mark.parametrize("make", [lambda: AlibiBias(num_heads=2), lambda: RelativePositionBias(2, 16, 40)],
                         ids=["alibi", "t5"])  # fmt: skip
def test_a_multi_head_attention_subclass_takes_the_bias_of_its_positions(make):
    bias = make()
    attention = PositionBiasedAttention(bias, num_heads=2, key_dim=4)
    rng = np.random.default_rng(8)
    x = rng.normal(size=(1, 7, 8)).astype("float32")
    positions = np.arange(7)[None]
    mask = attention_mask(positions, positions)
    full = attention(x, x, query_positions=positions, key_positions=positions, attention_mask=mask).numpy()
    # The same with keras.ops.dot_product_attention(bias=...) on the layer's own projections.
    q, k, v = (
        dense(x).numpy() for dense in (attention._query_dense, attention._key_dense, attention._value_dense)
    )
    mixed = keras.ops.dot_product_attention(q, k, v, bias=bias.bias(positions, positions), mask=mask[:, None])
    expected = attention._output_dense(mixed).numpy()
    np.testing.assert_allclose(full, expected, atol=1e-5)
    # The last query alone over all keys: the full pass's last row.
    last = attention(
        x[:, 6:], x, query_positions=positions[:, 6:], key_positions=positions, attention_mask=mask[:, 6:]
    )
    last = last.numpy()
    np.testing.assert_allclose(last[0, 0], full[0, 6], atol=1e-6)


@pytest.mark.parametrize(
    "make", [lambda: AlibiBias(num_heads=8, dtype="mixed_bfloat16"),
             lambda: RelativePositionBias(8, dtype="mixed_bfloat16")],
    ids=["alibi", "t5"],
)  # fmt: skip
def test_float_positions_never_pass_through_the_compute_dtype(make):
    # 257.0 and 999.0 are 256 and 1000 in bfloat16: ALiBi's bias of the far key would be off by
    # a slope's worth, T5's near keys would land in a neighbouring exact bucket.
    layer = make()
    queries, keys = np.array([257.0, 999.0]), np.arange(250.0, 1000.0)
    scores = np.zeros((1, 8, 2, 750), "float32")
    added = layer(scores, query_positions=queries, key_positions=keys)
    assert keras.backend.standardize_dtype(added.dtype) == "bfloat16"
    exact = layer.bias(queries.astype("int32"), keys.astype("int32"))
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(keras.ops.cast(added, "float32")),
        keras.ops.convert_to_numpy(keras.ops.cast(keras.ops.cast(exact, "bfloat16"), "float32")),
    )
    with pytest.raises(ValueError, match=r"`autocast` must be False"):
        type(layer)(**{**layer.get_config(), "autocast": True})


@pytest.mark.parametrize("kind", ["swin-v2-mlp", "vit-table-resized", "inkling"])
def test_weights_are_read_in_float32_under_mixed_precision(kind):
    # Keras casts a mixed layer's float variables to its compute dtype when read, whatever its
    # `autocast`: an MLP or an interpolation of bfloat16 weights would round twice.
    from tf_posenc import LearnedPatchPositionEmbedding

    rng = np.random.default_rng(9)
    outputs = []
    for policy in ("float32", "mixed_bfloat16"):
        if kind == "swin-v2-mlp":
            layer = ContinuousPositionBias((3, 4), 4, dtype=policy)
            layer.build()
            layer.set_weights([rng.normal(size=w.shape).astype("float32") for w in layer.weights])
            output = layer(np.zeros((1, 4, 12, 12), "float32"))
        elif kind == "vit-table-resized":
            layer = LearnedPatchPositionEmbedding(4, 8, dtype=policy)
            layer.build()
            layer.set_weights([rng.normal(size=(1, 17, 8)).astype("float32")])
            output = layer(np.zeros((1, 1 + 5 * 7, 8), "float32"), grid=(5, 7))
        else:
            layer, hidden = inkling_layer(True, dtype=policy)
            positions = np.arange(70, 75)
            output = layer(np.zeros((2, 3, 5, 5), "float32"), hidden, query_positions=positions,
                           key_positions=positions)  # fmt: skip
        rng = np.random.default_rng(9)  # the same weights for both policies
        outputs.append(keras.ops.convert_to_numpy(keras.ops.cast(output, "float32")))
    exact, mixed = outputs
    rounded = keras.ops.convert_to_numpy(keras.ops.cast(keras.ops.cast(exact, "bfloat16"), "float32"))
    np.testing.assert_array_equal(mixed, rounded)
