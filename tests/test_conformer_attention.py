"""Conformer speech encoders' self-attention with Transformer-XL's relative positions
(`TransformerXLPositionBias` in `MultiHeadAttention`) against transformers 5.25's own modules,
whole: the output that `print_transformers.py conformer_attention` recorded from each case's
attention module with `module_weights` under its own names, in float64, and a float64 NumPy
restatement of `_apply_relative_position_encoding` (its table of offsets `T - 1 .. -(T - 1)` and
its relative shift)."""

import json
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf
from fingerprints import module_weights
from helpers import slow_unless
from reference import exact_reference_table

import tf_posenc
from tf_posenc import _hf_conformer
from tf_posenc.layers.transformer_xl_position_bias import TransformerXLPositionBias

PRINTED = json.loads(
    (pathlib.Path(__file__).parent / "transformers_conformer_attention_5_25.json").read_text()
)
LENGTH, PADDED = 9, 3  # `print_transformers.py`'s CONFORMER_LENGTH and CONFORMER_PADDED
PREFIX = "encoder.layers.0.self_attn."


def inputs():
    """`print_transformers.conformer_input`: the hidden states and the padding mask."""
    hidden = np.random.RandomState(13).standard_normal((2, LENGTH, 32))
    mask = np.ones((2, LENGTH), dtype=bool)
    mask[1, -PADDED:] = False
    return hidden, mask


def config_of(case):
    return {"model_type": case.split(":")[0], **PRINTED["cases"][case]["config"]}


def built(case, dtype="float64"):
    weights = {f"{PREFIX}{k}": v for k, v in module_weights(PRINTED["cases"][case]["shapes"]).items()}
    layer = tf_posenc.MultiHeadAttention.from_hf_config(config_of(case), 0, dtype=dtype)
    tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
    return layer, weights


def restated(case, weights, hidden, mask):
    """transformers' module in float64 NumPy: its table of offsets T-1 .. -(T-1) (interleaved sin
    and cos, base 10000), projected, scored against q + v, relatively shifted; then
    `((q + u) . k + shifted) / sqrt(d)`, the padded keys masked."""
    module = _hf_conformer.read(config_of(case))
    heads, size, names = module.heads, module.head_dim, module.names

    def linear(role, x):
        out = x @ weights[f"{PREFIX}{names[role]}.weight"].T
        if f"{PREFIX}{names[role]}.bias" in weights:
            out = out + weights[f"{PREFIX}{names[role]}.bias"]
        return out

    q, k, v = (linear(role, hidden).reshape(2, LENGTH, heads, size) for role in ("q", "k", "v"))
    offsets = np.arange(LENGTH - 1, -LENGTH, -1)
    frequencies = np.exp(np.arange(0, 32, 2) * -(np.log(10000.0) / 32))
    table = np.zeros((len(offsets), 32))
    table[:, 0::2] = np.sin(offsets[:, None] * frequencies)
    table[:, 1::2] = np.cos(offsets[:, None] * frequencies)
    projected = linear("pos", table).reshape(-1, heads, size)
    u, v_bias = weights[f"{PREFIX}{names['u']}"], weights[f"{PREFIX}{names['v_bias']}"]
    bd = np.einsum("bqhd,nhd->bhqn", q + v_bias, projected)  # (b, h, T, 2T - 1)
    padded = np.pad(bd, ((0, 0), (0, 0), (0, 0), (1, 0))).reshape(2, heads, 2 * LENGTH, LENGTH)
    shifted = padded[:, :, 1:].reshape(bd.shape)[..., :LENGTH]  # transformers' relative shift
    scores = (np.einsum("bqhd,bkhd->bhqk", q + u, k) + shifted) / np.sqrt(size)
    scores = np.where(mask[:, None, None, :], scores, -np.inf)
    weights_ = np.exp(scores - scores.max(-1, keepdims=True))
    weights_ /= weights_.sum(-1, keepdims=True)
    context = np.einsum("bhqk,bkhd->bqhd", weights_, v).reshape(2, LENGTH, heads * size)
    return linear("o", context)


# Without `slow`: one of each family's names; the rest with it.
QUICK = {"wav2vec2-conformer", "parakeet_encoder"}


RELATIVE = sorted(case for case in PRINTED["cases"] if not case.endswith(":rotary"))
ROTARY = sorted(case for case in PRINTED["cases"] if case.endswith(":rotary"))


@pytest.mark.parametrize("case", slow_unless(QUICK, RELATIVE))
def test_the_attention_is_transformers_module_whole(case):
    layer, weights = built(case)
    hidden, mask = inputs()
    pairs = mask[:, :, None] & mask[:, None, :]
    ours = keras.ops.convert_to_numpy(layer(hidden, hidden, attention_mask=pairs))
    printed = np.array(PRINTED["cases"][case]["output"]).reshape(ours.shape)
    valid = mask  # a padded frame's row is no frame's (wav2vec2's masks keys only, Parakeet's both)
    np.testing.assert_allclose(ours[valid], printed[valid], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        ours[valid], restated(case, weights, hidden, mask)[valid], rtol=1e-12, atol=1e-12
    )
    # The position terms matter: without them the output is another.
    bias = layer.position_bias
    saved = [variable.numpy() for variable in bias.weights]
    for variable in bias.weights:
        variable.assign(np.zeros(variable.shape))
    other = keras.ops.convert_to_numpy(layer(hidden, hidden, attention_mask=pairs))
    for variable, value in zip(bias.weights, saved, strict=True):
        variable.assign(value)
    assert np.abs(other[valid] - printed[valid]).max() > 1e-3


def test_defaults_are_the_config_classes():
    assert PRINTED["defaults"] == _hf_conformer.DEFAULTS
    # The parents read their `encoder_config`.
    encoder = {"model_type": "parakeet_encoder", "hidden_size": 64, "num_attention_heads": 2,
               "num_key_value_heads": 2, "attention_bias": False}  # fmt: skip
    layer = tf_posenc.MultiHeadAttention.from_hf_config(
        {"model_type": "parakeet_ctc", "encoder_config": encoder}, 0
    )
    assert (layer.num_heads, layer.key_dim, layer.use_bias, layer.position_bias.hidden_size) == (
        2,
        32,
        False,
        64,
    )
    # No positions at all with `position_embeddings_type=None`: plain attention.
    plain = tf_posenc.MultiHeadAttention.from_hf_config(
        {"model_type": "wav2vec2-conformer", "position_embeddings_type": None}, 0
    )
    assert plain.position_bias is None and plain.key_dim == 64


@pytest.mark.slow
def test_positions_offsets_caches_and_xla_follow_one_rule():
    layer, _ = built("wav2vec2-conformer")
    hidden, _ = inputs()
    base = keras.ops.convert_to_numpy(layer(hidden, hidden))
    positions = np.arange(LENGTH) + 5000
    moved = keras.ops.convert_to_numpy(
        layer(hidden, hidden, query_positions=positions, key_positions=positions)
    )
    np.testing.assert_allclose(moved, base, rtol=1e-9, atol=1e-9)
    # A cache: the last 3 frames as a step over 6 cached ones are the full pass's last 3 rows.
    cache = np.zeros((2, 2, LENGTH, 4, 8))
    _, cache = layer(hidden[:, :6], hidden[:, :6], cache=cache, cache_update_index=0)
    step, _ = layer(hidden[:, 6:], hidden[:, 6:], cache=cache, cache_update_index=6)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(step), base[:, 6:], rtol=1e-10, atol=1e-10)
    # Compiled by XLA (a table of q_len + k_len - 1 offsets, a size known when compiling).
    compiled = tf.function(lambda x: layer(x, x), jit_compile=True)
    np.testing.assert_allclose(compiled(tf.constant(hidden)).numpy(), base, rtol=1e-12, atol=1e-12)
    # Positions with gaps have more offsets than the table's rows: an error, not a wrong score.
    gaps = np.array([0, 1, 2, 3, 4, 5, 6, 7, 100])
    with pytest.raises(tf.errors.InvalidArgumentError, match="must span at most q_len \\+ k_len - 1"):
        layer(hidden, hidden, query_positions=gaps, key_positions=gaps)
    graph = tf.function(lambda x, p: layer(x, x, query_positions=p, key_positions=p))  # the graph's check
    with pytest.raises(tf.errors.InvalidArgumentError, match="must span at most q_len \\+ k_len - 1"):
        graph(tf.constant(hidden), tf.constant(gaps))


def test_rows_of_negative_offsets_are_the_sinusoid():
    bias = TransformerXLPositionBias(num_heads=2, head_dim=8, hidden_size=16, dtype="float64")
    offsets = np.array([-(2**31 - 1), -70000, -1, 0, 1, 12345, 2**31 - 1])
    ours = keras.ops.convert_to_numpy(bias.relative_rows(offsets))
    # The formula's value: each angle reduced in 60-digit decimals (a float64 product is off by
    # 2e-8 at 2**31), a negative offset's row mirrored from its distance's.
    table = exact_reference_table(np.abs(offsets), 16)
    expected = np.where((offsets < 0)[:, None] & (np.arange(16) % 2 == 0), -table, table)
    np.testing.assert_allclose(ours, expected, atol=1e-11)


@pytest.mark.slow
def test_a_model_saves_and_reloads(tmp_path):
    config = {**config_of("parakeet_encoder"), "num_hidden_layers": 2}
    frames = keras.Input((LENGTH, 32))
    x = frames
    for index in range(2):
        x = tf_posenc.MultiHeadAttention.from_hf_config(config, index)(x, x)
    model = keras.Model(frames, x)
    hidden = inputs()[0].astype("float32")
    expected = keras.ops.convert_to_numpy(model(hidden))
    model.save(tmp_path / "parakeet.keras")
    reloaded = keras.saving.load_model(tmp_path / "parakeet.keras")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(reloaded(hidden)), expected)
    assert len(reloaded.weights) == len(model.weights) == 2 * (8 + 3)


def test_mixed_precision_stays_near_float64():
    exact = keras.ops.convert_to_numpy(built("seamless_m4t")[0](*[inputs()[0]] * 2))
    half_layer = built("seamless_m4t", dtype="mixed_float16")[0]
    half = keras.ops.convert_to_numpy(half_layer(*[inputs()[0].astype("float32")] * 2))
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, exact, atol=2e-2)


def test_loading_names_every_weight_it_misses_or_leaves():
    layer, weights = built("parakeet_encoder")
    missing = {k: v for k, v in weights.items() if not k.endswith("bias_v")}
    with pytest.raises(ValueError, match=r"has no `encoder\.layers\.0\.self_attn\.bias_v`"):
        tf_posenc.load_hf_attention_weights(layer, missing, PREFIX)
    extra = {**weights, f"{PREFIX}relative_k_proj.bias": np.zeros(32)}
    with pytest.raises(ValueError, match=r"relative_k_proj\.bias` under .*\(a `linear_pos` bias"):
        tf_posenc.load_hf_attention_weights(layer, extra, PREFIX)
    no_bias, _ = built("parakeet_encoder:no_bias")
    with pytest.raises(ValueError, match=r"q_proj\.bias`.*does not use"):
        tf_posenc.load_hf_attention_weights(no_bias, weights, PREFIX)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"model_type": "wav2vec2-bert"}, "Shaw's `relative_key`"),
        (
            {"model_type": "parakeet_encoder", "position_embeddings_type": "rotary"},
            "has no rotary path",
        ),
        ({"model_type": "seamless_m4t_v2"}, "Shaw's `relative_key`"),
        ({"model_type": "gemma4_audio"}, "attends within chunks"),
        ({"model_type": "xlnet"}, "segment term"),
        ({"model_type": "parakeet_encoder", "num_key_value_heads": 2}, "is grouped-query attention"),
        ({"model_type": "t5"}, "must be an encoder whose attention is plain.*or one whose positions act"),
        ({"model_type": "mpnet"}, "needs a mechanism.*`MPNetAttention` holds"),
    ],
    ids=[
        "shaw-default",
        "rotary-without-a-path",
        "seamless-v2",
        "gemma-audio",
        "xlnet",
        "grouped",
        "t5",
        "mpnet",
    ],
)
def test_other_mechanisms_are_refused_by_name(config, message):
    with pytest.raises(ValueError, match=message):
        tf_posenc.MultiHeadAttention.from_hf_config(config, 0)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="`hidden_size` must be even"):
        TransformerXLPositionBias(num_heads=2, head_dim=8, hidden_size=15)
    with pytest.raises(ValueError, match="`position_bias` must score the layer's heads of size 8"):
        layer = tf_posenc.MultiHeadAttention(
            num_heads=2, key_dim=8, position_bias=TransformerXLPositionBias(2, 4, 16)
        )
        layer(np.ones((1, 3, 16)), np.ones((1, 3, 16)))


def turned(hidden, heads, base):
    """transformers' `_apply_rotary_embedding` in float64: each head's features turned by halves
    at positions 0 .. T - 1."""
    batch, length, width = hidden.shape
    size = width // heads
    angles = np.arange(length)[:, None] / base ** (np.arange(0, size, 2) / size)
    cos, sin = (np.concatenate([f(angles)] * 2, -1)[None, :, None] for f in (np.cos, np.sin))
    x = hidden.reshape(batch, length, heads, size)
    halves = np.concatenate([-x[..., size // 2 :], x[..., : size // 2]], -1)
    return (x * cos + halves * sin).reshape(hidden.shape)


@pytest.mark.parametrize("case", slow_unless({"wav2vec2-conformer:rotary"}, ROTARY))
def test_the_rotary_attention_turns_the_hidden_states_as_transformers(case):
    # Wav2Vec2-Conformer's, Wav2Vec2-BERT's and SeamlessM4T's `position_embeddings_type="rotary"`:
    # the queries and keys are projections of the turned hidden states, the values of the plain.
    layer, weights = built(case)
    assert layer.rotate_inputs and layer.position_bias is None
    module = _hf_conformer.read(config_of(case))
    hidden, mask = inputs()
    pairs = mask[:, :, None] & mask[:, None, :]
    ours = keras.ops.convert_to_numpy(layer(hidden, hidden, attention_mask=pairs))
    printed = np.array(PRINTED["cases"][case]["output"]).reshape(ours.shape)
    np.testing.assert_allclose(ours[mask], printed[mask], rtol=1e-10, atol=1e-10)

    def linear(role, x):
        name = f"{PREFIX}{module.names[role]}"
        return x @ weights[f"{name}.weight"].T + weights[f"{name}.bias"]

    shaped = (2, LENGTH, module.heads, module.head_dim)
    rotated = turned(hidden, module.heads, module.rotary_base)
    q, k = (linear(role, rotated).reshape(shaped) for role in ("q", "k"))
    v = linear("v", hidden).reshape(shaped)
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(module.head_dim)
    scores = np.where(mask[:, None, None, :], scores, -np.inf)
    attention = np.exp(scores - scores.max(-1, keepdims=True))
    attention /= attention.sum(-1, keepdims=True)
    restated = linear("o", np.einsum("bhqk,bkhd->bqhd", attention, v).reshape(2, LENGTH, -1))
    np.testing.assert_allclose(ours[mask], restated[mask], rtol=1e-11, atol=1e-11)
    # Turning the projected queries and keys instead gives another output.
    other = tf_posenc.MultiHeadAttention.from_hf_config(
        config_of(case), 0, dtype="float64", rotate_inputs=False
    )
    tf_posenc.load_hf_attention_weights(other, weights, PREFIX)
    moved = keras.ops.convert_to_numpy(other(hidden, hidden, attention_mask=pairs))
    assert np.abs(moved[mask] - printed[mask]).max() > 1e-3
    # It saves and reloads as itself; it takes no cache.
    copy = tf_posenc.MultiHeadAttention.from_config(json.loads(json.dumps(layer.get_config())))
    assert copy.rotate_inputs and copy.rope.max_wavelength == module.rotary_base
    with pytest.raises(ValueError, match="takes no `cache`"):
        layer(
            hidden,
            hidden,
            cache=np.zeros((2, 2, LENGTH, module.heads, module.head_dim)),
            cache_update_index=0,
        )


def test_turning_the_inputs_is_checked_where_it_is_given():
    with pytest.raises(ValueError, match="`rotate_inputs` says where the `rope` turns"):
        tf_posenc.MultiHeadAttention(2, 4, rotate_inputs=True)
    layer = tf_posenc.MultiHeadAttention(2, 4, rope=tf_posenc.RotaryEmbedding(), rotate_inputs=True)
    with pytest.raises(ValueError, match="width must be a multiple of 4. Received: query inputs of width 6"):
        layer(np.ones((1, 3, 6)), np.ones((1, 3, 6)))
