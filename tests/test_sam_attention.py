"""SAM's and ViTDet's vision attention with decomposed relative positions
(`DecomposedPositionBias` in `MultiHeadAttention`) against transformers 5.25's own modules,
whole: the output that `print_transformers.py sam_attention` recorded from each case's module
with `module_weights` under its own names, in float64, and a float64 NumPy restatement of
`get_rel_pos` / `get_decomposed_rel_pos`."""

import json
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf
from fingerprints import module_weights
from helpers import slow_unless

import tf_posenc
from tf_posenc import _hf_decomposed, _rows
from tf_posenc.layers.decomposed_position_bias import DecomposedPositionBias

PRINTED = json.loads((pathlib.Path(__file__).parent / "transformers_sam_attention_5_25.json").read_text())
PREFIX = "vision_encoder.layers.0.attn."


def case_inputs(case):
    grid = PRINTED["cases"][case]["grid"]
    return np.random.RandomState(17).standard_normal((*grid, 32))


def built(case, dtype="float64"):
    """The case's layer: `from_hf_config` on a config whose layer 0 is the case's window or whole
    grid, with the call's grid where it differs."""
    entry = PRINTED["cases"][case]
    model_type = case.split(":")[0]
    config = {"model_type": model_type, **entry["config"]}
    if model_type == "vitdet":
        config["window_block_indices"] = []
    else:  # layer 0 global, or windowed
        config["global_attn_indexes"] = [] if entry["size"] else [0]
    module = _hf_decomposed.read(config, 0)
    grid = tuple(entry["grid"][1:])
    bias = None
    if grid != module.input_size:
        bias = DecomposedPositionBias(
            module.heads, module.head_dim, module.input_size, grid_size=grid, dtype=dtype
        )
    layer = tf_posenc.MultiHeadAttention.from_hf_config(config, 0, position_bias=bias, dtype=dtype)
    weights = {f"{PREFIX}{k}": v for k, v in module_weights(entry["shapes"]).items()}
    tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
    return layer, weights


def restated(weights, hidden, heads=2):
    """SAM's attention in float64 NumPy: `get_rel_pos` (torch's linear resize, then the offsets'
    rows), the decomposed terms of the unscaled query, the softmax of scaled q . k plus them."""
    batch, height, width, dim = hidden.shape
    size = dim // heads
    qkv = hidden.reshape(batch, height * width, dim) @ weights[f"{PREFIX}qkv.weight"].T
    if f"{PREFIX}qkv.bias" in weights:
        qkv = qkv + weights[f"{PREFIX}qkv.bias"]
    q, k, v = (part.reshape(batch, height * width, heads, size) for part in np.split(qkv, 3, axis=-1))

    def rel_pos(side, table):
        rows = 2 * side - 1
        if table.shape[0] != rows:  # F.interpolate(mode="linear", align_corners=False)
            where = np.maximum((np.arange(rows) + 0.5) * table.shape[0] / rows - 0.5, 0)
            low = np.floor(where).astype(int)
            high = np.minimum(low + 1, table.shape[0] - 1)
            table = (1 - (where - low))[:, None] * table[low] + (where - low)[:, None] * table[high]
        offsets = np.arange(side)[:, None] - np.arange(side)[None, :] + side - 1
        return table[offsets]  # (q, k, size)

    rh = rel_pos(height, weights[f"{PREFIX}rel_pos_h"])
    rw = rel_pos(width, weights[f"{PREFIX}rel_pos_w"])
    grid_q = q.reshape(batch, height, width, heads, size)
    rel_h = np.einsum("byxhc,ykc->bhyxk", grid_q, rh)
    rel_w = np.einsum("byxhc,xkc->bhyxk", grid_q, rw)
    bias = (rel_h[..., :, None] + rel_w[..., None, :]).reshape(batch, heads, height * width, height * width)
    scores = np.einsum("bqhc,bkhc->bhqk", q, k) / np.sqrt(size) + bias
    probabilities = np.exp(scores - scores.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    context = np.einsum("bhqk,bkhc->bqhc", probabilities, v).reshape(batch, height * width, dim)
    return context @ weights[f"{PREFIX}proj.weight"].T + weights[f"{PREFIX}proj.bias"]


# Without `slow`: a resized grid and a window; the rest with it.
QUICK = {"sam_vision_model:resized", "sam_vision_model:window"}


@pytest.mark.parametrize("case", slow_unless(QUICK, sorted(PRINTED["cases"])))
def test_the_attention_is_transformers_module_whole(case):
    layer, weights = built(case)
    hidden = case_inputs(case)
    batch, height, width, dim = hidden.shape
    tokens = hidden.reshape(batch, height * width, dim)
    ours = keras.ops.convert_to_numpy(layer(tokens, tokens))
    printed = np.array(PRINTED["cases"][case]["output"]).reshape(ours.shape)
    np.testing.assert_allclose(ours, printed, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ours, restated(weights, hidden), rtol=1e-12, atol=1e-12)
    # The tables matter: zeroed, the output is another.
    bias = layer.position_bias
    saved = [variable.numpy() for variable in bias.weights]
    for variable in bias.weights:
        variable.assign(np.zeros(variable.shape))
    other = keras.ops.convert_to_numpy(layer(tokens, tokens))
    for variable, value in zip(bias.weights, saved, strict=True):
        variable.assign(value)
    assert np.abs(other - printed).max() > 1e-3


def test_defaults_and_layers_are_the_configs():
    sam = {"model_type": "sam", "vision_config": {"hidden_size": 64, "num_attention_heads": 4}}
    windowed = tf_posenc.MultiHeadAttention.from_hf_config(sam, 0)
    global_ = tf_posenc.MultiHeadAttention.from_hf_config(sam, 2)
    assert windowed.position_bias.input_size == (14, 14) and global_.position_bias.input_size == (64, 64)
    slanext = tf_posenc.MultiHeadAttention.from_hf_config({"model_type": "slanext_vision"}, 5)
    assert slanext.position_bias.input_size == (32, 32) and slanext.key_dim == 64
    vitdet = tf_posenc.MultiHeadAttention.from_hf_config({"model_type": "vitdet"}, 0)
    assert vitdet.position_bias is None  # `use_relative_position_embeddings=False` by default
    with pytest.raises(ValueError, match="`layer_index` must be an encoder layer of the config, 0 .. 11"):
        tf_posenc.MultiHeadAttention.from_hf_config(sam, 12)


def test_a_subset_of_cells_and_a_saved_model():
    layer, _ = built("sam_vision_model:global")
    hidden = case_inputs("sam_vision_model:global").reshape(1, 16, 32)
    whole = keras.ops.convert_to_numpy(layer(hidden, hidden))
    # The cells 5, 6, 9, 10 (the grid's centre) attending to themselves: their positions say where.
    centre = np.array([5, 6, 9, 10])
    part = layer(hidden[:, centre], hidden[:, centre], query_positions=centre, key_positions=centre)
    restricted = tf_posenc.MultiHeadAttention.from_hf_config(
        {"model_type": "sam_vision_model", **PRINTED["cases"]["sam_vision_model:global"]["config"],
         "global_attn_indexes": [0]}, 0, dtype="float64",
    )  # fmt: skip
    assert part.shape == (1, 4, 32) and restricted.position_bias.input_size == (4, 4)
    mask = np.zeros((1, 16, 16), bool)
    mask[:, centre[:, None], centre[None, :]] = True
    masked = keras.ops.convert_to_numpy(layer(hidden, hidden, attention_mask=mask))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(part)[0], masked[0, centre], rtol=1e-12, atol=1e-12)
    assert np.abs(whole[0, centre] - masked[0, centre]).max() > 1e-3


def test_loading_names_every_weight_it_misses_or_leaves():
    layer, weights = built("sam_vision_model:global")
    missing = {k: v for k, v in weights.items() if not k.endswith("rel_pos_w")}
    with pytest.raises(ValueError, match=r"has no `vision_encoder\.layers\.0\.attn\.rel_pos_w`"):
        tf_posenc.load_hf_attention_weights(layer, missing, PREFIX)
    no_bias, _ = built("sam_vision_model:no_qkv_bias")
    with pytest.raises(ValueError, match=r"qkv\.bias`.*`qkv_bias` whether"):
        tf_posenc.load_hf_attention_weights(no_bias, weights, PREFIX)
    wrong = {**weights, f"{PREFIX}rel_pos_h": np.zeros((9, 16))}
    with pytest.raises(ValueError, match=r"rel_pos_h` must have shape \(7, 16\)"):
        tf_posenc.load_hf_attention_weights(layer, wrong, PREFIX)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"input_size": (4, 4, 4)}, "`input_size` must be an integer or a pair"),
        ({"grid_size": 0}, "`grid_size` must be a positive integer"),
        ({"head_dim": 0}, "`head_dim` must be a positive integer"),
    ],
    ids=["three-sides", "empty-grid", "no-head"],
)
def test_bad_arguments_are_named(arguments, message):
    with pytest.raises(ValueError, match=message):
        DecomposedPositionBias(**{"num_heads": 2, "head_dim": 8, "input_size": 4, **arguments})


def test_a_call_of_another_grid_is_refused_without_positions():
    bias = DecomposedPositionBias(2, 8, 4)
    with pytest.raises(ValueError, match=r"the 4 x 4 grid's 16 cells \(`grid_size`\)"):
        bias(np.zeros((1, 15, 2, 8)))


def exact_features(coordinates, matrix):
    """`[sin | cos](2 pi c G)` of float64 `c` `(..., 2)`, each turn `c G` reduced exactly (as
    fractions) before its sine: the values to round once."""
    from fractions import Fraction

    flat = coordinates.reshape(-1, 2)
    out = np.zeros((len(flat), 2 * matrix.shape[1]))
    for row, (x, y) in enumerate(flat):
        for feature in range(matrix.shape[1]):
            turns = Fraction(float(x)) * Fraction(float(matrix[0, feature])) + Fraction(float(y)) * Fraction(
                float(matrix[1, feature])
            )
            angle = 2 * np.pi * float(turns - (turns.numerator // turns.denominator))
            out[row, feature], out[row, matrix.shape[1] + feature] = np.sin(angle), np.cos(angle)
    return out.reshape(*coordinates.shape[:-1], -1)


@pytest.mark.parametrize("model", ["sam", "sam2"])
def test_fourier_features_are_sams(model):
    matrix = np.array(PRINTED["matrix"])
    printed = PRINTED["fourier"][model]
    layer = tf_posenc.FourierPositionEmbedding(num_pos_feats=8, dtype="float64")
    layer.build()
    layer.set_weights([matrix])
    points = np.array([[[[10.0, 20.0], [1023.5, 0.0], [511.0, 700.25]]]]) + 0.5  # the prompt encoder's
    ours = keras.ops.convert_to_numpy(layer(points, input_shape=(1024, 1024)))
    # float64 rows carry the route's error (`row_error_bound`, 2**-36 with the rounding's), and
    # transformers' its float64 angle's.
    bound = _rows.row_error_bound("float64")
    np.testing.assert_allclose(ours.ravel(), printed["points"], rtol=0, atol=bound)
    image_wide = keras.ops.convert_to_numpy(layer.image_wide(3, 5))
    theirs = np.array(printed["image_wide"]).reshape(3, 5, 16)
    np.testing.assert_allclose(image_wide, theirs, rtol=0, atol=bound)
    # Each float32 value is the exact one rounded once: the turns are never a float32 product.
    single = tf_posenc.FourierPositionEmbedding(num_pos_feats=8)
    single.build()
    single.set_weights([matrix.astype(np.float32)])
    grid = (np.stack(np.meshgrid(np.arange(5) + 0.5, np.arange(3) + 0.5), -1) / [5, 3]) * 2 - 1
    expected = exact_features(grid, matrix.astype(np.float32).astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(single.image_wide(3, 5)), expected)
    normalized = (points.astype(np.float32) / np.float32(1024)) * 2 - 1  # in float32, as transformers
    expected = exact_features(normalized.astype(np.float64), matrix.astype(np.float32)).astype(np.float32)
    got = keras.ops.convert_to_numpy(single(points.astype(np.float32), input_shape=(1024, 1024)))
    np.testing.assert_array_equal(got, expected)


def test_fourier_features_refuse_half_precision_coordinates_and_save(tmp_path):
    layer = tf_posenc.FourierPositionEmbedding(num_pos_feats=4)
    with pytest.raises(ValueError, match="`coordinates` must be float32 or float64"):
        layer(np.zeros((1, 2), "float16"))
    with pytest.raises(ValueError, match=r"must be floats of shape \(\.\.\., 2\)"):
        layer(np.zeros((1, 3), "float32"))
    # Coordinates beyond the exact products' range: an error, eager or in a graph.
    far = np.array([[3000.0, 0.5]], "float32")  # 2 * 3000 - 1 >= 4096
    with pytest.raises(tf.errors.InvalidArgumentError, match="takes coordinates below 4096"):
        layer(far)
    with pytest.raises(tf.errors.InvalidArgumentError, match="takes coordinates below 4096"):
        tf.function(lambda c: layer(c))(tf.constant(far))
    points = keras.Input((5, 2))
    model = keras.Model(points, layer(points))
    values = np.random.RandomState(0).uniform(size=(2, 5, 2)).astype("float32")
    expected = keras.ops.convert_to_numpy(model(values))
    model.save(tmp_path / "fourier.keras")
    reloaded = keras.saving.load_model(tmp_path / "fourier.keras")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(reloaded(values)), expected)
