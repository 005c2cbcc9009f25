import numpy as np
import pytest
import tensorflow as tf
from bounds import ROW_BOUND
from reference import reference_table

from tf_posenc import get_angles, positional_encoding, shift_matrix

# Values printed by the implementation tutorial for seq_length=50, d_model=512:
# the first three and last three columns of the rows it shows.
PRINTED_ANGLE_RATES_HEAD = [
    1.0,
    1.0,
    9.64661620e-01,
    9.64661620e-01,
    9.30572041e-01,
    9.30572041e-01,
    8.97687132e-01,
    8.97687132e-01,
    8.65964323e-01,
    8.65964323e-01,
    8.35362547e-01,
    8.35362547e-01,
]
PRINTED_ANGLE_RATES_TAIL = [
    1.24093776e-04,
    1.24093776e-04,
    1.19708503e-04,
    1.19708503e-04,
    1.15478198e-04,
    1.15478198e-04,
    1.11397386e-04,
    1.11397386e-04,
    1.07460783e-04,
    1.07460783e-04,
    1.03663293e-04,
    1.03663293e-04,
]
PRINTED_ANGLES = {
    1: ([1.0, 1.0, 9.64661620e-01], [1.07460783e-04, 1.03663293e-04, 1.03663293e-04]),
    2: ([2.0, 2.0, 1.92932324e00], [2.14921566e-04, 2.07326586e-04, 2.07326586e-04]),
    47: ([4.7e01, 4.7e01, 4.53390961e01], [5.05065679e-03, 4.87217476e-03, 4.87217476e-03]),
    48: ([4.8e01, 4.8e01, 4.63037578e01], [5.15811758e-03, 4.97583806e-03, 4.97583806e-03]),
    49: ([4.9e01, 4.9e01, 4.72684194e01], [5.26557836e-03, 5.07950135e-03, 5.07950135e-03]),
}
PRINTED_ENCODING = {
    0: ([0.0, 1.0, 0.0], [1.0, 0.0, 1.0]),
    1: ([8.41470985e-01, 5.40302306e-01, 8.21856190e-01], [9.99999994e-01, 1.03663293e-04, 9.99999995e-01]),
    2: ([9.09297427e-01, -4.16146837e-01, 9.36414739e-01], [9.99999977e-01, 2.07326584e-04, 9.99999979e-01]),
    47: ([1.23573123e-01, -9.92335469e-01, 9.77189818e-01], [9.99987245e-01, 4.87215549e-03, 9.99988131e-01]),
    48: (
        [-7.68254661e-01, -6.40144339e-01, 7.31235909e-01],
        [9.99986697e-01, 4.97581752e-03, 9.99987621e-01],
    ),
    49: (
        [-9.53752653e-01, 3.00592544e-01, -1.44026922e-01],
        [9.99986137e-01, 5.07947951e-03, 9.99987099e-01],
    ),
}


def tutorial_angles():
    return get_angles(np.arange(50)[:, np.newaxis], np.arange(512)[np.newaxis, :], 512)


def test_get_angles_shape_and_dtype_follow_broadcasting():
    angles = tutorial_angles()
    assert angles.shape == (50, 512)
    assert angles.dtype == np.float64


def test_get_angles_reproduces_printed_angle_rates():
    rates = tutorial_angles()[1]
    np.testing.assert_allclose(rates[:12], PRINTED_ANGLE_RATES_HEAD, rtol=1e-8)
    np.testing.assert_allclose(rates[-12:], PRINTED_ANGLE_RATES_TAIL, rtol=1e-8)


@pytest.mark.parametrize("row", sorted(PRINTED_ANGLES), ids=lambda row: f"pos{row}")
def test_get_angles_reproduces_printed_pos_times_angles(row):
    head, tail = PRINTED_ANGLES[row]
    angles = tutorial_angles()[row]
    np.testing.assert_allclose(angles[:3], head, rtol=1e-8)
    np.testing.assert_allclose(angles[-3:], tail, rtol=1e-8)


def test_positional_encoding_shape_and_dtype():
    table = positional_encoding(50, 512)
    assert isinstance(table, tf.Tensor)
    assert table.shape == (1, 50, 512)
    assert table.dtype == tf.float32


@pytest.mark.parametrize("row", sorted(PRINTED_ENCODING), ids=lambda row: f"pos{row}")
def test_positional_encoding_reproduces_printed_rows(row):
    head, tail = PRINTED_ENCODING[row]
    table = positional_encoding(50, 512).numpy()[0]
    np.testing.assert_allclose(table[row, :3], head, atol=2e-7)
    np.testing.assert_allclose(table[row, -3:], tail, atol=2e-7)


def test_definition_example_d_model_6_position_2():
    # The document cuts its values to three decimals (0.0927 is shown as 0.092).
    row = positional_encoding(3, 6).numpy()[0, 2].astype(np.float64)
    shown = np.trunc(row * 1000) / 1000
    np.testing.assert_allclose(shown, [0.909, -0.416, 0.092, 0.995, 0.004, 0.999], atol=1e-9)


@pytest.mark.parametrize(
    "position, d_model, layout",
    [
        (50, 512, "interleave"),
        (7, 5, "interleave"),
        (1, 1, "interleave"),
        (64, 16, "concat"),
        (10_000, 64, "interleave"),
    ],
    ids=["tutorial", "odd-width", "single", "concat", "long"],
)
def test_positional_encoding_is_float64_reference_rounded_once(position, d_model, layout):
    table = positional_encoding(position, d_model, layout=layout).numpy()[0]
    expected = reference_table(np.arange(position), d_model, layout=layout)
    # Within half a float32 unit, and the nearest float32 nearly everywhere (the reference
    # divides where the library multiplies, so a value on a rounding tie may go either way).
    assert np.abs(table - expected).max() <= ROW_BOUND["float32"] * (1 + 2**-20)
    assert np.mean(table == expected.astype(np.float32)) > 0.999


def test_odd_width_ends_with_a_sine():
    table = positional_encoding(10, 5).numpy()[0]
    positions = np.arange(10)
    np.testing.assert_allclose(table[:, 4], np.sin(positions / 10000 ** (4 / 5)), atol=1e-7)


def test_table_longer_than_one_chunk_is_seamless():
    table = positional_encoding(9000, 8).numpy()[0]
    expected = reference_table(np.arange(9000), 8)
    assert np.abs(table - expected).max() <= ROW_BOUND["float32"] * (1 + 2**-20)
    assert np.mean(table == expected.astype(np.float32)) > 0.999


@pytest.mark.parametrize("k", [1, 7, 49, -3, 0], ids=lambda k: f"k{k}")
@pytest.mark.parametrize("layout", ["interleave", "concat"])
def test_shift_matrix_moves_every_row_by_k(k, layout):
    table = reference_table(np.arange(-60, 120), 16, layout=layout)
    shifted = table @ shift_matrix(k, 16, layout=layout).T
    np.testing.assert_allclose(shifted[60:120], table[60 + k : 120 + k], atol=1e-12)


def test_shift_matrix_is_block_diagonal_rotation():
    matrix = shift_matrix(3, 8)
    np.testing.assert_allclose(matrix @ matrix.T, np.eye(8), atol=1e-12)
    block = matrix[2:4, 2:4]
    angle = 3 / 10000 ** (2 / 8)
    np.testing.assert_allclose(block, [[np.cos(angle), np.sin(angle)], [-np.sin(angle), np.cos(angle)]])
    assert not matrix[:2, 2:].any()


def test_shift_matrix_composes():
    np.testing.assert_allclose(shift_matrix(2, 8) @ shift_matrix(5, 8), shift_matrix(7, 8), atol=1e-12)


def test_shift_matrix_rejects_odd_width():
    with pytest.raises(ValueError, match=r"`d_model` must be even.*Received: d_model=5"):
        shift_matrix(1, 5)


@pytest.mark.parametrize("k", [1.5, "1", None, True], ids=["float", "str", "none", "bool"])
def test_shift_matrix_rejects_non_integer_k(k):
    with pytest.raises(ValueError, match=r"`k` must be an integer. Received: k="):
        shift_matrix(k, 8)


BAD_SIZES = [0, -1, 50.5, "50", None, True]
BAD_IDS = ["zero", "negative", "float", "str", "none", "bool"]


@pytest.mark.parametrize("value", BAD_SIZES, ids=BAD_IDS)
def test_positional_encoding_rejects_bad_position(value):
    expected = f"`position` must be a positive integer. Received: position={value!r} "
    with pytest.raises(ValueError, match=expected.replace("(", r"\(").replace(".", r"\.")):
        positional_encoding(value, 8)


@pytest.mark.parametrize("value", BAD_SIZES, ids=BAD_IDS)
def test_positional_encoding_rejects_bad_d_model(value):
    with pytest.raises(ValueError, match=r"`d_model` must be a positive integer\. Received"):
        positional_encoding(8, value)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"layout": "halves"}, "`layout` must be one of"),
        ({"max_wavelength": 1}, "`max_wavelength` must be a finite number greater than 1"),
        ({"max_wavelength": "10000"}, "`max_wavelength` must be a finite number greater than 1"),
        ({"max_wavelength": float("inf")}, "`max_wavelength` must be a finite number greater than 1"),
        ({"max_wavelength": float("nan")}, "`max_wavelength` must be a finite number greater than 1"),
        ({"dtype": "int32"}, r"`dtype` must be a floating-point dtype\. Received: dtype='int32'"),
        ({"dtype": "bool"}, r"`dtype` must be a floating-point dtype"),
    ],
    ids=[
        "layout",
        "wavelength-one",
        "wavelength-str",
        "wavelength-inf",
        "wavelength-nan",
        "int-dtype",
        "bool-dtype",
    ],
)
def test_positional_encoding_rejects_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        positional_encoding(8, 8, **kwargs)


def test_concat_layout_needs_even_width():
    with pytest.raises(ValueError, match="needs an even `d_model`"):
        positional_encoding(8, 7, layout="concat")


def test_error_message_shape_is_keras_like():
    with pytest.raises(ValueError) as error:
        positional_encoding(0, 8)
    assert str(error.value) == ("`position` must be a positive integer. Received: position=0 (of type int)")
