"""Every published sinusoidal table: tensor2tensor, fairseq, MAE's 2-D patches, diffusion timesteps.

Each reference below restates its original code's formula in float64 NumPy (the original
names are given), independently of tf_posenc's own `columns`.
"""

import decimal
import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from bounds import FLOAT32_UNIT, ROW_BOUND
from reference import ROUNDED_POLICIES, TWO_PI
from tensorflow.core.protobuf import saved_model_pb2
from test_runtimes import float64_attributes, to_tflite

from tf_posenc import (
    PatchPositionalEncoding,
    PositionalEmbedding,
    PositionalEncoding,
    TimestepEmbedding,
    positional_encoding,
    sincos_2d,
)


def timing_signal(length, channels, min_timescale=1.0, max_timescale=1.0e4, start_index=0, divide=False):
    """tensor2tensor's `get_timing_signal_1d` (and TF Model Garden's RelativePositionEmbedding)."""
    position = np.arange(length, dtype=np.float64) + start_index
    num_timescales = channels // 2
    increment = math.log(max_timescale / min_timescale) / max(num_timescales - 1, 1)
    inverse = np.exp(np.arange(num_timescales) * -increment)
    inverse = inverse / min_timescale if divide else inverse * min_timescale
    scaled = position[:, None] * inverse[None, :]
    signal = np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)
    return np.pad(signal, [[0, 0], [0, channels % 2]])


def fairseq_table(num_embeddings, embedding_dim, padding_idx=None):
    """fairseq's `SinusoidalPositionalEmbedding.get_embedding`."""
    half_dim = embedding_dim // 2
    rate = math.log(10000) / (half_dim - 1)
    frequencies = np.exp(np.arange(half_dim) * -rate)
    angles = np.arange(num_embeddings)[:, None] * frequencies[None, :]
    table = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
    if embedding_dim % 2:
        table = np.concatenate([table, np.zeros((num_embeddings, 1))], axis=1)
    if padding_idx is not None:
        table[padding_idx] = 0
    return table


def fairseq_positions(tokens, padding_idx):
    """fairseq's `utils.make_positions`."""
    mask = tokens != padding_idx
    return np.cumsum(mask, axis=1) * mask + padding_idx


def mae_table(embed_dim, grid_size, cls_token=False):
    """MAE's `get_2d_sincos_pos_embed` (util/pos_embed.py)."""
    grid_h = np.arange(grid_size, dtype=np.float64)
    grid_w = np.arange(grid_size, dtype=np.float64)
    grid = np.stack(np.meshgrid(grid_w, grid_h), axis=0).reshape(2, 1, grid_size, grid_size)

    def one_axis(dim, positions):
        omega = 1.0 / 10000 ** (np.arange(dim // 2, dtype=np.float64) / (dim / 2.0))
        out = np.einsum("m,d->md", positions.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    table = np.concatenate([one_axis(embed_dim // 2, grid[0]), one_axis(embed_dim // 2, grid[1])], axis=1)
    return np.concatenate([np.zeros([1, embed_dim]), table], axis=0) if cls_token else table


def timestep_reference(
    timesteps, dim, flip_sin_to_cos=False, downscale_freq_shift=1, scale=1, max_period=10000
):
    """diffusers' `get_timestep_embedding` (DDPM's with the defaults here)."""
    half_dim = dim // 2
    exponent = -math.log(max_period) * np.arange(half_dim) / (half_dim - downscale_freq_shift)
    angles = np.asarray(timesteps, np.float64)[:, None] * np.exp(exponent)[None, :] * scale
    embedding = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
    if flip_sin_to_cos:
        embedding = np.concatenate([embedding[:, half_dim:], embedding[:, :half_dim]], axis=-1)
    if dim % 2:
        embedding = np.pad(embedding, ((0, 0), (0, 1)))
    return embedding


def added_to_zeros(layer, shape):
    return tf.cast(layer(tf.zeros(shape, layer.compute_dtype)), tf.float64).numpy()


# 1. tensor2tensor / TF Model Garden


@pytest.mark.parametrize("channels", [8, 9, 512], ids=lambda c: f"c{c}")
@pytest.mark.parametrize("min_timescale", [1.0, 2.0], ids=["min1", "min2"])
@pytest.mark.parametrize("policy", ROUNDED_POLICIES)
def test_tensor2tensor_timing_signal(channels, min_timescale, policy):
    layer = PositionalEncoding(
        4096, channels, convention="tensor2tensor", min_timescale=min_timescale, dtype=policy
    )
    added = tf.cast(
        layer(tf.zeros((1, 300, channels), layer.compute_dtype), start_index=3000), tf.float64
    ).numpy()[0]
    expected = timing_signal(300, channels, min_timescale, start_index=3000)
    assert np.abs(added - expected).max() <= ROW_BOUND[policy]
    table = positional_encoding(300, channels, convention="tensor2tensor", min_timescale=min_timescale)
    assert (
        np.abs(table.numpy()[0] - timing_signal(300, channels, min_timescale)).max() <= ROW_BOUND["float32"]
    )


# Printed from TF Model Garden itself (tf-models-official 2.20.0,
# `official.nlp.modeling.layers.RelativePositionEmbedding(hidden_size, min_timescale,
# max_timescale=1e4)(None, length=4)[3]`, computed there in float32).
MODEL_GARDEN_ROW_3 = {
    (8, 1.0): [
        0.14112000167369843,
        0.13879810273647308,
        0.006463258992880583,
        0.0002999999560415745,
        -0.9899924993515015,
        0.9903206825256348,
        0.9999791383743286,
        0.9999999403953552,
    ],
    (8, 2.0): [
        -0.279415488243103,
        0.34372633695602417,
        0.02051827311515808,
        0.0012000001734122634,
        0.9601702690124512,
        0.9390698671340942,
        0.9997894763946533,
        0.9999992847442627,
    ],
}


@pytest.mark.parametrize("hidden_size, min_timescale", sorted(MODEL_GARDEN_ROW_3))
def test_tensor2tensor_matches_values_printed_by_model_garden(hidden_size, min_timescale):
    layer = PositionalEncoding(4, hidden_size, convention="tensor2tensor", min_timescale=min_timescale)
    row = layer(tf.zeros((1, 4, hidden_size))).numpy()[0, 3]
    # Model Garden computes in float32, so its own values carry float32 rounding of the angles.
    np.testing.assert_allclose(row, MODEL_GARDEN_ROW_3[(hidden_size, min_timescale)], atol=2e-7)


def test_tensor2tensor_documented_timescales_divide():
    added = added_to_zeros(
        PositionalEncoding(64, 8, convention="tensor2tensor_documented", min_timescale=2.0), (1, 64, 8)
    )[0]
    assert np.abs(added - timing_signal(64, 8, 2.0, divide=True)).max() <= FLOAT32_UNIT
    assert np.abs(added - timing_signal(64, 8, 2.0)).max() > 0.1  # the code's form differs


# 2. fairseq


@pytest.mark.parametrize("dim", [8, 9, 256], ids=lambda d: f"d{d}")
def test_fairseq_table(dim):
    added = added_to_zeros(PositionalEncoding(1024, dim, convention="fairseq"), (1, 1024, dim))[0]
    assert np.abs(added - fairseq_table(1024, dim)).max() <= FLOAT32_UNIT


def test_fairseq_padding_idx_positions_and_zero_rows():
    padding_idx = 1
    tokens = np.array([[5, 6, 7, 1, 1], [1, 1, 8, 9, 4]])  # right and left padding
    layer = PositionalEmbedding(
        10, 8, position=16, convention="fairseq", padding_idx=padding_idx, embeddings_initializer="zeros"
    )
    added = layer(tokens).numpy()
    table = fairseq_table(16, 8, padding_idx)
    expected = table[fairseq_positions(tokens, padding_idx)]
    assert np.abs(added - expected).max() <= FLOAT32_UNIT
    assert np.all(added[tokens == padding_idx] == 0)
    with pytest.raises(ValueError, match=r"With `padding_idx`, positions come from the tokens"):
        layer(tokens, start_index=2)


# 3. MAE's 2-D patch grid


@pytest.mark.parametrize("cls_token", [False, True], ids=["patches", "with-cls"])
@pytest.mark.parametrize("embed_dim, grid_size", [(16, 4), (768, 14)], ids=["small", "vit-base"])
def test_sincos_2d_is_mae_table(embed_dim, grid_size, cls_token):
    table = sincos_2d(embed_dim, grid_size, cls_token)
    expected = mae_table(embed_dim, grid_size, cls_token)
    assert table.shape == expected.shape
    np.testing.assert_allclose(table, expected, atol=1e-12)


@pytest.mark.parametrize("policy", ROUNDED_POLICIES)
def test_patch_layer_adds_the_mae_table_to_both_shapes(policy):
    layer = PatchPositionalEncoding(14, d_model=64, cls_token=True, dtype=policy)
    added = added_to_zeros(layer, (2, 197, 64))
    assert np.abs(added - mae_table(64, 14, True)).max() <= ROW_BOUND[policy]
    grid = added_to_zeros(PatchPositionalEncoding(14, d_model=64, dtype=policy), (2, 14, 14, 64))
    assert np.abs(grid - mae_table(64, 14).reshape(14, 14, 64)).max() <= ROW_BOUND[policy]


@pytest.mark.parametrize(
    "kwargs, shape, message",
    [
        ({"grid_size": 4, "d_model": 6}, None, r"`d_model` must be a multiple of 4"),
        ({"grid_size": 4, "d_model": 8}, (1, 15, 8), r"must have shape \(batch, 16, 8\)"),
        ({"grid_size": 4, "d_model": 8, "cls_token": True}, (1, 4, 4, 8), r"without a class token"),
        ({"grid_size": 4, "d_model": 8, "cls_token": 1}, None, r"`cls_token` must be a boolean"),
    ],
    ids=["width", "patches", "grid-with-cls", "cls-type"],
)
def test_patch_layer_errors(kwargs, shape, message):
    with pytest.raises(ValueError, match=message):
        PatchPositionalEncoding(**kwargs)(np.zeros(shape, "float32"))


# 4. Diffusion timesteps


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"flip_sin_to_cos": True, "downscale_freq_shift": 0},
        {"scale": 1000.0},
        {"max_period": 100, "downscale_freq_shift": 0.5},
    ],
    ids=["ddpm", "stable-diffusion", "scaled", "period-and-shift"],
)
@pytest.mark.parametrize("dim", [32, 33, 320], ids=lambda d: f"d{d}")
def test_timestep_embedding_matches_get_timestep_embedding(kwargs, dim):
    timesteps = np.array([0, 1, 17, 500, 999, 10**6])
    layer = TimestepEmbedding(dim, **kwargs)
    embedded = layer(timesteps).numpy()
    assert embedded.shape == (6, dim)
    assert np.abs(embedded - timestep_reference(timesteps, dim, **kwargs)).max() <= FLOAT32_UNIT
    as_floats = layer(timesteps.astype("float32")).numpy()
    np.testing.assert_array_equal(as_floats, embedded)


def exact_timestep_table(timesteps, dim, flip_sin_to_cos=False, downscale_freq_shift=1):
    """`timestep_reference` with each angle `t * w` (a float32 times a float64: exact in 60
    digits) reduced modulo 2*pi before its sine: the formula's value at any timestep."""
    half = dim // 2
    rates = np.exp(-math.log(10000) * np.arange(half) / (half - downscale_freq_shift))
    table = np.zeros((len(timesteps), 2 * half))
    with decimal.localcontext() as context:
        context.prec = 60
        for row, timestep in enumerate(np.asarray(timesteps, np.float64)):
            for column, rate in enumerate(rates):
                angle = decimal.Decimal(float(timestep)) * decimal.Decimal(float(rate))
                reduced = float(angle - TWO_PI * int(angle / TWO_PI))
                table[row, column], table[row, half + column] = math.sin(reduced), math.cos(reduced)
    return np.concatenate([table[:, half:], table[:, :half]], axis=1) if flip_sin_to_cos else table


# Diffusion models' float timesteps: SD3's and FLUX's `sigma * 1000`, EDM's `log(sigma) / 4`, and
# what a float32 holds besides (negative, tiny, the largest fractions, whole ones above 2**24).
FLOAT_TIMESTEPS = np.array(
    [0.5, 929.81793, 8.9285717, -1.5536520, 1e-30, -2.5e-8, 8388607.5, -8388607.5, 2.0**30, -3.0, 999.75],
    "float32",
)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "float64"])
def test_timestep_embedding_takes_every_float_timestep(policy):
    layer = TimestepEmbedding(64, flip_sin_to_cos=True, downscale_freq_shift=0, dtype=policy)
    embedded = layer(FLOAT_TIMESTEPS)
    exact = exact_timestep_table(FLOAT_TIMESTEPS, 64, flip_sin_to_cos=True, downscale_freq_shift=0)
    got = np.asarray(keras.ops.cast(embedded, "float64"))
    assert np.abs(got - exact).max() <= ROW_BOUND[policy]
    # The same bits in a graph and through a functional model with a None batch. XLA fuses
    # multiply-adds: the last bits of a tiny value (-2.5e-8's sines) may differ, inside the
    # bound.
    graph = tf.function(layer)(FLOAT_TIMESTEPS)
    np.testing.assert_array_equal(np.asarray(keras.ops.cast(graph, "float64")), got)
    xla = np.asarray(keras.ops.cast(tf.function(layer, jit_compile=True)(FLOAT_TIMESTEPS), "float64"))
    assert np.abs(xla - exact).max() <= ROW_BOUND[policy]
    inputs = keras.Input((), dtype="float32")
    model = keras.Model(inputs, layer(inputs))
    np.testing.assert_array_equal(np.asarray(keras.ops.cast(model(FLOAT_TIMESTEPS), "float64")), got)
    # Whole timesteps give the integers' bits; 999.75 is not rounded to bfloat16's 1000 first.
    integers = np.asarray(keras.ops.cast(layer(np.array([0, 929, 2**30])), "float64"))
    np.testing.assert_array_equal(
        keras.ops.cast(layer(np.array([0.0, 929.0, 2.0**30], "float32")), "float64"), integers
    )
    assert np.abs(integers[1] - got[1]).max() > 0.1
    thousand = exact_timestep_table([1000.0], 64, flip_sin_to_cos=True, downscale_freq_shift=0)
    assert np.abs(got[-1] - thousand[0]).max() > 0.1


# Printed by diffusers 0.42.0 (torch 2.13.0 CPU), models/embeddings.py: SD3's and FLUX's
# `Timesteps(256, flip_sin_to_cos=True, downscale_freq_shift=0)` at FlowMatchEulerDiscreteScheduler
# (shift=3.0).set_timesteps(28).timesteps[[0, 5, 13, 27]], columns [0, 1, 37, 127, 128, 129, 200, 255];
# `get_timestep_embedding(c_noise, 64, flip_sin_to_cos=True, downscale_freq_shift=0)` at
# EDMEulerScheduler().set_timesteps(8)'s `precondition_noise(sigmas[[0, 3, 7]])` (log(sigma) / 4),
# columns [0, 5, 31, 32, 40, 63].
DIFFUSERS_TIMESTEPS = {
    "sd3": (
        256,
        [1000.0, 929.8179321289062, 764.6771240234375, 8.928571701049805],
        [0, 1, 37, 127, 128, 129, 200, 255],
        [
            [
                0.5623790621757507,
                0.7896266579627991,
                0.7850497961044312,
                0.994231641292572,
                0.8268795609474182,
                0.6135876178741455,
                -0.6129376292228699,
                0.10725405812263489,
            ],
            [
                0.9956326484680176,
                -0.2437230497598648,
                -0.4643445909023285,
                0.9950122237205505,
                -0.09335719048976898,
                -0.9698448777198792,
                -0.8696216940879822,
                0.0997527614235878,
            ],
            [
                -0.29617658257484436,
                -0.016421426087617874,
                -0.9989621639251709,
                0.9966257214546204,
                -0.9551331996917725,
                0.9998651742935181,
                -0.9162038564682007,
                0.08208033442497253,
            ],
            [
                -0.879395067691803,
                -0.43919098377227783,
                0.8120948672294617,
                0.9999995231628418,
                0.47609278559684753,
                0.8983937501907349,
                0.05018794909119606,
                0.0009594709263183177,
            ],
        ],
    ),
    "edm": (
        64,
        [1.0955066680908203, 0.3835209310054779, -1.553652048110962],
        [0, 5, 31, 32, 40, 63],
        [
            [
                0.4575960338115692,
                0.9664450883865356,
                1.0,
                0.8891602158546448,
                0.10933166742324829,
                0.00014608808851335198,
            ],
            [
                0.9273529052734375,
                0.995867133140564,
                1.0,
                0.3741879165172577,
                0.038342688232660294,
                5.1143313612556085e-05,
            ],
            [
                0.01714343950152397,
                0.9328943490982056,
                1.0,
                -0.9998530149459839,
                -0.15474091470241547,
                -0.00020718273299280554,
            ],
        ],
    ),
}


@pytest.mark.parametrize("model", DIFFUSERS_TIMESTEPS)
def test_float_timesteps_are_diffusers_embedding(model):
    dim, timesteps, columns, printed = DIFFUSERS_TIMESTEPS[model]
    timesteps = np.array(timesteps, "float32")
    embedded = TimestepEmbedding(dim, flip_sin_to_cos=True, downscale_freq_shift=0)(timesteps).numpy()
    restated = timestep_reference(timesteps, dim, flip_sin_to_cos=True, downscale_freq_shift=0)
    assert np.abs(embedded - restated).max() <= FLOAT32_UNIT
    # diffusers multiplies in float32: its angles are off by up to a float32 unit of t * w (and
    # of its float32 frequencies), 2**-24 * 1000 * 2 here.
    tolerance = 2**-24 * 2 * max(abs(timesteps).max(), 1) + 1e-6
    assert np.abs(embedded[:, columns] - np.array(printed)).max() <= tolerance


def test_timestep_embedding_errors():
    errors = (
        (np.nan, "must not hold NaN"),
        (np.inf, "must be finite"),
        (-(2.0**31), "must be finite, of magnitude below 2147483647"),
    )
    for bad, message in errors:
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"`inputs` {message}"):
            TimestepEmbedding(8)(np.array([0.5, bad], "float32"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="float64 must hold float32 numbers"):
        TimestepEmbedding(8)(np.array([0.1], "float64"))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`inputs` must be non-negative"):
        TimestepEmbedding(8)(np.array([-1]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`inputs` must be below 2147483647"):
        TimestepEmbedding(8)(np.array([2**31 - 1], "int64"))
    with pytest.raises(ValueError, match=r"`downscale_freq_shift` must be below dim // 2"):
        TimestepEmbedding(8, downscale_freq_shift=4)
    with pytest.raises(ValueError, match=r"`inputs` must have rank 1"):
        TimestepEmbedding(8)(np.zeros((2, 3), "int32"))


# 5. One design: the same guarantees everywhere


@pytest.mark.parametrize(
    "layer, data",
    [
        (PositionalEncoding(16, 9, convention="fairseq", name="l"), np.zeros((2, 5, 9), "float32")),
        (
            PositionalEmbedding(
                10, 8, 16, convention="tensor2tensor", min_timescale=2.0, padding_idx=1, name="l"
            ),
            np.array([[2, 3, 1]]),
        ),
        (PatchPositionalEncoding(2, d_model=8, cls_token=True, name="l"), np.zeros((1, 5, 8), "float32")),
        (TimestepEmbedding(9, flip_sin_to_cos=True, scale=2.0, name="l"), np.array([3, 4])),
    ],
    ids=["fairseq", "tensor2tensor-embedding", "patches", "timesteps"],
)
def test_configs_round_trip_and_reload(layer, data, tmp_path):
    config = json.loads(json.dumps(layer.get_config()))
    clone = type(layer).from_config(config)
    assert clone.get_config() == layer.get_config()
    inputs = keras.Input(data.shape[1:], dtype=str(data.dtype))
    model = keras.Model(inputs, layer(inputs))
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    np.testing.assert_array_equal(reloaded.predict(data, verbose=0), model.predict(data, verbose=0))


@pytest.mark.slow
def test_conventions_export_without_float64_and_run_in_litert(tmp_path):
    timesteps = keras.Input((), dtype="int32")
    model = keras.Model(timesteps, TimestepEmbedding(32, flip_sin_to_cos=True)(timesteps))
    serve = to_tflite(model, tmp_path)
    data = np.array([0, 7, 999], "int32")
    expected = timestep_reference(data, 32, flip_sin_to_cos=True)
    assert np.abs(serve(data) - expected).max() <= FLOAT32_UNIT
    patches = keras.Input((16, 8))
    patch_model = keras.Model(patches, PatchPositionalEncoding(4, d_model=8)(patches))
    patch_model.export(str(tmp_path / "patches"), verbose=False)
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((tmp_path / "patches" / "saved_model.pb").read_bytes())
    assert float64_attributes(saved.meta_graphs[0].graph_def) == set()
