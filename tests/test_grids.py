"""Positions for images and video: diffusers' 2-D and 3-D sine-cosine tables on any grid,
FLUX's and Qwen2-VL's multi-axis rotary embeddings, against their code restated in float64 and
values they printed."""

import json
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf
from bounds import ROTATION_BOUND, ROW_BOUND
from reference import reference_rotation

from tf_posenc import (
    AxialRotaryEmbedding,
    PatchPositionalEncoding,
    RotaryEmbedding,
    VideoPositionalEncoding,
    _validation,
    grid_positions,
    mrope_positions,
    sincos_2d,
    sincos_3d,
    vision_position_ids,
)

# Printed by diffusers 0.42.1 (torch 2.13 CPU), models/embeddings.py:
# get_2d_sincos_pos_embed(64, (4, 6), base_size=16, interpolation_scale=2.0) (PixArt-style),
# get_3d_sincos_pos_embed(64, (6, 4), 3, spatial_interpolation_scale=1.875) (CogVideoX-style),
# FluxPosEmbed(theta=10000, axes_dim=[16, 56, 56]) on ids [[0, 0, 0]] * 3 followed by the
# (0, 100 + row, 2000 + column) ids of a 5 x 7 grid: (token, column) -> value.
DIFFUSERS_2D = {
    (0, 0): 0.0,
    (7, 1): 0.6814839603331014,
    (13, 33): 0.778471741460492,
    (23, 63): 0.9999994307900751,
}
DIFFUSERS_3D = {(0, 0, 0): 0.0, (2, 5, 9): 0.8065784098850756, (1, 23, 40): 0.999573602345334,
                (2, 17, 63): 0.9999999735945142}  # fmt: skip
FLUX_COS = {
    (2, 0): 1.0,
    (3, 20): 0.041520051658153534,
    (37, 70): 0.9998955726623535,
    (37, 127): 0.9614048600196838,
}
FLUX_SIN = {(3, 21): 0.9991376996040344, (20, 60): 0.07334202527999878, (37, 126): 0.2751375734806061}


def diffusers_1d(embed_dim, positions):
    """diffusers' `get_1d_sincos_pos_embed_from_grid`, in float64 (its positions exact)."""
    omega = 1.0 / 10000 ** (np.arange(embed_dim // 2, dtype=np.float64) / (embed_dim / 2.0))
    out = np.outer(np.asarray(positions, np.float64).reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def diffusers_2d(embed_dim, grid_size, base_size=16, interpolation_scale=1.0):
    """diffusers' `get_2d_sincos_pos_embed`, restated in float64 with exact positions."""
    height, width = grid_size
    grid_h = np.arange(height) / (height / base_size) / interpolation_scale
    grid_w = np.arange(width) / (width / base_size) / interpolation_scale
    grid = np.stack(np.meshgrid(grid_w, grid_h, indexing="xy"), axis=0).reshape(2, -1)
    return np.concatenate(
        [diffusers_1d(embed_dim // 2, grid[0]), diffusers_1d(embed_dim // 2, grid[1])], axis=1
    )


def diffusers_3d(embed_dim, spatial_size, temporal_size, spatial_scale=1.0, temporal_scale=1.0):
    """diffusers' `get_3d_sincos_pos_embed`, restated in float64: spatial_size is (width, height)."""
    width, height = spatial_size
    grid = np.stack(
        np.meshgrid(np.arange(width) / spatial_scale, np.arange(height) / spatial_scale, indexing="xy")
    )
    grid = grid.reshape(2, -1)
    spatial = np.concatenate(
        [diffusers_1d(3 * embed_dim // 8, grid[0]), diffusers_1d(3 * embed_dim // 8, grid[1])], axis=1
    )
    temporal = diffusers_1d(embed_dim // 4, np.arange(temporal_size) / temporal_scale)
    spatial = np.repeat(spatial[None], temporal_size, axis=0)
    temporal = np.repeat(temporal[:, None], height * width, axis=1)
    return np.concatenate([temporal, spatial], axis=-1)


@pytest.mark.parametrize(
    "grid, base_size, scale",
    [((4, 6), 16, 2.0), ((6, 4), 8, 1.0), ((5, 5), 5, 1.0), ((3, 7), 1.5, 0.5)],
    ids=["pixart-wide", "tall", "square-mae", "fractional-base"],
)
def test_sincos_2d_is_diffusers_on_any_grid(grid, base_size, scale):
    expected = diffusers_2d(64, grid, base_size, scale)
    np.testing.assert_allclose(
        sincos_2d(64, grid, base_size=base_size, interpolation_scale=scale), expected, atol=1e-12
    )
    if grid == (4, 6):
        table = sincos_2d(64, grid, base_size=16, interpolation_scale=2.0)
        for (token, column), value in DIFFUSERS_2D.items():
            # diffusers rounds its positions to float32 first: up to 2**-24 of 8 rad here.
            assert table[token, column] == pytest.approx(value, abs=1e-6)
    # Without base_size, MAE's integer positions (divided by interpolation_scale).
    np.testing.assert_allclose(sincos_2d(64, 5), diffusers_2d(64, (5, 5), base_size=5), atol=1e-12)


@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize(
    "grid_size, base_size, scale, shape",
    [((4, 6), 16, 2.0, (2, 24, 64)), ((4, 6), 16, 2.0, (2, 4, 6, 64)), (None, None, 0.5, (2, 9, 3, 64)),
     (None, 32, 1.0, (1, 8, 12, 64)), (3, None, 1.0, (2, 10, 64))],
    ids=["flat", "grid", "variable-resolution", "variable-with-base-size", "cls-token"],
)  # fmt: skip
def test_patch_layer_adds_the_rounded_table(policy, grid_size, base_size, scale, shape):
    cls_token = shape == (2, 10, 64)
    layer = PatchPositionalEncoding(
        grid_size,
        d_model=64,
        cls_token=cls_token,
        base_size=base_size,
        interpolation_scale=scale,
        dtype=policy,
    )
    grid = (shape[1], shape[2]) if len(shape) == 4 else _validation.grid_shape("grid_size", grid_size, 2)
    table = sincos_2d(64, grid, cls_token, base_size=base_size, interpolation_scale=scale)
    added = tf.cast(layer(np.zeros(shape, "float32")), tf.float64).numpy().reshape(shape[0], -1, 64)
    assert np.abs(added - table).max() <= ROW_BOUND[policy]
    assert json.loads(json.dumps(layer.get_config())) == layer.get_config()
    assert PatchPositionalEncoding.from_config(layer.get_config()).get_config() == layer.get_config()


def test_patch_layer_reads_the_grid_when_the_graph_runs():
    layer = PatchPositionalEncoding(None, d_model=16)
    traced = tf.function(layer, input_signature=[tf.TensorSpec((None, None, None, 16))])
    for height, width in ((2, 3), (5, 4)):
        got = traced(np.zeros((1, height, width, 16), "float32")).numpy().reshape(-1, 16)
        assert np.abs(got - sincos_2d(16, (height, width))).max() <= ROW_BOUND["float32"]
    with_base = PatchPositionalEncoding(None, d_model=16, base_size=16)
    with pytest.raises(ValueError, match=r"With `base_size`, the positions depend on the grid's size"):
        tf.function(with_base, input_signature=[tf.TensorSpec((None, None, None, 16))])(
            np.zeros((1, 2, 2, 16))
        )


@pytest.mark.parametrize(
    "kwargs, shape, message",
    [
        ({"grid_size": (4, 6), "d_model": 16}, (1, 23, 16), r"must have shape \(batch, 24, 16\)"),
        ({"grid_size": None, "d_model": 16}, (1, 24, 16), r"when `grid_size` is None"),
        (
            {"grid_size": None, "d_model": 16, "cls_token": True},
            None,
            r"`cls_token=True` needs a `grid_size`",
        ),
        ({"grid_size": (4, 0), "d_model": 16}, None, r"`grid_size` must be a positive integer"),
        ({"grid_size": 4, "d_model": 16, "interpolation_scale": 0}, None, r"`interpolation_scale` must be"),
        ({"grid_size": 4, "d_model": 16, "base_size": -1}, None, r"`base_size` must be"),
    ],
    ids=["patch-count", "flat-without-grid", "cls-without-grid", "grid-zero", "scale-zero", "base-negative"],
)
def test_bad_patch_arguments_are_clear_errors(kwargs, shape, message):
    with pytest.raises(ValueError, match=message):
        PatchPositionalEncoding(**kwargs)(np.zeros(shape or (1, 16, 16), "float32"))


@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16"])
def test_video_layer_is_diffusers_3d_table(policy):
    expected = diffusers_3d(64, (6, 4), 3, spatial_scale=1.875)
    np.testing.assert_allclose(
        sincos_3d(64, (6, 4), 3, spatial_interpolation_scale=1.875), expected, atol=1e-12
    )
    for (frame, patch, column), value in DIFFUSERS_3D.items():
        assert expected[frame, patch, column] == pytest.approx(value, abs=1e-6)
    layer = VideoPositionalEncoding((6, 4), 3, d_model=64, spatial_interpolation_scale=1.875, dtype=policy)
    for shape in ((2, 3, 4, 6, 64), (2, 72, 64)):
        added = tf.cast(layer(np.zeros(shape, "float32")), tf.float64).numpy().reshape(2, 3, 24, 64)
        assert np.abs(added - expected).max() <= ROW_BOUND[policy]
    from_inputs = VideoPositionalEncoding(
        None, None, d_model=64, spatial_interpolation_scale=1.875, dtype=policy
    )
    added = tf.cast(from_inputs(np.zeros((1, 3, 4, 6, 64), "float32")), tf.float64).numpy()
    assert np.abs(added.reshape(1, 3, 24, 64) - expected).max() <= ROW_BOUND[policy]
    assert VideoPositionalEncoding.from_config(layer.get_config()).get_config() == layer.get_config()
    with pytest.raises(ValueError, match=r"`inputs` must have shape \(batch, 3, 4, 6, 64\)"):
        layer(np.zeros((1, 3, 6, 4, 64), "float32"))
    with pytest.raises(ValueError, match=r"`d_model` must be a multiple of 16"):
        VideoPositionalEncoding(4, 2, d_model=40)
    with pytest.raises(ValueError, match=r"must be given together"):
        VideoPositionalEncoding(4, None, d_model=64)


def flux_reference(ids, axes_dim=(16, 56, 56), theta=10000):
    """diffusers' FLUX `get_1d_rotary_pos_embed(..., repeat_interleave_real=True)` per axis,
    concatenated: the frequency of each interleaved pair, then the float64 angles."""
    frequencies = np.concatenate([1.0 / theta ** (np.arange(0, d, 2) / d) for d in axes_dim])
    bands = np.repeat(np.arange(len(axes_dim)), [d // 2 for d in axes_dim])
    return np.asarray(ids, np.float64)[:, bands] * frequencies


def test_axial_rotation_is_flux_embed_nd():
    ids = np.concatenate([np.zeros((3, 3), "int32"), grid_positions((1, 5, 7), offset=(0, 100, 2000))])
    layer = AxialRotaryEmbedding((16, 56, 56), layout="interleave")
    basis = np.zeros((1, len(ids), 128), "float32")
    basis[..., 0::2] = 1.0  # rotated: the cosine of every pair, then its sine, interleaved
    rows = layer(basis, positions=ids).numpy()[0]
    angles = flux_reference(ids)
    assert np.abs(rows[:, 0::2] - np.cos(angles)).max() <= ROW_BOUND["float32"]
    assert np.abs(rows[:, 1::2] - np.sin(angles)).max() <= ROW_BOUND["float32"]
    for (token, column), value in FLUX_COS.items():
        assert rows[token, column - column % 2] == pytest.approx(value, abs=ROW_BOUND["float32"])
    for (token, column), value in FLUX_SIN.items():
        assert rows[token, column - column % 2 + 1] == pytest.approx(value, abs=ROW_BOUND["float32"])
    x = np.random.default_rng(0).normal(size=(2, len(ids), 3, 128)).astype("float32")
    # As RotaryEmbedding with every pair's angle given: the formula at (row, column) ids.
    expected = np.stack(
        [
            x[..., 0::2] * np.cos(angles)[None, :, None] - x[..., 1::2] * np.sin(angles)[None, :, None],
            x[..., 1::2] * np.cos(angles)[None, :, None] + x[..., 0::2] * np.sin(angles)[None, :, None],
        ],
        axis=-1,
    ).reshape(x.shape)
    assert np.abs(layer(x, positions=ids).numpy() - expected).max() <= ROTATION_BOUND * np.abs(expected).max()


# Printed by transformers 5.24.0: Qwen2VLVisionRotaryEmbedding(Qwen2VLVisionConfig()) (head_dim
# 80) on the (row, column) ids of a 6 x 10 grid; and by timm 1.0.31: RotaryEmbeddingCat(dim=64,
# in_pixels=False, feat_shape=[24, 24], ref_feat_shape=[16, 16]).get_embed() (EVA-02's RoPE):
# (token, column) -> cos or sin.
QWEN2_VL_VISION = {
    "cos": {(11, 0): 0.5403023362159729, (37, 20): 0.7539022564888, (59, 39): 0.9999989867210388},
    "sin": {(11, 1): 0.5899180173873901, (37, 25): 0.6442176699638367, (59, 60): 0.41211849451065063},
}
TIMM_EVA02 = {
    "sin": {(25, 0): 0.6183698177337646, (100, 16): 0.026663506403565407, (575, 30): 0.0027266915421932936},
    "cos": {(25, 2): 0.9305463433265686, (300, 33): -0.1455000340938568, (575, 63): 0.9999963045120239},
}


def test_axial_half_layout_is_qwen2_vl_vision_rope():
    # transformers' Qwen2VisionRotaryEmbedding(head_dim // 2): row then column frequencies
    # (each of width head_dim // 2), duplicated into the half layout by `rotate_half`.
    head_dim, theta = 80, 10000.0
    ids = grid_positions((6, 10))
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim // 2, 2) / (head_dim // 2))
    angles = np.concatenate([ids[:, :1] * inv_freq, ids[:, 1:] * inv_freq], axis=-1)
    x = np.random.default_rng(1).normal(size=(1, 60, 2, head_dim)).astype("float32")
    layer = AxialRotaryEmbedding((head_dim // 2, head_dim // 2), max_wavelength=theta, layout="half")
    frequencies = np.concatenate([inv_freq, inv_freq])
    np.testing.assert_allclose(layer.frequencies(), frequencies, rtol=1e-15)
    got = layer(x, positions=ids).numpy()
    basis = np.zeros((1, 60, head_dim), "float32")
    basis[..., : head_dim // 2] = 1.0  # rotated: the cosine of every pair, then its sine
    rows = layer(basis, positions=ids).numpy()[0]
    for kind, values in QWEN2_VL_VISION.items():
        for (token, column), value in values.items():
            pair = column % (head_dim // 2)
            assert rows[token, pair + (head_dim // 2 if kind == "sin" else 0)] == pytest.approx(
                value, abs=1e-6
            )
    cos, sin = np.cos(angles)[None, :, None], np.sin(angles)[None, :, None]
    first, second = x[..., : head_dim // 2], x[..., head_dim // 2 :]
    expected = np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
    assert np.abs(got - expected).max() <= ROTATION_BOUND * np.abs(expected).max()
    # A single axis is RotaryEmbedding's rotation.
    single = AxialRotaryEmbedding((16,), layout="half")(x[..., :16], positions=np.arange(60)[:, None]).numpy()
    exact = reference_rotation(x[..., :16], np.arange(60)[None], 1.0 / 10000 ** (np.arange(0, 16, 2) / 16))
    assert np.abs(single - exact).max() <= ROTATION_BOUND * np.abs(exact).max()


def test_axial_position_scale_is_eva02_vision_rope():
    # EVA-02's VisionRotaryEmbeddingFast(dim=head_dim // 2, pt_seq_len=16, ft_seq_len=24), as
    # timm's RotaryEmbeddingCat(ref_feat_shape=...) has it:
    # positions arange(24) / 24 * 16 on rows and columns, bands interleaved over the head.
    head_dim, pt, ft = 64, 16, 24
    dim = head_dim // 2
    freqs = 1.0 / 10000 ** (np.arange(0, dim, 2)[: dim // 2] / dim)
    t = np.arange(ft) / ft * pt
    rows, columns = np.divmod(np.arange(ft * ft), ft)
    angles = np.concatenate([np.outer(t[rows], freqs), np.outer(t[columns], freqs)], axis=-1)
    layer = AxialRotaryEmbedding((dim, dim), layout="interleave", position_scale=pt / ft)
    x = np.random.default_rng(7).normal(size=(1, ft * ft, 2, head_dim)).astype("float32")
    cos, sin = np.cos(angles)[None, :, None], np.sin(angles)[None, :, None]
    even, odd = x[..., 0::2], x[..., 1::2]
    expected = np.stack([even * cos - odd * sin, odd * cos + even * sin], axis=-1).reshape(x.shape)
    got = layer(x, positions=grid_positions((ft, ft))).numpy()
    assert np.abs(got - expected).max() <= ROTATION_BOUND * np.abs(expected).max()
    basis = np.zeros((1, ft * ft, head_dim), "float32")
    basis[..., 0::2] = 1.0
    rows = layer(basis, positions=grid_positions((ft, ft))).numpy()[0]
    for kind, values in TIMM_EVA02.items():
        for (token, column), value in values.items():
            # timm's interleaved layout repeats each pair's value in columns 2j and 2j + 1.
            pair = column // 2
            assert rows[token, 2 * pair + (kind == "sin")] == pytest.approx(value, abs=1e-6)
    with pytest.raises(ValueError, match=r"`position_scale` must be a number, or one per axis"):
        AxialRotaryEmbedding((8, 8), position_scale=[1.0])


def test_axial_scores_depend_only_on_per_axis_differences():
    layer = AxialRotaryEmbedding((16, 24, 24))
    rng = np.random.default_rng(8)
    q, k = (rng.normal(size=(1, 1, 64)).astype("float32") for _ in range(2))

    def score(query_ids, key_ids):
        rotated_q = layer(q, positions=np.array([query_ids])).numpy().astype(np.float64)
        rotated_k = layer(k, positions=np.array([key_ids])).numpy().astype(np.float64)
        return float(np.sum(rotated_q * rotated_k))

    near = score((0, 3, 5), (1, 7, 2))
    for shift in ((10, 0, 0), (0, 1000, 0), (5, 70000, 2**20)):
        far = score(np.add((0, 3, 5), shift), np.add((1, 7, 2), shift))
        # Each output within a few float32 units: the sums agree to their rounding.
        assert far == pytest.approx(
            near, abs=float(64 * ROW_BOUND["float32"] * np.abs(q).sum() * np.abs(k).max())
        )


def test_axial_positions_per_example_in_graphs_and_errors():
    layer = AxialRotaryEmbedding((8, 8))
    x = np.random.default_rng(2).normal(size=(2, 6, 16)).astype("float32")
    ids = np.stack([grid_positions((2, 3)), grid_positions((2, 3), offset=5)])
    eager = layer(x, positions=ids).numpy()
    np.testing.assert_array_equal(eager[1], layer(x[1:], positions=ids[1]).numpy()[0])
    spec = [tf.TensorSpec((None, None, 16)), tf.TensorSpec((None, None, 2), tf.int32)]
    traced = tf.function(lambda x, ids: layer(x, positions=ids), input_signature=spec)
    np.testing.assert_array_equal(traced(x, ids).numpy(), eager)
    # XLA may fuse the rotation's last multiply-add (one rounding fewer).
    compiled = tf.function(layer, jit_compile=True)(x, positions=ids).numpy()
    assert np.abs(compiled - eager).max() <= 2 * ROW_BOUND["float32"] * np.abs(eager).max()
    with pytest.raises(ValueError, match=r"`positions` must have shape \(seq_len, 2\)"):
        layer(x, positions=ids[..., :1])
    with pytest.raises(ValueError, match=r"dim = sum\(axes_dim\) = 16"):
        layer(x[..., :8], positions=ids)
    with pytest.raises(ValueError, match=r"`axes_dim` must hold even widths"):
        AxialRotaryEmbedding((8, 7))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"must be non-negative"):
        layer(x, positions=-ids)
    config = layer.get_config()
    assert AxialRotaryEmbedding.from_config(json.loads(json.dumps(config))).get_config() == config


def test_grid_positions():
    assert grid_positions((2, 2)).tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert grid_positions((2, 1, 2), offset=3).tolist() == [[3, 3, 3], [3, 3, 4], [4, 3, 3], [4, 3, 4]]
    with pytest.raises(ValueError, match=r"`offset` must be a non-negative integer, or one per axis"):
        grid_positions((2, 2), offset=(1, 2, 3))


@pytest.mark.slow
def test_grid_layers_export_to_litert_and_onnx(tmp_path):
    from test_runtimes import to_onnx_with_positions, to_tflite_with_positions

    # A grid read when the model runs, axial ids given as a model input, a video table and
    # M-RoPE ids (batch first in the model's input, as Keras wants it).
    queries, ids = keras.Input((None, None, 16)), keras.Input((None, 2), dtype="int32")
    encoded = PatchPositionalEncoding(None, d_model=16)(queries)
    tokens = keras.layers.Reshape((-1, 1, 16))(encoded)
    rotated = AxialRotaryEmbedding((8, 8))(tokens, positions=ids)
    video = VideoPositionalEncoding((5, 3), 1, d_model=16)(keras.layers.Reshape((1, 3, 5, 16))(rotated))
    mrope_ids = keras.ops.stack(
        [keras.ops.zeros_like(ids[..., 0]), ids[..., 0], ids[..., 1]]
    )  # (3, batch, seq)
    mrope = RotaryEmbedding(mrope_section=[2, 3, 3])(tokens, positions=mrope_ids)
    outputs = keras.ops.concatenate([keras.layers.Reshape((-1, 1, 16))(video), mrope], axis=-1)
    model = keras.Model([queries, ids], outputs)
    x = np.random.default_rng(3).normal(size=(2, 3, 5, 16)).astype("float32")
    grid = np.repeat(grid_positions((3, 5))[None], 2, axis=0)
    expected = model.predict([x, grid], verbose=0)
    bound = ROTATION_BOUND * np.abs(expected).max()

    assert np.abs(to_tflite_with_positions(model, tmp_path)(x, grid) - expected).max() <= bound
    specs = [tf.TensorSpec((None, None, None, 16)), tf.TensorSpec((None, None, 2), tf.int32)]
    assert np.abs(to_onnx_with_positions(model, specs)(x, grid) - expected).max() <= bound


# Printed by transformers 5.24.0 (torch 2.13 CPU): Qwen2VLRotaryEmbedding(Qwen2VLTextConfig(
# hidden_size=3584, num_attention_heads=28, rope_parameters={"rope_type": "default",
# "mrope_section": [16, 24, 24], "rope_theta": 1e6})) and Qwen3VLTextRotaryEmbedding(head_dim=128,
# mrope_section [24, 20, 20], mrope_interleaved, rope_theta 5e6), forward(x, MROPE_IDS):
# (token, column) -> cos or sin.
MROPE_IDS = np.array(
    [[[0, 1, 2, 2, 2, 2, 4, 5000]], [[0, 1, 2, 2, 3, 3, 4, 5000]], [[0, 1, 2, 3, 2, 3, 4, 5000]]]
)
PRINTED_MROPE = {
    "qwen2-vl": {
        "cos": {(3, 20): 0.9996443390846252, (4, 20): 0.9991998672485352, (5, 50): 1.0,
                (7, 10): 0.7887293696403503, (7, 63): 0.9999807476997375},
        "sin": {(4, 17): 0.07637445628643036, (5, 45): 0.00018128890951629728, (7, 100): 0.8588960766792297},
    },
    "qwen3-vl": {
        "cos": {(3, 1): -0.0008637149003334343, (4, 2): 0.329466849565506, (5, 4): 0.41393357515335083,
                (7, 59): 0.9999944567680359, (7, 63): 0.9999992251396179},
        "sin": {(4, 1): 0.7061900496482849, (5, 5): 0.7827107310295105, (7, 100): 0.7530636191368103},
    },
}  # fmt: skip
MROPE_LAYERS = {
    "qwen2-vl": {"max_wavelength": 1000000.0, "mrope_section": [16, 24, 24]},
    "qwen3-vl": {"max_wavelength": 5000000.0, "mrope_section": [24, 20, 20], "mrope_interleaved": True},
}


def transformers_mrope_angles(ids, section, theta, interleaved, head_dim=128):
    """Qwen2-VL's and Qwen3-VL's `recomposition_frequencies` of the angles, in float64."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2) / head_dim)
    freqs = np.asarray(ids, np.float64)[..., None] * inv_freq  # (3, batch, seq, pairs)
    if not interleaved:
        bounds = np.cumsum([0, *section])
        return np.concatenate(
            [freqs[i % 3][..., bounds[i] : bounds[i + 1]] for i in range(len(section))], axis=-1
        )
    combined = freqs[0].copy()
    for axis, offset in ((1, 1), (2, 2)):
        combined[..., offset : section[axis] * 3 : 3] = freqs[axis][..., offset : section[axis] * 3 : 3]
    return combined


@pytest.mark.parametrize("model", list(MROPE_LAYERS))
def test_mrope_is_qwen_vl_multimodal_rope(model):
    layer = RotaryEmbedding(**MROPE_LAYERS[model])
    settings = MROPE_LAYERS[model]
    angles = transformers_mrope_angles(
        MROPE_IDS,
        settings["mrope_section"],
        settings["max_wavelength"],
        settings.get("mrope_interleaved", False),
    )
    basis = np.zeros((1, 8, 128), "float32")
    basis[..., :64] = 1.0  # rotated: the cosines, then the sines, of every pair
    rows = layer(basis, positions=MROPE_IDS).numpy()[0]
    assert np.abs(rows[:, :64] - np.cos(angles[0])).max() <= ROW_BOUND["float32"]
    assert np.abs(rows[:, 64:] - np.sin(angles[0])).max() <= ROW_BOUND["float32"]
    table = (
        np.concatenate([rows[:, :64], rows[:, :64]], axis=-1),
        np.concatenate([rows[:, 64:], rows[:, 64:]], -1),
    )
    for kind, values in PRINTED_MROPE[model].items():
        for (token, column), value in values.items():
            # transformers' float32 angle at id 5000 is off by up to 5000 * 2**-24 rad.
            assert table[kind == "sin"][token, column] == pytest.approx(
                value, abs=4e-4 if token == 7 else 1e-6
            )
    x = np.random.default_rng(4).normal(size=(1, 8, 2, 128)).astype("float32")
    first, second = x[..., :64], x[..., 64:]
    cos, sin = np.cos(angles)[:, :, None], np.sin(angles)[:, :, None]
    exact = np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
    assert np.abs(layer(x, positions=MROPE_IDS).numpy() - exact).max() <= ROTATION_BOUND * np.abs(exact).max()


def test_mrope_text_ids_are_plain_rope_and_decoding_uses_the_deltas():
    layer = RotaryEmbedding(mrope_section=[16, 24, 24], max_wavelength=1e6)
    x = np.random.default_rng(5).normal(size=(2, 12, 2, 128)).astype("float32")
    text = np.broadcast_to(np.arange(100, 112), (3, 2, 12))
    np.testing.assert_array_equal(layer(x, positions=text).numpy(), layer(x, start_index=100).numpy())
    types = [[0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]]
    positions, deltas = mrope_positions(types, image_grid_thw=[[1, 4, 6]])
    prompt = layer(x[:1], positions=positions)
    assert prompt.shape == (1, 12, 2, 128)
    # The next token (cache position 12) at 12 + delta on every axis.
    step = layer(x[:1, :1], start_index=12 + int(deltas[0, 0])).numpy()
    as_ids = layer(x[:1, :1], positions=np.full((3, 1, 1), 12 + deltas[0, 0])).numpy()
    np.testing.assert_array_equal(step, as_ids)


# transformers 5.24's Qwen2VLModel.get_rope_index on this batch (images 1x4x6 and 1x2x2, a
# 3x4x4 video, spatial_merge_size 2, row 0 left-padded by 2): its printed ids and deltas; transformers
# 5.25's Qwen2VLModel and PaddleOCRVLModel printed the same.
ROPE_INDEX_TYPES = [[0] * 5 + [1] * 6 + [0] * 2 + [2] * 12 + [0], [0] * 4 + [1] + [0] * 21]
ROPE_INDEX_MASK = [[0, 0] + [1] * 24, [1] * 26]
ROPE_INDEX_IDS = [
    [[0, 0, 0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7, 8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 10], list(range(26))],
    [[0, 0, 0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7, 8, 8, 9, 9, 8, 8, 9, 9, 8, 8, 9, 9, 10], list(range(26))],
    [[0, 0, 0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 10], list(range(26))],
]
ROPE_INDEX_DELTAS = [[-13], [0]]


@pytest.mark.parametrize("model_type", ["qwen2_vl", "paddleocr_vl"])
def test_mrope_positions_are_transformers_get_rope_index(model_type):
    positions, deltas = mrope_positions(
        ROPE_INDEX_TYPES,
        image_grid_thw=[[1, 4, 6], [1, 2, 2]],
        video_grid_thw=[[3, 4, 4]],
        attention_mask=ROPE_INDEX_MASK,
        model_type=model_type,
    )
    assert positions.dtype == np.int32 and positions.tolist() == ROPE_INDEX_IDS
    assert deltas.tolist() == ROPE_INDEX_DELTAS
    with pytest.raises(ValueError, match=r"run of 6 image tokens, but its grid \[1, 4, 4\]"):
        mrope_positions(ROPE_INDEX_TYPES[:1], image_grid_thw=[[1, 4, 4]], video_grid_thw=[[3, 4, 4]])
    with pytest.raises(ValueError, match=r"more video runs than `video_grid_thw` has grids"):
        mrope_positions(ROPE_INDEX_TYPES[:1], image_grid_thw=[[1, 4, 6]])
    with pytest.raises(ValueError, match=r"`token_types` must hold 0 \(text\), 1 \(image\) or 2"):
        mrope_positions([[0, 3]])


# transformers 5.25's Qwen2_5_VLModel.get_rope_index (vision_config: spatial_merge_size 2,
# tokens_per_second 2) on a 1x4x4 image and a 4x4x4 video in row 0 and a 2x2x2 video in row 1, which is
# left-padded by 17, with second_per_grid_ts [1.5, 1 / 3]: its printed ids and deltas. The second
# video's frames are 0.6666667 apart in float32, so both get t id 0 (truncated, as transformers does).
# fmt: off
QWEN2_5_VL_TYPES = [
    [0, 0, 0, 1, 1, 1, 1, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 0],
]
QWEN2_5_VL_MASK = [[1] * 26, [0] * 17 + [1] * 9]
QWEN2_5_VL_IDS = [
    [[0, 1, 2, 3, 3, 3, 3, 5, 6, 7, 7, 7, 7, 10, 10, 10, 10, 13, 13, 13, 13, 16, 16, 16, 16, 9],
     [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 3, 4, 5, 6, 7]],
    [[0, 1, 2, 3, 3, 4, 4, 5, 6, 7, 7, 8, 8, 7, 7, 8, 8, 7, 7, 8, 8, 7, 7, 8, 8, 9],
     [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 3, 4, 5, 6, 7]],
    [[0, 1, 2, 3, 4, 3, 4, 5, 6, 7, 8, 7, 8, 7, 8, 7, 8, 7, 8, 7, 8, 7, 8, 7, 8, 9],
     [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 3, 4, 5, 6, 7]],
]
QWEN2_5_VL_DELTAS = [[-9], [-1]]
# fmt: on


def test_mrope_positions_spread_qwen2_5_vl_frames_by_their_seconds():
    arguments = dict(
        image_grid_thw=[[1, 4, 4]], video_grid_thw=[[4, 4, 4], [2, 2, 2]], attention_mask=QWEN2_5_VL_MASK
    )
    positions, deltas = mrope_positions(
        QWEN2_5_VL_TYPES,
        **arguments,
        model_type="qwen2_5_vl",
        second_per_grid_ts=[1.5, 1 / 3],
        tokens_per_second=2,
    )
    assert positions.tolist() == QWEN2_5_VL_IDS and deltas.tolist() == QWEN2_5_VL_DELTAS
    # A frame a second at one token per second is Qwen2-VL's rule.
    spread, _ = mrope_positions(QWEN2_5_VL_TYPES, **arguments, model_type="qwen2_5_vl", tokens_per_second=1)
    plain, _ = mrope_positions(QWEN2_5_VL_TYPES, **arguments)
    np.testing.assert_array_equal(spread, plain)
    with pytest.raises(ValueError, match=r"`tokens_per_second` must be given for Qwen2.5-VL's videos"):
        mrope_positions(QWEN2_5_VL_TYPES, **arguments, model_type="qwen2_5_vl")
    with pytest.raises(
        ValueError, match=r"one positive number per video. Received: second_per_grid_ts=\[1.5\] for 2"
    ):
        mrope_positions(
            QWEN2_5_VL_TYPES,
            **arguments,
            model_type="qwen2_5_vl",
            second_per_grid_ts=[1.5],
            tokens_per_second=2,
        )
    with pytest.raises(
        ValueError, match=r"`second_per_grid_ts` is Qwen2.5-VL's: it needs model_type='qwen2_5_vl'"
    ):
        mrope_positions(QWEN2_5_VL_TYPES, **arguments, second_per_grid_ts=[1.5, 1.0])


# transformers 5.24's Qwen3VLModel.get_rope_index (with get_vision_position_ids) on a batch with
# images 1x4x6 and 1x2x2 and a 3x4x4 video whose frames sit between two timestamp text tokens
# each, spatial_merge_size 2, row 0 left-padded by 2: its printed ids and deltas. transformers
# 5.25's get_rope_index of Qwen3VLModel, Glm4vModel, Glm4vMoeModel, Glm46VModel, GlmOcrModel,
# Qwen3_5Model, Qwen3_5MoeModel, Qwen4ExpModel, CohereCompassModel and Cosmos3OmniModel printed the
# same ids and deltas on it.
# fmt: off
QWEN3_VL_TYPES = [
    [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2,
         2, 2, 2, 0, 0, 2, 2, 2, 2, 0, 0, 2, 2, 2, 2, 0],
    [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
         0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
]
QWEN3_VL_MASK = [
    [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
         1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
         1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
]
QWEN3_VL_IDS = [
    [
        [0, 0, 0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7, 8, 9, 10,
             10, 10, 10, 12, 13, 14, 14, 14, 14, 16, 17, 18, 18, 18, 18, 20],
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
             16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31],
    ],
    [
        [0, 0, 0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7, 8, 9, 10,
             10, 11, 11, 12, 13, 14, 14, 15, 15, 16, 17, 18, 18, 19, 19, 20],
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
             16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31],
    ],
    [
        [0, 0, 0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8, 9, 10,
             11, 10, 11, 12, 13, 14, 15, 14, 15, 16, 17, 18, 19, 18, 19, 20],
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
             16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31],
    ],
]
QWEN3_VL_DELTAS = [[-9], [0]]
# fmt: on


def qwen3_vl_rope_index(types, mask, images, videos, merge):
    """Qwen3-VL's rule restated: each video frame its own (1, h, w) grid; a vision run's ids
    are its start plus (0, row, column); text continues at start + max(h, w) // merge."""
    grids = {1: iter(images), 2: iter([(1, h, w) for t, h, w in videos for _ in range(t)])}
    ids = np.zeros((3, len(types), len(types[0])), np.int64)
    for row, (kinds, kept) in enumerate(zip(types, mask, strict=True)):
        kinds = [kind for kind, keep in zip(kinds, kept, strict=True) if keep]
        columns, start, index = [], 0, 0
        while index < len(kinds):
            end = index
            while end < len(kinds) and kinds[end] == kinds[index]:
                end += 1
            if kinds[index] == 0:
                columns += [(start + n,) * 3 for n in range(end - index)]
                start += end - index
            else:
                _, h, w = next(grids[kinds[index]])
                columns += [
                    (start, start + i, start + j) for i in range(h // merge) for j in range(w // merge)
                ]
                start += max(h, w) // merge
            index = end
        ids[:, row, np.asarray(kept, bool)] = np.asarray(columns).T
    return ids


@pytest.mark.parametrize(
    "model_type",
    ["qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen4_exp", "glm4v", "glm4v_moe", "glm46v",
     "glm_ocr", "cohere_compass", "cosmos3_omni"],
)  # fmt: skip
def test_mrope_positions_follow_qwen3_vl_frame_by_frame(model_type):
    arguments = dict(image_grid_thw=[[1, 4, 6], [1, 2, 2]], video_grid_thw=[[3, 4, 4]])
    positions, deltas = mrope_positions(
        QWEN3_VL_TYPES, **arguments, attention_mask=QWEN3_VL_MASK, model_type=model_type
    )
    assert positions.dtype == deltas.dtype == np.int32
    assert positions.tolist() == QWEN3_VL_IDS and deltas.tolist() == QWEN3_VL_DELTAS
    restated = qwen3_vl_rope_index(QWEN3_VL_TYPES, QWEN3_VL_MASK, [(1, 4, 6), (1, 2, 2)], [(3, 4, 4)], 2)
    np.testing.assert_array_equal(positions, restated)
    # Qwen2-VL's rule reads the same video as one run of 12 tokens, so these runs of 4 are refused.
    with pytest.raises(ValueError, match=r"run of 4 video tokens, but its grid \[3, 4, 4\]"):
        mrope_positions(QWEN3_VL_TYPES, **arguments, attention_mask=QWEN3_VL_MASK)
    with pytest.raises(
        ValueError, match=r"`model_type` must be one of .*Received: model_type='ernie4_5_vl_moe'"
    ):
        mrope_positions(QWEN3_VL_TYPES, **arguments, model_type="ernie4_5_vl_moe")


# Printed by `tools/print_transformers.py omni` (transformers 5.25): the `get_rope_index` of
# Qwen2.5-Omni's and Qwen3-Omni's thinkers on a batch with an image, an audio and videos (one
# left-padded row), and on one with a video and its audio interleaved as their processors do it;
# Qwen2.5-Omni's videos a third of a second per grid (t ids 0, 8, 16 after float32 truncation),
# Qwen3-Omni's 0.4 s.
OMNI = json.loads((pathlib.Path(__file__).parent / "transformers_5_25.json").read_text())["omni"]
OMNI_CASES = [key for key in OMNI if key != "source"]


@pytest.mark.parametrize("case", OMNI_CASES)
def test_mrope_positions_are_the_omni_models_get_rope_index(case):
    printed = OMNI[case]
    model_type = case.split("/")[0]
    arguments = {
        key: printed[key]
        for key in ("image_grid_thw", "video_grid_thw", "attention_mask", "second_per_grid_ts")
    }
    positions, deltas = mrope_positions(printed["token_types"], **arguments, model_type=model_type)
    assert positions.dtype == np.int32
    np.testing.assert_array_equal(positions, printed["positions"])  # Qwen3-Omni's are whole floats
    np.testing.assert_array_equal(deltas, printed["deltas"])
    thinker, _ = mrope_positions(printed["token_types"], **arguments, model_type=f"{model_type}_thinker")
    np.testing.assert_array_equal(thinker, positions)


def test_omni_positions_refuse_what_they_cannot_rotate():
    printed = OMNI["qwen3_omni_moe/plain"]
    arguments = {key: printed[key] for key in ("image_grid_thw", "video_grid_thw", "attention_mask")}
    # Half a second at 25 ids a second: t id 12.5, which Qwen3-Omni keeps and no rotation takes.
    with pytest.raises(
        ValueError, match=r"Qwen3-Omni's t ids of a video are fractional \(\[0.0, 12.5, 25.0\]"
    ):
        mrope_positions(
            printed["token_types"], **arguments, model_type="qwen3_omni_moe", second_per_grid_ts=[0.5, 1]
        )
    # Qwen2.5-Omni truncates it, as transformers does.
    truncated, _ = mrope_positions(
        printed["token_types"], **arguments, model_type="qwen2_5_omni", second_per_grid_ts=[0.5, 1]
    )
    assert sorted(set(truncated[0, 0, 28:40].tolist())) == [26, 38, 51]
    block = [kind for kind in OMNI["qwen2_5_omni/audio_in_video"]["token_types"][0] if kind in (2, 3)]
    with pytest.raises(ValueError, match=r"Row 0 has a video with its audio without its two start"):
        mrope_positions([[0] + block + [0, 0]], video_grid_thw=[[3, 4, 4]], model_type="qwen2_5_omni")
    # Qwen3-Omni's start tokens count up as text: the block starts right after the one there is.
    counted, _ = mrope_positions(
        [[0] + block + [0, 0]], video_grid_thw=[[3, 4, 4]], model_type="qwen3_omni_moe"
    )
    assert counted[:, 0, :2].tolist() == [[0, 1]] * 3
    audio, text = [[0, 3, 3, 0]], [[0, 0]]
    for types, kwargs, message in (
        (audio, {"model_type": "qwen2_vl"}, r"and 3 \(audio\) for the Omni models. Received: values \[3\]"),
        (
            audio,
            {"model_type": "qwen2_5_omni", "tokens_per_second": 2},
            r"`tokens_per_second` is Qwen2.5-VL's",
        ),
        (
            text,
            {"model_type": "qwen2_vl", "position_id_per_seconds": 25},
            r"`position_id_per_seconds` is the Omni",
        ),
        (
            audio,
            {"model_type": "qwen2_5_omni", "position_id_per_seconds": 0},
            r"`position_id_per_seconds` must be",
        ),
    ):
        with pytest.raises(ValueError, match=message):
            mrope_positions(types, **kwargs)


def test_mrope_configs_and_errors():
    qwen2_vl = {
        "model_type": "qwen2_vl",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 32768,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    }
    qwen3_vl = {"model_type": "qwen3_vl", "text_config": {
        "model_type": "qwen3_vl_text", "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128,
        "rope_theta": 5000000, "max_position_embeddings": 262144,
        "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20],
                         "rope_type": "default"}}}  # fmt: skip
    for config, model in ((qwen2_vl, "qwen2-vl"), (qwen3_vl, "qwen3-vl")):
        layer = RotaryEmbedding.from_hf_config(config)
        expected = RotaryEmbedding(**MROPE_LAYERS[model])
        x = np.random.default_rng(6).normal(size=(1, 8, 1, 128)).astype("float32")
        np.testing.assert_array_equal(
            layer(x, positions=MROPE_IDS).numpy(), expected(x, positions=MROPE_IDS).numpy()
        )
        assert RotaryEmbedding.from_config(layer.get_config()).get_config() == layer.get_config()
    # transformers 5.25 lays the sections out by each model's code and reads no
    # `mrope_interleaved`: Qwen3-VL's keys at the top of its config, without the flag, interleave.
    flat = {**qwen3_vl["text_config"], "model_type": "qwen3_vl"}
    flat["rope_scaling"] = {"mrope_section": [24, 20, 20], "rope_type": "default", "mrope_interleaved": False}
    settings = [
        {**RotaryEmbedding.from_hf_config(config).get_config(), "name": None} for config in (flat, qwen3_vl)
    ]
    assert settings[0] == settings[1] and settings[0]["mrope_interleaved"]
    # Sections their code defaults to where the config names none (Qwen2.5-VL's [16, 24, 24]).
    unnamed = {**qwen2_vl, "model_type": "qwen2_5_vl", "rope_scaling": {"rope_type": "default"}}
    layer = RotaryEmbedding.from_hf_config(unnamed)
    assert (layer.mrope_section, layer.mrope_interleaved) == ((16, 24, 24), False)
    # Interleaved sections need not cover the pairs: t takes the rest, as Qwen3-VL's
    # `recomposition_frequencies` gives it (Qwen4-Exp's defaults: [11, 11, 10] of 128 pairs).
    wide = RotaryEmbedding.from_hf_config({"model_type": "qwen4_exp_text"}, dtype="float64")
    assert (wide.mrope_section, wide.mrope_interleaved) == ((11, 11, 10), True)
    angles = transformers_mrope_angles(MROPE_IDS, [11, 11, 10], wide.max_wavelength, True, head_dim=256)
    x = np.random.default_rng(7).normal(size=(1, 8, 1, 256))
    first, second = x[..., :128], x[..., 128:]
    cos, sin = np.cos(angles)[:, :, None], np.sin(angles)[:, :, None]
    exact = np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
    assert np.abs(wide(x, positions=MROPE_IDS).numpy() - exact).max() <= 1e-9
    # Cohere Compass reads its rope per layer type, and its config class names none.
    with pytest.raises(
        ValueError, match=r"must have an entry for each of its layer types \['full_attention'\]"
    ):
        RotaryEmbedding.from_hf_config({"model_type": "cohere_compass"})
    layer = RotaryEmbedding(mrope_section=[16, 24, 20])
    with pytest.raises(ValueError, match=r"`mrope_section` must add up to the 64 rotating feature pairs"):
        layer(np.zeros((1, 8, 128), "float32"))
    with pytest.raises(ValueError, match=r"for M-RoPE must have shape \(3, batch, seq_len\)"):
        RotaryEmbedding(mrope_section=[16, 24, 24])(np.zeros((1, 8, 128), "float32"), positions=MROPE_IDS[:2])
    with pytest.raises(ValueError, match=r"`mrope_interleaved=True` needs a `mrope_section` of three sizes"):
        RotaryEmbedding(mrope_interleaved=True)
    with pytest.raises(ValueError, match=r"or two \(h, w; NeoMME\). Received: mrope_section=\[8\]"):
        RotaryEmbedding(mrope_interleaved=True, mrope_section=[8])
    with pytest.raises(ValueError, match=r"cannot be combined with rope_type='dynamic_ntk'"):
        RotaryEmbedding(
            mrope_section=[4, 4], rope_type="dynamic_ntk", scaling_factor=2.0, max_position_embeddings=8
        )


# ---------------------------------------------------------------------------------------------
# DINOv3's rotary embedding on normalised patch centres

DINOV3_CONFIG = {
    "model_type": "dinov3_vit",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "rope_theta": 100.0,
    "patch_size": 4,
    "image_size": 16,
}
# transformers 5.24's DINOv3ViTRopePositionEmbedding(DINOv3ViTConfig(**DINOV3_CONFIG)) in eval
# mode, forward on pixel values of 4h x 4w: its printed (cos, sin) at (token, column).
DINOV3_PRINTED = {
    "3x5": {
        "cos": {
            (0, 0): -0.5000002980232239,
            (0, 3): 0.9912398457527161,
            (7, 5): 1.0,
            (14, 4): 0.3090166747570038,
            (14, 7): 0.9873934984207153,
            (2, 12): 1.0,
            (14, 15): 0.9873934984207153,
        },
        "sin": {
            (0, 0): 0.8660252094268799,
            (0, 3): -0.13207416236400604,
            (7, 5): 0.0,
            (14, 4): -0.9510565996170044,
            (14, 7): 0.15828490257263184,
            (2, 12): 0.0,
            (14, 15): 0.15828490257263184,
        },
    },
    "4x4": {
        "cos": {
            (0, 0): 1.1924880638503055e-08,
            (0, 3): 0.9889172315597534,
            (7, 5): 0.08052082359790802,
            (15, 4): 1.1924880638503055e-08,
            (15, 7): 0.9889172315597534,
            (2, 12): -4.371138828673793e-08,
            (15, 15): 0.9889172315597534,
        },
        "sin": {
            (0, 0): 1.0,
            (0, 3): -0.14846791326999664,
            (7, 5): 0.996752917766571,
            (15, 4): -1.0,
            (15, 7): 0.14846791326999664,
            (2, 12): 1.0,
            (15, 15): 0.14846791326999664,
        },
    },
}


def dinov3_rows(grid, head_dim, theta):
    """DINOv3ViTRopePositionEmbedding.forward restated in float64: (cos, sin), (h * w, head_dim)."""
    h, w = grid
    inv_freq = 1 / theta ** np.arange(0, 1, 4 / head_dim)
    coords = np.stack(np.meshgrid((np.arange(h) + 0.5) / h, (np.arange(w) + 0.5) / w, indexing="ij"), -1)
    coords = 2.0 * coords.reshape(-1, 2) - 1.0
    angles = np.tile((2 * np.pi * coords[:, :, None] * inv_freq[None, None, :]).reshape(h * w, -1), 2)
    return np.cos(angles), np.sin(angles)


def test_dinov3_rotates_patches_at_their_normalised_centres():
    layer = AxialRotaryEmbedding.from_hf_config(DINOV3_CONFIG)
    config = layer.get_config()
    assert (config["axes_dim"], config["max_wavelength"], config["layout"], config["grid_coordinates"]) == (
        [8, 8],
        100.0,
        "half",
        "normalized",
    )
    assert AxialRotaryEmbedding.from_config(json.loads(json.dumps(config))).get_config() == config
    rng = np.random.default_rng(9)
    for grid in ((3, 5), (4, 4), (7, 2)):
        cells = grid[0] * grid[1]
        x = rng.normal(size=(2, cells, 4, 16)).astype("float32")
        cos, sin = (keras.ops.convert_to_numpy(table) for table in layer.rows(x, grid_size=grid))
        assert cos.shape == sin.shape == (1, cells, 16) and cos.dtype == np.float32
        exact_cos, exact_sin = dinov3_rows(grid, 16, 100.0)
        assert np.abs(cos[0] - exact_cos).max() <= ROW_BOUND["float32"]
        assert np.abs(sin[0] - exact_sin).max() <= ROW_BOUND["float32"]
        for kind, table in (("cos", cos), ("sin", sin)):
            for (token, column), value in (
                DINOV3_PRINTED.get(f"{grid[0]}x{grid[1]}", {}).get(kind, {}).items()
            ):
                # transformers forms its angles in float32: a few units of 2**-24 rad off.
                assert table[0, token, column] == pytest.approx(value, abs=2e-6), (grid, kind, token, column)
        # apply_rotary_pos_emb on the patch tokens, restated: q * cos + rotate_half(q) * sin.
        x64 = x.astype(np.float64)
        half = np.concatenate([-x64[..., 8:], x64[..., :8]], axis=-1)
        exact = x64 * exact_cos[None, :, None] + half * exact_sin[None, :, None]
        rotated = keras.ops.convert_to_numpy(layer(x, grid_size=grid))
        assert np.abs(rotated - exact).max() <= ROTATION_BOUND * np.abs(exact).max()
        compiled = tf.function(lambda inputs, grid=grid: layer(inputs, grid_size=grid))
        np.testing.assert_array_equal(compiled(x).numpy(), rotated)


def test_grid_size_gives_integer_ids_or_clear_errors():
    layer = AxialRotaryEmbedding((8, 8), layout="half")
    x = np.random.default_rng(2).normal(size=(1, 6, 16)).astype("float32")
    by_grid = keras.ops.convert_to_numpy(layer(x, grid_size=(2, 3)))
    np.testing.assert_array_equal(
        by_grid, keras.ops.convert_to_numpy(layer(x, positions=grid_positions((2, 3))))
    )
    cos, sin = layer.rows(x, positions=grid_positions((2, 3)))
    angles = (
        grid_positions((2, 3))[:, :, None] * (100.0**0 * 10000.0 ** -(np.arange(0, 8, 2) / 8))[None, None]
    )
    assert (
        np.abs(keras.ops.convert_to_numpy(cos)[0, :, :4] - np.cos(angles.reshape(6, -1))[:, :4]).max()
        <= (ROW_BOUND["float32"])
    )
    normalized = AxialRotaryEmbedding.from_hf_config(DINOV3_CONFIG)
    cases = [
        (lambda: layer(x), r"Pass `positions` or `grid_size`, one of them"),
        (lambda: layer(x, positions=grid_positions((2, 3)), grid_size=(2, 3)), r"one of them"),
        (
            lambda: layer(x, grid_size=(2, 2)),
            r"`grid_size` must have as many cells as `inputs` has steps \(6\)",
        ),
        (lambda: layer(x, grid_size=(6,)), r"`grid_size` must be a positive integer or a tuple of 2"),
        (
            lambda: normalized(np.zeros((1, 6, 16), "float32"), positions=grid_positions((2, 3))),
            r'grid_coordinates="normalized" rotates a patch grid: pass `grid_size`',
        ),
        (
            lambda: AxialRotaryEmbedding((8, 8), grid_coordinates="centres"),
            r"`grid_coordinates` must be one of",
        ),
        (
            lambda: AxialRotaryEmbedding.from_hf_config({**DINOV3_CONFIG, "model_type": "vit"}),
            r"or 'dinov3_vit'. Received: model_type='vit'",
        ),
        (
            lambda: AxialRotaryEmbedding.from_hf_config({**DINOV3_CONFIG, "hidden_size": 40}),
            r"must be a multiple of 4",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize(
    "make, function",
    [(lambda: PatchPositionalEncoding(16, 64), "sincos_2d"),
     (lambda: PatchPositionalEncoding(16), "sincos_2d"),
     (lambda: VideoPositionalEncoding((6, 4), 3, 64), "sincos_3d")],
    ids=["patch-positional-width", "patch-no-width", "video-positional-width"],
)  # fmt: skip
def test_grid_layers_take_their_width_by_keyword(make, function):
    # The NumPy tables take the width first (diffusers' order), the layers the grid first: a width
    # given by position could be a swapped grid size, so it is refused, naming both orders.
    with pytest.raises(ValueError, match=rf"takes `d_model` by keyword.*`{function}` takes the width first"):
        make()


# Printed by transformers 5.25.0 (torch 2.13 CPU), `vision_utils.get_vision_position_ids`:
# (torch.tensor([[1, 4, 6]]), 2), and (torch.tensor([[2, 2, 4], [1, 2, 2]]), torch.tensor([2, 1]),
# include_temporal=True).
TRANSFORMERS_VISION_IDS = [
    [[0, 0], [0, 1], [1, 0], [1, 1], [0, 2], [0, 3], [1, 2], [1, 3], [0, 4], [0, 5], [1, 4], [1, 5],
     [2, 0], [2, 1], [3, 0], [3, 1], [2, 2], [2, 3], [3, 2], [3, 3], [2, 4], [2, 5], [3, 4], [3, 5]],
    [[0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 1, 1], [0, 0, 2], [0, 0, 3], [0, 1, 2], [0, 1, 3],
     [1, 0, 0], [1, 0, 1], [1, 1, 0], [1, 1, 1], [1, 0, 2], [1, 0, 3], [1, 1, 2], [1, 1, 3],
     [0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 1, 1]],
]  # fmt: skip


def reference_vision_ids(grids, merges, include_temporal):
    """transformers' `get_vision_position_ids`, restated loop by loop."""
    ids = []
    for (t, h, w), m in zip(grids, merges, strict=True):
        frame = [
            (block_row * m + row, block_column * m + column)
            for block_row in range(h // m)
            for block_column in range(w // m)
            for row in range(m)
            for column in range(m)
        ]
        ids += [
            (frame_index, *cell) if include_temporal else cell for frame_index in range(t) for cell in frame
        ]
    return ids


def test_vision_position_ids_are_transformers_get_vision_position_ids():
    assert vision_position_ids([[1, 4, 6]], 2).tolist() == TRANSFORMERS_VISION_IDS[0]
    got = vision_position_ids([[2, 2, 4], [1, 2, 2]], [2, 1], include_temporal=True)
    assert got.tolist() == TRANSFORMERS_VISION_IDS[1] and got.dtype == np.int32
    draw = np.random.default_rng(5)
    for _ in range(20):
        merges = draw.integers(1, 4, size=3).tolist()
        grids = [
            [int(draw.integers(1, 4)), m * int(draw.integers(1, 5)), m * int(draw.integers(1, 5))]
            for m in merges
        ]
        for temporal in (False, True):
            expected = reference_vision_ids(grids, merges, temporal)
            assert [tuple(row) for row in vision_position_ids(grids, merges, temporal).tolist()] == expected


@pytest.mark.parametrize(
    "arguments, message",
    [(([[1, 3, 4]], 2), r"`spatial_merge_size` must divide each grid's height and width"),
     (([[1, 4, 4]], [2, 2]), r"`spatial_merge_size` must be a positive integer, or one per grid"),
     (([[1, 4, 4]], 0), r"`spatial_merge_size` must be a positive integer"),
     (([[4, 4]], 2), r"`grid_thw` must be a \(count, 3\) array of positive integers")],
    ids=["not-dividing", "one-per-grid", "zero", "grid-shape"],
)  # fmt: skip
def test_vision_position_ids_errors(arguments, message):
    with pytest.raises(ValueError, match=message):
        vision_position_ids(*arguments)
