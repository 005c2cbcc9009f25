"""Detection models' positions against transformers 5.25's own classes, from the values
`print_transformers.py detr_sine` recorded: DETR's 2-D sine embedding of a pixel mask and its
variants, and RT-DETR's and OmDet-Turbo's mask-free tables."""

import json
import math
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_posenc

PRINTED = json.loads((pathlib.Path(__file__).parent / "transformers_detr_sine_5_25.json").read_text())[
    "cases"
]
FEATURES = 8


def detr_mask():
    """`print_transformers.detr_mask`: the second example padded at the bottom and on the right."""
    mask = np.ones((2, 5, 7), dtype=bool)
    mask[1, 3:, :] = False
    mask[1, :, 5:] = False
    return mask


def printed(name):
    case = PRINTED[name]
    return np.array(case["output"]).reshape(case["shape"])


def restated(mask, temperature=(10000.0, 10000.0), normalize=True, scale=2 * math.pi, offset=0.0):
    """`DetrSinePositionEmbedding.build_sine_position_embedding`, restated in float64 NumPy,
    channels last."""
    counts = [np.cumsum(mask.astype(np.float64), axis=axis) for axis in (1, 2)]
    if normalize:
        counts[0] = (counts[0] + offset) / (counts[0][:, -1:, :] + 1e-6) * scale
        counts[1] = (counts[1] + offset) / (counts[1][:, :, -1:] + 1e-6) * scale
    parts = []
    for count, base in zip(counts, temperature, strict=True):
        steps = base ** (2 * (np.arange(FEATURES) // 2) / FEATURES)
        angles = count[..., None] / steps
        parts.append(np.where(np.arange(FEATURES) % 2 == 0, np.sin(angles), np.cos(angles)))
    return np.concatenate(parts, axis=-1)


# model type: (arguments, what transformers computes in: float64, or float32 whatever it is asked)
CASES = {
    "detr": ({"normalize": True}, 0.0),
    "conditional_detr": ({"normalize": True}, 0.0),
    "maskformer": ({"normalize": True}, 0.0),
    "mask2former": ({"normalize": True}, 0.0),
    "oneformer": ({"normalize": True}, 0.0),
    "sam2": ({"normalize": True}, 0.0),
    "detr:not_normalized": ({}, 0.0),
    "deformable_detr": ({"normalize": True, "offset": -0.5}, 0.0),
    # float32 in transformers (its cumulative sums and steps): within its rounding of angles up to 2 pi.
    "table-transformer": ({"normalize": True}, 1e-6),
    "grounding-dino": ({"normalize": True, "temperature": 20}, 1e-6),
    "dab-detr": ({"normalize": True, "temperature": (30, 10)}, 1e-6),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_sine_embedding_is_each_models(case):
    arguments, tolerance = CASES[case]
    ours = tf_posenc.detr_sine_embedding(detr_mask(), FEATURES, dtype="float64", **arguments)
    theirs = printed(case).transpose(0, 2, 3, 1)
    ours = keras.ops.convert_to_numpy(ours)
    if tolerance:
        np.testing.assert_allclose(ours, theirs, atol=tolerance)
    else:
        # transformers' float64 operations, in their order: the same values to the last unit.
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=4e-16)
    expected = restated(detr_mask(), **{"temperature": (10000.0, 10000.0), **arguments_as_pair(arguments)})
    np.testing.assert_allclose(ours, expected, rtol=0, atol=4e-16)


def arguments_as_pair(arguments):
    given = {"normalize": False, **arguments}
    temperature = given.pop("temperature", 10000.0)
    pair = tuple(temperature) if isinstance(temperature, tuple) else (temperature, temperature)
    return {**given, "temperature": tuple(float(value) for value in pair)}


def test_no_mask_is_a_mask_of_ones_and_float32_is_rounded_once():
    ones = np.ones((2, 5, 7), dtype=bool)
    ours = keras.ops.convert_to_numpy(
        tf_posenc.detr_sine_embedding(ones, FEATURES, normalize=True, dtype="float64")
    )
    np.testing.assert_allclose(ours, printed("detr:no_mask").transpose(0, 2, 3, 1), rtol=0, atol=4e-16)
    single = keras.ops.convert_to_numpy(tf_posenc.detr_sine_embedding(ones, FEATURES, normalize=True))
    assert single.dtype == np.float32
    np.testing.assert_array_equal(single, ours.astype(np.float32))


@pytest.mark.slow
def test_a_keras_model_of_a_fixed_size_and_xla():
    pixels = keras.Input((5, 7), dtype="bool")
    model = keras.Model(pixels, tf_posenc.detr_sine_embedding(pixels, FEATURES, normalize=True))
    expected = restated(detr_mask()).astype(np.float32)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model(detr_mask())), expected)
    compiled = tf.function(
        lambda m: tf_posenc.detr_sine_embedding(m, FEATURES, normalize=True), jit_compile=True
    )
    np.testing.assert_array_equal(compiled(tf.constant(detr_mask())).numpy(), expected)


def rt_detr_table(height, width):
    """RT-DETR's `build_2d_sinusoidal_position_embedding`: [sin_h | cos_h | sin_w | cos_w] over
    row-major tokens, which is `sincos_2d` (MAE's: the column's half first) with its halves
    swapped."""
    table = tf_posenc.sincos_2d(16, (height, width))
    return np.concatenate([table[:, 8:], table[:, :8]], axis=-1)


def test_rt_detr_and_omdet_tables_are_sincos_2d_with_their_halves_ordered():
    np.testing.assert_allclose(rt_detr_table(5, 7), printed("rt_detr")[0], rtol=0, atol=4e-16)
    # OmDet-Turbo's: token `w * H + h` (column-major) with [sin_w | cos_w | sin_h | cos_h], RT-DETR's
    # table of the transposed grid: it lines up with row-major features on square maps only, as
    # transformers has it.
    np.testing.assert_allclose(rt_detr_table(7, 5), printed("omdet-turbo")[0], rtol=0, atol=4e-16)
    np.testing.assert_allclose(rt_detr_table(6, 6), printed("omdet-turbo:square")[0], rtol=0, atol=4e-16)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"num_position_features": 7}, "`num_position_features` must be even"),
        ({"temperature": (1, 2, 3)}, "`temperature` must be a positive number, or a pair"),
        ({"scale": 3.0}, "`scale` and `offset` apply to normalized counts"),
        ({"pixel_mask": np.ones((5, 7))}, r"`pixel_mask` must have shape \(batch, height, width\)"),
    ],
    ids=["odd-features", "three-temperatures", "scale-unnormalized", "mask-rank"],
)
def test_bad_arguments_are_named(arguments, message):
    given = {"pixel_mask": detr_mask(), **arguments}
    with pytest.raises(ValueError, match=message):
        tf_posenc.detr_sine_embedding(**given)


def test_a_mask_of_unknown_size_is_refused_when_traced():
    @tf.function(input_signature=[tf.TensorSpec((None, None, None), tf.bool)])
    def embed(mask):
        return tf_posenc.detr_sine_embedding(mask, FEATURES, normalize=True)

    with pytest.raises(ValueError, match="a height and width known when the call is traced"):
        embed.get_concrete_function()
