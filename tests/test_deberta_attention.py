"""DeBERTa-v2/v3's and SEW-D's disentangled attention (`DisentangledPositionBias` in
`MultiHeadAttention`) against transformers 5.25's own modules, whole: the output that
`print_transformers.py deberta_attention` recorded from each config variant's encoder with
`module_weights` under its own names, in float64, and a float64 NumPy restatement of
`DisentangledSelfAttention.forward` / `disentangled_attention_bias`."""

import json
import pathlib

import keras
import numpy as np
import pytest
from fingerprints import module_weights
from helpers import slow_unless

import tf_posenc
from tf_posenc import _hf_deberta
from tf_posenc.layers.disentangled_position_bias import DisentangledPositionBias

PRINTED = json.loads((pathlib.Path(__file__).parent / "transformers_deberta_attention_5_25.json").read_text())
LENGTH, PADDED = 12, 3  # `print_transformers.py`'s DEBERTA_LENGTH and DEBERTA_PADDED
PREFIX = "deberta.encoder."


def inputs():
    """`print_transformers.deberta_input`: the hidden states and the padding mask."""
    hidden = np.random.RandomState(11).standard_normal((2, LENGTH, 32))
    mask = np.ones((2, LENGTH), dtype=bool)
    mask[1, -PADDED:] = False
    return hidden, mask


def weights_of(case):
    shapes = PRINTED["cases"][case]["shapes"]
    return {f"{PREFIX}{name}": value for name, value in module_weights(shapes).items()}


def built(case, dtype="float64"):
    """The layer (and its bias) from the case's config, with the case's weights loaded."""
    config = {"model_type": case.split(":")[0], **PRINTED["cases"][case]["config"]}
    weights = weights_of(case)
    module = _hf_deberta.read(config)
    bias = None
    if module.bias_arguments:
        bias = DisentangledPositionBias.from_hf_config(config, dtype=dtype)
        tf_posenc.load_hf_attention_weights(bias, weights, PREFIX)
    layer = tf_posenc.MultiHeadAttention.from_hf_config(config, 0, position_bias=bias, dtype=dtype)
    tf_posenc.load_hf_attention_weights(layer, weights, f"{PREFIX}layer.0.attention.self.")
    return layer, config, weights


def restated(config, weights, hidden, mask):
    """transformers' `DisentangledSelfAttention` and `attention.output.dense`, in float64 NumPy."""
    module = _hf_deberta.read(config)
    heads, size = module.heads, module.head_dim
    self_ = f"{PREFIX}layer.0.attention.self."

    def project(name, x):
        out = x @ weights[f"{self_}{name}.weight"].T + weights[f"{self_}{name}.bias"]
        return out.reshape(*x.shape[:-1], heads, size)

    q, k, v = (project(name, hidden) for name in ("query_proj", "key_proj", "value_proj"))
    factor = 1 + len(module.pos_att_type)
    scale = np.sqrt(size * factor)
    scores = np.einsum("bqhd,bkhd->bhqk", q, k / scale)
    arguments = module.bias_arguments
    if arguments:
        buckets, maximum = arguments["position_buckets"], arguments["max_relative_positions"]
        maximum = maximum if maximum >= 1 else arguments["max_position_embeddings"]
        span = buckets if buckets > 0 else maximum
        relative = tf_posenc.deberta_relative_positions(LENGTH, LENGTH, buckets, maximum)[0]
        table = weights[f"{PREFIX}rel_embeddings.weight"][: 2 * span]
        if arguments["norm_rel_ebd"] == "layer_norm":
            centered = table - table.mean(-1, keepdims=True)
            table = centered / np.sqrt((centered**2).mean(-1, keepdims=True) + arguments["layer_norm_eps"])
            table = table * weights[f"{PREFIX}LayerNorm.weight"] + weights[f"{PREFIX}LayerNorm.bias"]
        table = table[None]
        shared = arguments["share_att_key"]
        if "c2p" in module.pos_att_type:
            pos_key = project("key_proj" if shared else "pos_key_proj", table)[0]
            c2p = np.einsum("bqhd,rhd->bhqr", q, pos_key)
            index = np.clip(relative + span, 0, 2 * span - 1)
            gathered = np.take_along_axis(c2p, np.broadcast_to(index, c2p.shape[:3] + (LENGTH,)), axis=-1)
            scores = scores + gathered / scale
        if "p2c" in module.pos_att_type:
            pos_query = project("query_proj" if shared else "pos_query_proj", table)[0]
            p2c = np.einsum("bkhd,rhd->bhkr", k, pos_query)
            index = np.clip(-relative + span, 0, 2 * span - 1)  # (key, query): transformers' r_pos
            gathered = np.take_along_axis(p2c, np.broadcast_to(index, p2c.shape[:3] + (LENGTH,)), axis=-1)
            scores = scores + np.swapaxes(gathered, -1, -2) / scale
    keep = mask[:, None, :, None] & mask[:, None, None, :]
    scores = np.where(keep, scores, np.finfo(np.float64).min)
    weights_ = np.exp(scores - scores.max(-1, keepdims=True))
    weights_ /= weights_.sum(-1, keepdims=True)
    context = np.einsum("bhqk,bkhd->bqhd", weights_, v).reshape(*hidden.shape[:2], heads * size)
    out = f"{PREFIX}layer.0.attention.output.dense."
    return context @ weights[f"{out}weight"].T + weights[f"{out}bias"]


# Without `slow`: DeBERTa-v3's settings, and separate projections of both terms; the rest with it.
QUICK = {"deberta-v2:v3", "deberta-v2:both_separate"}


@pytest.mark.parametrize("case", slow_unless(QUICK, sorted(PRINTED["cases"])))
def test_the_attention_is_transformers_module_whole(case):
    layer, config, weights = built(case)
    hidden, mask = inputs()
    pairs = mask[:, :, None] & mask[:, None, :]
    ours = keras.ops.convert_to_numpy(layer(hidden, hidden, attention_mask=pairs))
    printed = np.array(PRINTED["cases"][case]["output"]).reshape(ours.shape)
    # A padded query sees no key: DeBERTa-v2's softmax weights every key alike there, as the
    # layer does; SEW-D's `XSoftmax` weights none (its rows are compared where tokens are).
    valid = mask if case.startswith("sew-d") else np.ones_like(mask)
    np.testing.assert_allclose(ours[valid], printed[valid], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        ours[valid], restated(config, weights, hidden, mask)[valid], rtol=1e-12, atol=1e-12
    )
    # The position terms matter: the same layer without them is another output.
    if layer.position_bias is not None:
        plain = tf_posenc.MultiHeadAttention(4, 8, scaling=layer._score_scale(), dtype="float64")
        plain.build(hidden.shape, hidden.shape)
        below = {variable.path.split("/", 1)[1]: variable for variable in layer.weights}
        for variable in plain.weights:  # query/kernel, ..., attention_output/bias
            variable.assign(below[variable.path.split("/", 1)[1]])
        other = keras.ops.convert_to_numpy(plain(hidden, hidden, attention_mask=pairs))
        assert np.abs(other[valid] - printed[valid]).max() > 1e-3


def test_defaults_are_the_config_classes():
    for model_type, printed in PRINTED["defaults"].items():
        ours = _hf_deberta.DEFAULTS[model_type]
        effective = printed.pop("effective_max_relative_positions")
        assert ours == printed, model_type
        if ours["relative_attention"]:
            bias = DisentangledPositionBias.from_hf_config({"model_type": model_type})
            assert bias._max_position == effective and bias.span == ours["position_buckets"]
        else:  # DeBERTa-v2's class default has no relative attention: no bias, the scale of d
            layer = tf_posenc.MultiHeadAttention.from_hf_config({"model_type": model_type}, 0)
            assert layer.position_bias is None and layer.scaling == pytest.approx(64**-0.5, rel=1e-15)
            relative = {"model_type": model_type, "relative_attention": True, "pos_att_type": ["c2p"]}
            bias = DisentangledPositionBias.from_hf_config(relative)
            assert bias._max_position == effective


@pytest.mark.slow
def test_positions_move_the_scores_only_by_their_offsets():
    layer, _, _ = built("deberta-v2:v3")
    hidden, _ = inputs()
    base = keras.ops.convert_to_numpy(layer(hidden, hidden))
    positions = np.arange(LENGTH) + 1000
    moved = layer(hidden, hidden, query_positions=positions, key_positions=positions)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(moved), base, rtol=1e-12, atol=1e-12)
    # Keys 3 further away are other buckets: another output.
    apart = layer(hidden, hidden, query_positions=positions, key_positions=positions + 3)
    assert np.abs(keras.ops.convert_to_numpy(apart) - base).max() > 1e-3
    # The buckets at any positions are `deberta_relative_positions`, clipped where the table ends.
    bias = layer.position_bias
    far = np.arange(0, 3000, 7)
    ours = keras.ops.convert_to_numpy(bias.relative_positions(far, far))[0]
    expected = tf_posenc.deberta_relative_positions(3000, 3000, 4, 16)[0][np.ix_(far, far)]
    np.testing.assert_array_equal(np.clip(ours, -4, 3), np.clip(expected, -4, 3))


@pytest.mark.slow
def test_a_shared_bias_reloads_as_one_table(tmp_path):
    config = {
        "model_type": "deberta-v2",
        **PRINTED["cases"]["deberta-v2:v3"]["config"],
        "num_hidden_layers": 2,
    }
    bias = DisentangledPositionBias.from_hf_config(config)
    inputs_ = keras.Input((LENGTH, 32))
    x = inputs_
    for index in range(2):
        x = tf_posenc.MultiHeadAttention.from_hf_config(config, index, position_bias=bias)(x, x)
    model = keras.Model(inputs_, x)
    hidden = inputs()[0].astype("float32")
    expected = keras.ops.convert_to_numpy(model(hidden))
    model.save(tmp_path / "deberta.keras")
    reloaded = keras.saving.load_model(tmp_path / "deberta.keras")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(reloaded(hidden)), expected)
    one, two = reloaded.layers[1], reloaded.layers[2]
    assert one.position_bias is two.position_bias
    assert len(reloaded.weights) == len(model.weights) == 2 * 8 + 3  # the table and its norm once


def test_a_layer_without_the_encoders_table_is_refused():
    config = {"model_type": "deberta-v2", **PRINTED["cases"]["deberta-v2:v3"]["config"]}
    with pytest.raises(ValueError, match=r"share one relative position table.*position_bias=bias"):
        tf_posenc.MultiHeadAttention.from_hf_config(config, 0)
    weights, prefix = weights_of("deberta-v2:v3"), f"{PREFIX}layer.0.attention.self."
    # A bias never loaded, and one loaded from another table: the layer's own weights would
    # load beside either without a word, and score positions with a table the checkpoint lacks.
    other = {**weights, f"{PREFIX}rel_embeddings.weight": weights[f"{PREFIX}rel_embeddings.weight"] + 1.0}
    for source in (None, other):
        bias = DisentangledPositionBias.from_hf_config(config, dtype="float64")
        if source is not None:
            tf_posenc.load_hf_attention_weights(bias, source, PREFIX)
        layer = tf_posenc.MultiHeadAttention.from_hf_config(config, 0, position_bias=bias, dtype="float64")
        with pytest.raises(ValueError, match=r"relative table `deberta\.encoder\.rel_embeddings\.weight`"):
            tf_posenc.load_hf_attention_weights(layer, weights, prefix)


def test_a_reloaded_layer_takes_the_weights(tmp_path):
    layer, config, weights = built("deberta-v2:v3")
    hidden, mask = inputs()
    pairs = mask[:, :, None] & mask[:, None, :]
    expected = keras.ops.convert_to_numpy(layer(hidden, hidden, attention_mask=pairs))
    tokens = keras.Input((LENGTH, 32), dtype="float64")
    keras.Model(tokens, layer(tokens, tokens)).save(tmp_path / "layer.keras")
    reloaded = keras.saving.load_model(tmp_path / "layer.keras").layers[1]
    for variable in reloaded.weights:  # nothing carried over: the weights come from the state dict
        variable.assign(np.zeros(variable.shape))
    tf_posenc.load_hf_attention_weights(reloaded.position_bias, weights, PREFIX)
    tf_posenc.load_hf_attention_weights(reloaded, weights, f"{PREFIX}layer.0.attention.self.")
    ours = keras.ops.convert_to_numpy(reloaded(hidden, hidden, attention_mask=pairs))
    np.testing.assert_array_equal(ours, expected)


def test_mixed_precision_stays_near_float64():
    layer64, config, weights = built("deberta-v2:both_separate")
    layer16, _, _ = built("deberta-v2:both_separate", dtype="mixed_float16")
    hidden, _ = inputs()
    exact = keras.ops.convert_to_numpy(layer64(hidden, hidden))
    half = keras.ops.convert_to_numpy(layer16(hidden.astype("float32"), hidden.astype("float32")))
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, exact, atol=2e-2)


def test_loading_names_every_weight_it_misses_or_leaves():
    layer, config, weights = built("deberta-v2:v3")
    prefix = f"{PREFIX}layer.0.attention.self."
    missing = {k: v for k, v in weights.items() if not k.endswith("key_proj.bias")}
    with pytest.raises(
        ValueError, match=r"has no `deberta\.encoder\.layer\.0\.attention\.self\.key_proj\.bias`"
    ):
        tf_posenc.load_hf_attention_weights(layer, missing, prefix)
    # A position projection the config does not have (`share_att_key=True` projects with the
    # layer's own): an error, not a silently unused weight.
    extra = {**weights, f"{prefix}pos_key_proj.weight": np.zeros((32, 32))}
    with pytest.raises(ValueError, match="pos_key_proj.weight` under"):
        tf_posenc.load_hf_attention_weights(layer, extra, prefix)
    with pytest.raises(ValueError, match="must name DeBERTa's `DisentangledSelfAttention`"):
        tf_posenc.load_hf_attention_weights(layer, weights, f"{PREFIX}layer.0.attention.")
    plain = DisentangledPositionBias.from_hf_config(
        {**config, "model_type": "deberta-v2", "norm_rel_ebd": "none"}
    )
    with pytest.raises(ValueError, match='LayerNorm.weight`.*norm_rel_ebd="layer_norm"'):
        tf_posenc.load_hf_attention_weights(plain, weights, PREFIX)
    short = {**weights, f"{PREFIX}rel_embeddings.weight": np.zeros((4, 32))}
    with pytest.raises(ValueError, match=r"rel_embeddings\.weight` must have shape \(8, 32\)"):
        tf_posenc.load_hf_attention_weights(layer.position_bias, short, PREFIX)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"pos_att_type": []}, "without a term the layer adds nothing"),
        ({"pos_att_type": ["c2q"]}, '`pos_att_type` must hold "c2p" and/or "p2c"'),
        ({"norm_rel_ebd": "rms"}, "`norm_rel_ebd` must be one of"),
        ({"position_buckets": 256, "max_relative_positions": 100}, "Log buckets need `position_buckets`"),
        ({"num_heads": 0}, "`num_heads` must be a positive integer"),
    ],
    ids=["no-term", "unknown-term", "unknown-norm", "buckets-beyond-maximum", "no-heads"],
)
def test_bad_arguments_are_named_at_construction(arguments, message):
    with pytest.raises(ValueError, match=message):
        DisentangledPositionBias(**{"num_heads": 2, "hidden_size": 16, **arguments})


def test_configs_it_does_not_read_are_refused_by_name():
    with pytest.raises(ValueError, match=r"DeBERTa \(v1\) fuses its projections"):
        tf_posenc.MultiHeadAttention.from_hf_config({"model_type": "deberta"}, 0)
    with pytest.raises(ValueError, match="must be a DeBERTa-v2/v3"):
        DisentangledPositionBias.from_hf_config({"model_type": "bert"})
    config = {"model_type": "deberta-v2", "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2,
              "relative_attention": True, "pos_att_type": "p2c|c2p", "position_buckets": 16}  # fmt: skip
    with pytest.raises(ValueError, match="`layer_index` must be an encoder layer of the config, 0 .. 1"):
        tf_posenc.MultiHeadAttention.from_hf_config(config, 2)
    other = DisentangledPositionBias(
        num_heads=4, hidden_size=32, position_buckets=8, max_relative_positions=64
    )
    with pytest.raises(ValueError, match="must be the encoder's `DisentangledPositionBias`"):
        tf_posenc.MultiHeadAttention.from_hf_config(config, 0, position_bias=other)
    with pytest.raises(ValueError, match="needs `relative_attention=True`"):
        DisentangledPositionBias.from_hf_config({**config, "relative_attention": False})


def test_group_query_attention_takes_the_bias_too():
    mha, _, _ = built("deberta-v2:v3")
    bias = mha.position_bias
    gqa = tf_posenc.GroupQueryAttention(8, 4, 4, position_bias=bias, dtype="float64")
    hidden, _ = inputs()
    gqa.build(hidden.shape, hidden.shape)
    for name in ("_query_dense", "_key_dense", "_value_dense", "_output_dense"):  # the same weights
        for ours, theirs in zip(getattr(gqa, name).weights, getattr(mha, name).weights, strict=True):
            ours.assign(theirs)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(gqa(hidden, hidden)),
        keras.ops.convert_to_numpy(mha(hidden, hidden)),
        atol=1e-12,
    )
    # Two key-value heads: the shared key projection's position keys repeat as the keys do.
    grouped = tf_posenc.GroupQueryAttention(8, 4, 2, position_bias=bias, dtype="float64")
    assert grouped(hidden, hidden).shape == (2, LENGTH, 32)
