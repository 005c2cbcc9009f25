"""Property-based checks: random arguments against the float64 reference, for every layer and
public function. The example counts are bounded so that the suite stays quick."""

import numpy as np
import pytest
import tensorflow as tf
from bounds import BOUND, ROW_BOUND
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import ROUNDED_POLICIES, reference_rotation, reference_table, rope_frequencies

import tf_posenc

# Derandomized and without an example database, so every run (and CI) checks the same examples.
pytestmark = pytest.mark.slow  # about 20 s of examples
CHECKS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

policies = st.sampled_from(ROUNDED_POLICIES)
wavelengths = st.one_of(st.integers(2, 100000), st.floats(1.5, 1e6))


@st.composite
def encoding_calls(draw):
    d_model = draw(st.integers(1, 40))
    layout = draw(st.sampled_from(["interleave", "concat"] if d_model % 2 == 0 else ["interleave"]))
    position = draw(st.integers(1, 2**31 - 1))
    seq_len = draw(st.integers(1, min(position, 70)))
    start = draw(st.integers(0, min(position - seq_len, 2**24)))
    return position, d_model, layout, seq_len, start


@CHECKS
@given(encoding_calls(), wavelengths, policies, st.booleans())
def test_positional_encoding_matches_the_reference(call, max_wavelength, policy, use_positions):
    position, d_model, layout, seq_len, start = call
    layer = tf_posenc.PositionalEncoding(
        position, d_model, max_wavelength=max_wavelength, layout=layout, dtype=policy
    )
    zeros = tf.zeros((2, seq_len, d_model), layer.compute_dtype)
    wanted = np.arange(start, start + seq_len)
    if use_positions:
        wanted = np.random.default_rng(seq_len).integers(0, min(position, 2**24), size=(2, seq_len))
        added = layer(zeros, positions=wanted)
    else:
        added = layer(zeros, start_index=start)
    expected = np.broadcast_to(
        reference_table(wanted, d_model, max_wavelength, layout), (2, seq_len, d_model)
    )
    assert added.dtype == layer.compute_dtype
    assert np.abs(tf.cast(added, tf.float64).numpy() - expected).max() <= ROW_BOUND[policy]


@CHECKS
@given(st.integers(1, 2000), st.integers(1, 64), wavelengths)
def test_positional_encoding_function_matches_the_reference(position, d_model, max_wavelength):
    table = tf_posenc.positional_encoding(position, d_model, max_wavelength=max_wavelength)
    expected = reference_table(np.arange(position), d_model, max_wavelength)
    assert table.shape == (1, position, d_model)
    assert np.abs(table.numpy()[0] - expected).max() <= ROW_BOUND["float32"]


@CHECKS
@given(
    st.integers(-(10**6), 10**6),
    st.integers(1, 16).map(lambda half: 2 * half),
    wavelengths,
    st.integers(0, 10**6),
)
def test_shift_matrix_moves_rows(shift, d_model, max_wavelength, pos):
    pos = max(pos, -shift)  # both rows at non-negative positions
    moved = (
        tf_posenc.shift_matrix(shift, d_model, max_wavelength)
        @ reference_table([pos], d_model, max_wavelength)[0]
    )
    np.testing.assert_allclose(moved, reference_table([pos + shift], d_model, max_wavelength)[0], atol=1e-6)


@CHECKS
@given(
    st.integers(1, 12).map(lambda half: 2 * half),
    st.integers(0, 2**24),
    policies,
    st.sampled_from(["half", "interleave"]),
    wavelengths,
)
def test_rotary_embedding_matches_the_reference(dim, start, policy, layout, max_wavelength):
    layer = tf_posenc.RotaryEmbedding(max_wavelength=max_wavelength, layout=layout, dtype=policy)
    x = tf.cast(np.random.default_rng(start).normal(size=(2, 5, dim)), layer.compute_dtype)
    rotated = layer(x, start_index=start)
    exact = reference_rotation(
        tf.cast(x, tf.float64).numpy(),
        np.arange(start, start + 5)[None],
        rope_frequencies(dim, max_wavelength),
        layout,
    )
    floor = np.abs(tf.cast(tf.cast(exact, layer.compute_dtype), tf.float64).numpy() - exact).max()
    factor = 4 if policy == "float32" else 2
    assert np.abs(tf.cast(rotated, tf.float64).numpy() - exact).max() <= factor * floor + 1e-30


@CHECKS
@given(st.integers(1, 30), st.integers(1, 12), policies)
def test_positional_embedding_matches_the_reference(seq_len, half_width, policy):
    d_model = 2 * half_width
    layer = tf_posenc.PositionalEmbedding(
        20, d_model, position=64, dtype=policy, embeddings_initializer="ones"
    )
    tokens = np.random.default_rng(seq_len).integers(0, 20, size=(2, seq_len))
    embedded = tf.cast(layer(tokens), tf.float64).numpy()
    expected = np.sqrt(d_model) + reference_table(np.arange(seq_len), d_model)
    scale = max(1.0, np.sqrt(d_model) + 1)
    assert np.abs(embedded - expected).max() <= 2 * BOUND[policy] * scale


@CHECKS
@given(st.lists(st.lists(st.booleans(), min_size=6, max_size=6), min_size=1, max_size=4))
def test_positions_from_mask_count_real_tokens(rows):
    mask = np.array(rows)
    positions = tf_posenc.positions_from_mask(mask).numpy()
    for row, mask_row in zip(positions, mask, strict=True):
        np.testing.assert_array_equal(row[mask_row], np.arange(mask_row.sum()))
        assert (row[~mask_row] >= 0).all()


@CHECKS
@given(
    st.lists(st.integers(0, 10**6), min_size=1, max_size=6),
    st.integers(4, 40),
    st.sampled_from([0, 1]),
    st.booleans(),
    st.floats(0.5, 1000.0),
    policies,
)
def test_timestep_embedding_matches_the_reference(timesteps, dim, shift, flip, scale, policy):
    layer = tf_posenc.TimestepEmbedding(
        dim, downscale_freq_shift=shift, flip_sin_to_cos=flip, scale=scale, dtype=policy
    )
    half = dim // 2
    rates = scale * np.exp(-np.log(10000) * np.arange(half) / (half - shift))
    angles = np.asarray(timesteps, np.float64)[:, None] * rates
    halves = [np.cos(angles), np.sin(angles)] if flip else [np.sin(angles), np.cos(angles)]
    expected = np.pad(np.concatenate(halves, axis=1), ((0, 0), (0, dim % 2)))
    embedded = tf.cast(layer(np.array(timesteps)), tf.float64).numpy()
    assert np.abs(embedded - expected).max() <= ROW_BOUND[policy]


@CHECKS
@given(st.integers(1, 16).map(lambda quarter: 4 * quarter), st.integers(1, 12), st.booleans(), policies)
def test_patch_encoding_matches_the_reference(d_model, grid_size, cls_token, policy):
    row, column = np.divmod(np.arange(grid_size**2), grid_size)
    half = d_model // 2
    rates = 10000.0 ** -(np.arange(half // 2) / (half / 2))

    def axis(positions):
        angles = positions[:, None] * rates
        return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)

    expected = np.concatenate([axis(column), axis(row)], axis=1)
    if cls_token:
        expected = np.concatenate([np.zeros((1, d_model)), expected])
    np.testing.assert_allclose(tf_posenc.sincos_2d(d_model, grid_size, cls_token), expected, atol=1e-12)
    layer = tf_posenc.PatchPositionalEncoding(grid_size, d_model=d_model, cls_token=cls_token, dtype=policy)
    added = tf.cast(layer(tf.zeros((1,) + expected.shape, layer.compute_dtype)), tf.float64).numpy()[0]
    assert np.abs(added - expected).max() <= ROW_BOUND[policy]
