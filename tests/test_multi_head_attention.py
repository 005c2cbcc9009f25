"""`tf_posenc.MultiHeadAttention` and `GroupQueryAttention`: Keras's layers with positions."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras.src.testing import test_case
from reference import reference_rotation, rope_frequencies

from tf_posenc import (
    AlibiBias,
    GroupQueryAttention,
    HeadNormalization,
    MultiHeadAttention,
    MultiHeadLatentAttention,
    RelativePositionBias,
    RotaryEmbedding,
    attention_mask,
    hf_attention_layers,
    positions_from_mask,
)
from tf_posenc.layers.alibi_bias import alibi_slopes

rng = np.random.default_rng(0)
X = rng.normal(size=(2, 7, 16)).astype("float32")


def paired(ours, theirs, x=X):
    """Builds both layers on `x` and gives Keras's layer our weights."""
    ours(x, x)
    theirs(x, x)
    theirs.set_weights(ours.get_weights())
    return ours, theirs


@pytest.mark.parametrize(
    "make_ours, make_theirs",
    [(lambda: MultiHeadAttention(2, 8, name="attention"),
      lambda: keras.layers.MultiHeadAttention(2, 8, name="attention")),
     (lambda: MultiHeadAttention(2, 8, value_dim=4, output_shape=12, sliding_window=3, name="attention"),
      lambda: keras.layers.MultiHeadAttention(2, 8, value_dim=4, output_shape=12, sliding_window=3,
                                              name="attention")),
     (lambda: GroupQueryAttention(8, 4, 2, name="attention"),
      lambda: keras.layers.GroupQueryAttention(8, 4, 2, name="attention"))],
    ids=["mha", "mha-keras-arguments", "gqa"],
)  # fmt: skip
def test_without_positions_it_is_keras_layer(make_ours, make_theirs):
    ours, theirs = paired(make_ours(), make_theirs())
    assert [w.path for w in ours.weights] == [w.path for w in theirs.weights]
    mask = np.tril(np.ones((2, 7, 7), bool))
    positions = {"query_positions": np.arange(7), "key_positions": np.arange(7)}
    for kwargs in ({}, {"use_causal_mask": True}, {"attention_mask": mask}):
        expected = theirs(X, X, **kwargs).numpy()
        np.testing.assert_array_equal(ours(X, X, **kwargs).numpy(), expected)
        # Positions 0 .. len - 1 given: the route with positions, Keras's masks (its window) on them.
        np.testing.assert_allclose(ours(X, X, **kwargs, **positions).numpy(), expected, atol=1e-6)
    config = ours.get_config()
    assert {k: v for k, v in config.items() if k in theirs.get_config()} == theirs.get_config()


def reference_attention(layer, x, positions, *, heads, kv_heads, frequencies=None, bias=None, cap=None,
                        scale=None, causal=True, query_scale=None):  # fmt: skip
    """The layer's attention restated in float64 from its weights: projections, rotation at
    `positions`, `bias` `(heads, q, k)` added, soft cap, causal softmax, output projection."""
    weights = {w.path.split("/", 1)[1]: np.asarray(w.numpy(), np.float64) for w in layer.weights}
    x = x.astype(np.float64)
    project = {name: np.einsum("btm,mnh->btnh", x, weights[f"{name}/kernel"]) + weights[f"{name}/bias"]
               for name in ("query", "key", "value")}  # fmt: skip
    q, k, v = project["query"], project["key"], project["value"]
    if query_scale is not None:  # a temperature, after the rotation (none here)
        q = q * query_scale
    head_dim = q.shape[-1]
    if frequencies is not None:
        q = reference_rotation(q, positions, frequencies)
        k = reference_rotation(k, positions, frequencies)
    k, v = np.repeat(k, heads // kv_heads, axis=2), np.repeat(v, heads // kv_heads, axis=2)
    scores = np.einsum("bqnh,bknh->bnqk", q, k) * (scale or head_dim**-0.5)
    if bias is not None:
        scores = scores + bias
    if cap is not None:
        scores = np.tanh(scores / cap) * cap
    if causal:
        scores = np.where(positions[:, None, :, None] >= positions[:, None, None, :], scores, -np.inf)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    attended = np.einsum("bnqk,bknh->bqnh", scores / scores.sum(-1, keepdims=True), v)
    return (
        np.einsum("bqnh,nhm->bqm", attended, weights["attention_output/kernel"])
        + weights["attention_output/bias"]
    )


def test_rotation_bias_soft_cap_and_scale_are_the_float64_formula():
    heads, kv_heads = 4, 2
    alibi = AlibiBias(num_heads=4)
    layer = GroupQueryAttention(8, heads, kv_heads, rope=RotaryEmbedding(), position_bias=alibi,
                                logit_soft_cap=5.0, scaling=0.3)  # fmt: skip
    positions = np.array([[0, 1, 2, 3, 4, 5, 6], [100000, 100001, 100002, 100003, 100004, 100005, 100006]])
    got = layer(X, X, use_causal_mask=True, query_positions=positions, key_positions=positions).numpy()
    distance = positions[:, None, None, :] - positions[:, None, :, None]
    bias = alibi_slopes(heads)[None, :, None, None] * distance
    frequencies = rope_frequencies(8)
    expected = reference_attention(layer, X, positions, heads=heads, kv_heads=kv_heads,
                                   frequencies=frequencies, bias=bias, cap=5.0, scale=0.3)  # fmt: skip
    np.testing.assert_allclose(got, expected, atol=2e-5)
    # The fused route (no soft cap) gives the same formula.
    fused = GroupQueryAttention(
        8, heads, kv_heads, rope=RotaryEmbedding(), position_bias=AlibiBias(num_heads=4)
    )
    fused(X, X)
    fused.set_weights(layer.get_weights())
    got = fused(X, X, use_causal_mask=True, query_positions=positions, key_positions=positions).numpy()
    expected = reference_attention(fused, X, positions, heads=heads, kv_heads=kv_heads,
                                   frequencies=rope_frequencies(8), bias=bias)  # fmt: skip
    np.testing.assert_allclose(got, expected, atol=2e-5)


@pytest.mark.parametrize(
    "make",
    [lambda: MultiHeadAttention(2, 8, rope=RotaryEmbedding(), position_bias=RelativePositionBias(2, 16, 40,
                                                                                                 bidirectional=False)),
     lambda: GroupQueryAttention(8, 4, 2, rope=RotaryEmbedding(), position_bias=AlibiBias(num_heads=4),
                                 logit_soft_cap=20.0, sliding_window=3)],
    ids=["mha-rope-t5", "gqa-rope-alibi-window"],
)  # fmt: skip
def test_cached_steps_give_the_full_pass(make):
    layer = make()
    full = layer(X, X, use_causal_mask=True).numpy()
    heads = getattr(layer, "num_key_value_heads", 2)
    latent = getattr(layer, "cache_width", None)
    cache = np.zeros(
        (2, 2, 9, heads, 8) if latent is None else (2, 9, latent), "float32"
    )  # more slots than steps: the rest are masked
    output, cache = layer(X[:, :3], X[:, :3], cache=cache, cache_update_index=0, use_causal_mask=True)
    steps = [output.numpy()]
    step = tf.function(lambda x, cache, index: layer(x, x, cache=cache, cache_update_index=index,
                                                     use_causal_mask=True))  # fmt: skip
    for index in range(3, 7):
        output, cache = step(X[:, index : index + 1], cache, tf.constant(index))
        steps.append(output.numpy())
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-6)
    # The keys were rotated before they were cached: slot 4 holds the key at position 4.
    keys = layer._key_dense(X)
    rotated = layer.rope(keys, positions=np.arange(7)).numpy()
    np.testing.assert_allclose(cache.numpy()[:, 0, 4], rotated[:, 4], atol=1e-6)


def module_layer(dtype=None):
    """A layer with every mechanism of a module around the rotation: per-head RMS norms after the
    rotation (HunYuan's), a value norm (Gemma 3n's), a clamp, sinks and an output gate. The
    rotation and norms are layers of their own, each with the dtype policy it is given."""
    return GroupQueryAttention(
        8, 4, 2, rope=RotaryEmbedding(dtype=dtype),
        query_norm=HeadNormalization(epsilon=1e-6, name="query_norm", dtype=dtype),
        key_norm=HeadNormalization(epsilon=1e-6, name="key_norm", dtype=dtype),
        value_norm=HeadNormalization(scale=False, dtype=dtype),
        norm_after_rope=True, clip_qkv=0.8, use_sinks=True, use_gate=True, dtype=dtype,
    )  # fmt: skip


def rms(x, scale=1.0, epsilon=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + epsilon) * scale


def test_norms_clamp_sinks_and_gate_are_the_float64_formula():
    layer = module_layer(dtype="float64")
    layer(X, X)
    weights = [np.asarray(w.numpy()) for w in layer.weights]
    draw = np.random.default_rng(3)  # norms' scales and sinks away from their initial values
    layer.set_weights([w if w.ndim > 1 else w + draw.uniform(0.2, 0.5, w.shape) for w in weights])
    positions = np.array([[0, 1, 2, 3, 4, 5, 6], [90000, 90001, 90002, 90003, 90004, 90005, 90006]])
    got = layer(X, X, use_causal_mask=True, query_positions=positions, key_positions=positions).numpy()

    values = {w.path.split("/", 1)[1]: np.asarray(w.numpy(), np.float64) for w in layer.weights}
    x = X.astype(np.float64)
    q, k, v, gate = (
        np.einsum("btm,mnh->btnh", x, values[f"{name}/kernel"]) + values[f"{name}/bias"]
        for name in ("query", "key", "value", "gate")
    )
    q, k, v = (np.clip(t, -0.8, 0.8) for t in (q, k, v))
    frequencies = rope_frequencies(8)
    q = rms(reference_rotation(q, positions, frequencies), values["query_norm/scale"])
    k = rms(reference_rotation(k, positions, frequencies), values["key_norm/scale"])
    v = rms(v)
    k, v = np.repeat(k, 2, axis=2), np.repeat(v, 2, axis=2)
    scores = np.einsum("bqnh,bknh->bnqk", q, k) / np.sqrt(8)
    scores = np.where(positions[:, None, :, None] >= positions[:, None, None, :], scores, -np.inf)
    sinks = np.broadcast_to(values["sinks"][None, :, None, None], (*scores.shape[:-1], 1))
    scores = np.concatenate([scores, sinks], -1)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights = (weights / weights.sum(-1, keepdims=True))[..., :-1]  # the sink's share weights nothing
    attended = np.einsum("bnqk,bknh->bqnh", weights, v) / (1 + np.exp(-gate))
    expected = np.einsum("bqnh,nhm->bqm", attended, values["attention_output/kernel"])
    expected += values["attention_output/bias"]
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_cached_steps_of_a_module_give_its_full_pass():
    # Keys are clamped, rotated and normed, values clamped and normed, before they are cached.
    layer = module_layer()
    full = layer(X, X, use_causal_mask=True).numpy()
    cache = np.zeros((2, 2, 9, 2, 8), "float32")
    output, cache = layer(X[:, :3], X[:, :3], cache=cache, cache_update_index=0, use_causal_mask=True)
    steps = [output.numpy()]
    for index in range(3, 7):
        x = X[:, index : index + 1]
        output, cache = layer(x, x, cache=cache, cache_update_index=index, use_causal_mask=True)
        steps.append(output.numpy())
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-6)


@pytest.mark.slow
def test_module_arguments_round_trip_and_reload(tmp_path):
    layer = module_layer()
    inputs = keras.Input((None, 16))
    model = keras.Model(inputs, layer(inputs, inputs, use_causal_mask=True))
    expected = model(X).numpy()
    config = json.loads(json.dumps(layer.get_config()))
    again = GroupQueryAttention.from_config(config)
    assert (again.norm_after_rope, again.clip_qkv, again.use_sinks) == (True, 0.8, True)
    assert isinstance(again.value_norm, HeadNormalization) and not again.value_norm.scale
    model.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_array_equal(reloaded(X).numpy(), expected)
    # Four projections and the gate (kernels and biases), two norms' scales, the sinks.
    assert len(reloaded.weights) == 10 + 2 + 1


def test_head_norms_under_mixed_precision_keep_float32_statistics():
    norm = HeadNormalization(method="layer", per_head=True, center=True, dtype="mixed_bfloat16")
    x = rng.normal(5.0, 1.0, size=(2, 3, 4, 8)).astype("float32")  # a mean far from zero
    got = norm(x)
    assert keras.backend.standardize_dtype(got.dtype) == "bfloat16"
    assert keras.backend.standardize_dtype(norm.gamma.dtype) == "float32"
    centred = x - x.mean(-1, keepdims=True)
    expected = centred / np.sqrt((centred**2).mean(-1, keepdims=True) + 1e-6)
    # One rounding to bfloat16 of the float32 result: within half a unit in [2, 4).
    np.testing.assert_allclose(np.asarray(got, np.float32), expected, atol=2**-7 + 1e-6)
    again = HeadNormalization.from_config(json.loads(json.dumps(norm.get_config())))
    assert (again.method, again.per_head, again.center, again.axis) == ("layer", True, True, -1)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("layer_class", [MultiHeadAttention, GroupQueryAttention], ids=["mha", "gqa"])
def test_float_positions_under_mixed_precision_are_the_integer_ones(layer_class, policy):
    # Keras's autocast would round positions 257 .. 263 to the compute dtype on their way in.
    arguments = (2, 8) if layer_class is MultiHeadAttention else (8, 4, 2)
    layer = layer_class(*arguments, rope=RotaryEmbedding(), dtype=policy)
    integers = np.arange(257, 264)[None]
    given = layer(X, X, query_positions=integers, key_positions=integers, use_causal_mask=True)
    floats = integers.astype("float32")
    again = layer(X, X, query_positions=floats, key_positions=floats, use_causal_mask=True)
    assert keras.backend.standardize_dtype(again.dtype) == policy.split("_")[1]
    np.testing.assert_array_equal(np.asarray(again, np.float32), np.asarray(given, np.float32))
    assert layer.autocast is False
    # A config saved with `autocast=True` reloads, without autocast.
    assert layer_class.from_config({**layer.get_config(), "autocast": True}).autocast is False


def shared_position_model():
    """T5's pattern: two attention layers sharing one bias table (drawn away from its zeros) and
    one rotation; returns the model and its first attention layer."""
    bias, rope = RelativePositionBias(4, 16, 40), RotaryEmbedding()
    inputs = keras.Input((None, 16))
    first = GroupQueryAttention(8, 4, 2, rope=rope, position_bias=bias)
    second = GroupQueryAttention(8, 4, 2, rope=rope, position_bias=bias)
    hidden = first(inputs, inputs, use_causal_mask=True)
    model = keras.Model(inputs, second(hidden, hidden, use_causal_mask=True))
    table = bias.relative_attention_bias
    table.assign(np.random.default_rng(6).normal(size=tuple(table.shape)).astype("float32"))
    return model, first


@pytest.mark.slow
def test_shared_position_layers_reload_as_one_layer_with_their_weights(tmp_path):
    model, first = shared_position_model()
    expected = model(X).numpy()
    model.save(tmp_path / "shared.keras")
    reloaded = keras.saving.load_model(tmp_path / "shared.keras")
    np.testing.assert_array_equal(reloaded(X).numpy(), expected)
    one, two = reloaded.layers[1], reloaded.layers[2]
    assert one.position_bias is two.position_bias and one.rope is two.rope
    assert len(reloaded.weights) == len(model.weights) == 2 * 8 + 1  # the table once
    # Outside a save the configs are plain: the same for two serializations.
    assert json.dumps(first.get_config()) == json.dumps(first.get_config())


def test_a_cache_with_query_positions_needs_the_keys_positions():
    layer = GroupQueryAttention(8, 4, 2, rope=RotaryEmbedding())
    cache = np.zeros((2, 2, 9, 2, 8), "float32")
    with pytest.raises(ValueError, match="pass both, or neither"):
        layer(X, X, cache=cache, cache_update_index=0, query_positions=np.arange(100, 107))
    # With both, slot i holding position 100 + i, the call is the full pass at those positions.
    positions, slots = np.arange(100, 107)[None], np.arange(100, 109)[None]
    full = layer(X, X, query_positions=positions, key_positions=positions, use_causal_mask=True).numpy()
    cached, _ = layer(X, X, cache=cache, cache_update_index=0, query_positions=positions, key_positions=slots,
                      key_mask=np.arange(9)[None] < 7, use_causal_mask=True)  # fmt: skip
    np.testing.assert_allclose(cached.numpy(), full, atol=1e-6)


def test_a_layer_from_a_config_knows_whether_its_model_is_causal():
    sizes = {"hidden_size": 16, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}
    decoder = GroupQueryAttention.from_hf_config({"model_type": "gemma3_text", **sizes}, 0)
    assert decoder.is_causal is True
    np.testing.assert_array_equal(decoder(X, X).numpy(), decoder(X, X, use_causal_mask=True).numpy())
    embedding = {"model_type": "gemma3_text", "use_bidirectional_attention": True, **sizes}
    encoder = GroupQueryAttention.from_hf_config(embedding, 0)
    assert encoder.is_causal is False
    with pytest.raises(ValueError, match="`use_causal_mask` must be False"):
        encoder(X, X, use_causal_mask=True)
    # Gemma 4's "vision": causal for text (an image's tokens see each other by the caller's mask).
    assert hf_attention_layers({"model_type": "gemma4_text", "use_bidirectional_attention": "vision"})[
        0
    ].causal
    # Gemma 4's "all": bidirectional, the sliding layers within W // 2 + 1 either side. Printed by
    # transformers 5.25's `create_sliding_window_causal_mask` (eager, Gemma4TextConfig with
    # sliding_window=8 and "all"): query 10 of 20 attends keys 5 .. 15; `create_causal_mask`, all.
    config = {"model_type": "gemma4_text", "use_bidirectional_attention": "all", "sliding_window": 8}
    plan = hf_attention_layers(config)
    sliding = next(entry for entry in plan if entry.sliding_window is not None)
    full = next(entry for entry in plan if entry.sliding_window is None)
    assert not sliding.causal and not full.causal
    positions = np.arange(20)
    mask = attention_mask(positions, positions, causal=False, sliding_window=sliding.sliding_window)
    assert np.flatnonzero(np.asarray(mask)[0, 10]).tolist() == list(range(5, 16))
    assert np.asarray(attention_mask(positions, positions, causal=False)).all()


def test_left_padding_follows_the_positions():
    # Row 0 is left-padded by 3: with its positions from the mask, its real tokens see what the
    # unpadded sequence sees.
    layer = MultiHeadAttention(2, 8, rope=RotaryEmbedding())
    short = X[:1, :4]
    padded = np.concatenate([np.zeros((1, 3, 16), "float32"), short], axis=1)
    mask = np.array([[0, 0, 0, 1, 1, 1, 1]], bool)
    positions = positions_from_mask(mask)
    got = layer(padded, padded, use_causal_mask=True, query_positions=positions, key_positions=positions,
                attention_mask=np.broadcast_to(mask[:, None, :], (1, 7, 7)))  # fmt: skip
    np.testing.assert_allclose(
        got.numpy()[:, 3:], layer(short, short, use_causal_mask=True).numpy(), atol=1e-6
    )


def test_masks_of_keras_inputs_arrive():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 16, mask_zero=True)(tokens)
    attended = MultiHeadAttention(2, 8, rope=RotaryEmbedding(), name="attention")(embedded, embedded)
    model = keras.Model(tokens, attended)
    ids = np.array([[3, 4, 5, 0, 0]])
    cut = keras.Model(tokens, MultiHeadAttention(2, 8, rope=RotaryEmbedding(), name="attention")(
        keras.layers.Embedding(10, 16)(tokens), keras.layers.Embedding(10, 16)(tokens)))  # fmt: skip
    cut.set_weights(model.get_weights()[:1] + model.get_weights())
    # The padded keys are not attended: the real tokens' outputs are those of the three alone.
    np.testing.assert_allclose(model(ids).numpy()[:, :3], cut(ids[:, :3]).numpy(), atol=1e-6)


def test_config_round_trip_and_keras_file_reload(tmp_path):
    layer = GroupQueryAttention(8, 4, 2, rope=RotaryEmbedding(max_wavelength=500000, scaling_factor=8.0,
                                                               rope_type="llama3"),
                                position_bias=RelativePositionBias(4, 16, 40), temperature=(8192, 0.1),
                                chunk_size=4, query_norm=keras.layers.RMSNormalization(),
                                key_norm=keras.layers.RMSNormalization())  # fmt: skip
    inputs = keras.Input((None, 16))
    model = keras.Model(inputs, layer(inputs, inputs, use_causal_mask=True))
    expected = model(X).numpy()
    config = json.loads(json.dumps(layer.get_config()))
    again = GroupQueryAttention.from_config(config)
    assert again.rope.rope_type == "llama3" and again.temperature == (8192, 0.1, 1, False)
    # The four projections' kernels and biases, T5's table and the norms' scales.
    assert len(model.weights) == len(layer.weights) == 8 + 1 + 2
    model.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_array_equal(reloaded(X).numpy(), expected)
    traced = tf.function(reloaded, jit_compile=True, input_signature=[tf.TensorSpec((None, None, 16))])
    np.testing.assert_allclose(traced(X).numpy(), expected, atol=1e-5)


def test_keras_layer_harness():
    # As Keras's own test of its layer: the harness's training step cannot feed two inputs.
    test_case.TestCase("run_layer_test").run_layer_test(
        MultiHeadAttention,
        init_kwargs={"num_heads": 2, "key_dim": 4, "rope": RotaryEmbedding(), "logit_soft_cap": 30.0},
        input_shape={"query_shape": (2, 5, 8), "value_shape": (2, 5, 8)},
        expected_output_shape=(2, 5, 8),
        expected_num_trainable_weights=8,
        expected_num_non_trainable_weights=0,
        supports_masking=True,
        run_training_check=False,
    )


@pytest.mark.parametrize(
    "make, message",
    [(lambda: MultiHeadAttention(2, 7, rope=RotaryEmbedding()), r"the head size must be even.*key_dim=7"),
     (lambda: MultiHeadAttention(2, 8, rope="rope"), r"`rope` must be None or a `RotaryEmbedding`"),
     (lambda: MultiHeadAttention(2, 8, position_bias=keras.layers.Dense(2)),
      r"`position_bias` must be None or"),
     (lambda: MultiHeadAttention(2, 8, position_bias=AlibiBias(num_heads=4)),
      r"must bias the layer's 2 query heads: give it `num_heads=2`. Received: position_bias.num_heads=4"),
     (lambda: MultiHeadAttention(2, 8, scaling=0), r"`scaling` must be"),
     (lambda: MultiHeadAttention(2, 8, temperature="hot"), r"`temperature` must be None"),
     (lambda: MultiHeadAttention(2, 8, rope=RotaryEmbedding(), attention_axes=(1, 2)),
      r"`attention_axes` must be"),
     (lambda: MultiHeadAttention(2, 8, rope=RotaryEmbedding())(X, X, cache_update_index=0),
      r"`cache_update_index` writes the call's keys and values into a `cache`"),
     (lambda: MultiHeadAttention(2, 8, rope=RotaryEmbedding())(
         X, X, cache=np.zeros((2, 2, 9, 3, 8), "float32"), cache_update_index=0),
      r"`cache` must have shape \(batch, 2, slots, 2, 8\)"),
     (lambda: MultiHeadAttention(2, 8, rope=RotaryEmbedding())(
         X, X, cache=np.zeros((2, 2, 9, 2, 8), "float32"), cache_update_index=5),
      r"`cache` has 9 slots: a call of 7 steps"),
     (lambda: MultiHeadAttention(2, 8, rope=RotaryEmbedding())(X, X, query_positions=np.arange(6)),
      r"`query_positions` must have one entry per query \(7\)"),
     (lambda: GroupQueryAttention(8, 4, 2, position_bias=AlibiBias()),
      r"`position_bias` must bias the layer's 4 query heads: give it `num_heads=4`"),
     (lambda: GroupQueryAttention(8, 4, 2, norm_after_rope=True),
      r"`norm_after_rope` says where `query_norm` and `key_norm` apply"),
     (lambda: GroupQueryAttention(8, 4, 2, clip_qkv=0),
      r"`clip_qkv` must be a finite number greater than 0. Received: clip_qkv=0"),
     (lambda: GroupQueryAttention(8, 4, 2, use_sinks="yes"), r"`use_sinks` must be a boolean"),
     (lambda: GroupQueryAttention(8, 4, 2, value_norm="rms"), r"`value_norm` must be None or a Keras layer"),
     (lambda: HeadNormalization(method="batch"), r"`method` must be"),
     (lambda: HeadNormalization(axis=1), r"`axis` must be -1 \(each head\) or \(-2, -1\)"),
     (lambda: HeadNormalization(center=True), r"`center` adds a bias after layer normalization"),
     (lambda: HeadNormalization()(X), r"`HeadNormalization` takes per-head features")],
    ids=["odd-key-dim", "rope-not-layer", "bias-not-layer", "bias-heads", "scaling-0", "temperature-type",
         "attention-axes", "index-without-cache", "cache-shape", "cache-slots", "positions-length",
         "alibi-without-heads", "norm-after-rope-alone", "clip-0", "sinks-not-boolean",
         "value-norm-not-layer", "norm-method", "norm-axis", "norm-center-rms", "norm-rank"],
)  # fmt: skip
def test_bad_arguments_are_clear_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_layers_sharing_a_rotation_and_a_bias_compute_them_once_per_step():
    rope, t5 = RotaryEmbedding(), RelativePositionBias(4, 16, 40, bidirectional=False)
    layers = [GroupQueryAttention(8, 4, 2, rope=rope, position_bias=t5) for _ in range(4)]
    cache = np.zeros((2, 2, 9, 2, 8), "float32")
    for layer in layers:
        layer(X[:, :1], X[:, :1], cache=cache, cache_update_index=0)

    def roundings(count):
        def step(index):
            return [layer(X[:, :1], X[:, :1], cache=cache, cache_update_index=index, use_causal_mask=True)
                    for layer in layers[:count]]  # fmt: skip

        graph = tf.function(step).get_concrete_function(tf.TensorSpec([], tf.int32)).graph
        return [op.type for op in graph.get_operations()].count("Round")  # the rows' roundings

    assert roundings(4) == roundings(1) > 0
    computed = []
    bias = t5.bias
    t5.bias = lambda *positions: computed.append(1) or bias(*positions)
    roundings(4)
    assert len(computed) == 1  # traced once, for the four layers


# The layers the JAX and PyTorch worlds (`backend_world.py`) run too, with weights of their own.
BACKEND_CASES = {
    "mha-rope-t5": lambda: MultiHeadAttention(
        2, 8, rope=RotaryEmbedding(), position_bias=RelativePositionBias(2, 16, 40, bidirectional=False)
    ),
    "gqa-rope-alibi-cap-window": lambda: GroupQueryAttention(
        8,
        4,
        2,
        rope=RotaryEmbedding(),
        position_bias=AlibiBias(num_heads=4),
        logit_soft_cap=20.0,
        sliding_window=3,
    ),
    # Latent attention with every mechanism its families add: the indexer, a gate, sinks.
    "mla-indexer-gate-sinks": lambda: MultiHeadLatentAttention(
        2,
        8,
        4,
        4,
        4,
        q_lora_rank=6,
        rope=RotaryEmbedding(layout="interleave"),
        index_n_heads=2,
        index_head_dim=8,
        index_topk=3,
        gate="feature",
        use_sinks=True,
    ),  # fmt: skip
}


def backend_outputs(layer, compiled=lambda function: function, as_tensor=lambda value: value):
    """`layer` given fixed weights, then its full causal pass, a prompt and cached steps (eager and
    compiled), at positions from 70000 on."""
    layer(X, X)
    layer.set_weights(
        [(np.sin(np.arange(w.size) * 0.37 + i) * 0.3).reshape(w.shape).astype("float32")
         for i, w in enumerate(layer.get_weights())]
    )  # fmt: skip
    positions = 70000 + np.arange(7)
    outputs = {"full": layer(X, X, use_causal_mask=True, query_positions=positions, key_positions=positions)}
    heads = getattr(layer, "num_key_value_heads", 2)
    latent = getattr(layer, "cache_width", None)
    cache = np.zeros((2, 2, 9, heads, 8) if latent is None else (2, 9, latent), "float32")
    output, cache = layer(X[:, :5], X[:, :5], cache=cache, cache_update_index=0, use_causal_mask=True)
    step = compiled(lambda x, cache, index: layer(x, x, cache=cache, cache_update_index=index,
                                                  use_causal_mask=True))  # fmt: skip
    steps = [output]
    for index in (5, 6):
        output, cache = step(X[:, index : index + 1], cache, as_tensor(np.int32(index)))
        steps.append(output)
    outputs["steps"] = keras.ops.concatenate(steps, axis=1)
    outputs["cache"] = cache
    return {name: keras.ops.convert_to_numpy(value) for name, value in outputs.items()}


def test_packed_documents_attend_within_their_segment():
    from tf_posenc import positions_from_segment_ids

    layer = MultiHeadAttention(2, 8, rope=RotaryEmbedding())
    segments = np.array([[1, 1, 1, 2, 2, 2, 2]])
    positions = positions_from_segment_ids(segments)
    packed = layer(X[:1], X[:1], use_causal_mask=True, segment_ids=segments, query_positions=positions,
                   key_positions=positions).numpy()  # fmt: skip
    for begin, end in ((0, 3), (3, 7)):
        alone = layer(X[:1, begin:end], X[:1, begin:end], use_causal_mask=True).numpy()
        np.testing.assert_allclose(packed[:, begin:end], alone, atol=1e-6)


@pytest.mark.slow
def test_a_functional_model_serves_from_saved_model_without_tf_posenc(tmp_path):
    from helpers import serve_without_tf_posenc

    x, positions = keras.Input((None, 16)), keras.Input((None,), dtype="int32")
    layer = GroupQueryAttention(8, 4, 2, rope=RotaryEmbedding(), position_bias=AlibiBias(num_heads=4),
                                sliding_window=3)  # fmt: skip
    model = keras.Model([x, positions], layer(x, x, use_causal_mask=True, query_positions=positions,
                                              key_positions=positions))  # fmt: skip
    cases = {
        "short": [X, np.broadcast_to(np.arange(7, dtype="int32"), (2, 7))],
        "far": [X[:1, :5], np.arange(100000, 100005, dtype="int32")[None]],
    }
    expected = {name: model(case).numpy() for name, case in cases.items()}
    specs = [tf.TensorSpec((None, None, 16), tf.float32), tf.TensorSpec((None, None), tf.int32)]
    model.export(str(tmp_path / "exported"), verbose=False, input_signature=[specs])
    served = serve_without_tf_posenc(tmp_path, cases)
    for name in cases:
        np.testing.assert_allclose(served[name], expected[name], atol=1e-5)


def test_symbolic_calls_give_keras_tensors_of_every_output():
    x, cache = keras.Input((None, 16)), keras.Input((2, 9, 2, 8))
    layer = GroupQueryAttention(8, 4, 2, rope=RotaryEmbedding(), logit_soft_cap=30.0)
    output, scores, updated = layer(x, x, cache=cache, cache_update_index=0, return_attention_scores=True)
    assert (output.shape, scores.shape, updated.shape) == (
        (None, None, 16),
        (None, 4, None, None),
        cache.shape,
    )
    output, scores = layer(x, keras.Input((5, 16)), return_attention_scores=True)
    assert scores.shape == (None, 4, None, 5)
    model = keras.Model([x, cache], layer(x, x, cache=cache, cache_update_index=0))
    out, new_cache = model([X[:, :3], np.zeros((2, 2, 9, 2, 8), "float32")])
    assert out.shape == (2, 3, 16) and new_cache.shape == (2, 2, 9, 2, 8)


def test_llama4_temperature_scales_at_the_cache_slots_ministral3_at_the_positions():
    # transformers 5.25: `Llama4TextAttention.forward` scales by
    # `log1p(floor((past_seen_tokens + arange(seq_len) + 1) / floor_scale)) * attn_scale + 1`,
    # Ministral 3 by `get_llama_4_attn_scale(position_ids, ...)`. Left padding of 3 makes them
    # differ.
    positions = np.maximum(np.arange(7) - 3, 0)[None].repeat(2, 0)
    for slots, where in ((True, np.arange(7)[None]), (False, positions)):
        layer = GroupQueryAttention(8, 4, 2, temperature=(2, 0.5, 1, slots), dtype="float64")
        got = layer(X, X, query_positions=positions, key_positions=positions, use_causal_mask=True).numpy()
        scale = np.log1p(np.floor((where + 1.0) / 2)) * 0.5 + 1.0
        expected = reference_attention(
            layer, X, positions, heads=4, kv_heads=2, query_scale=scale[..., None, None]
        )
        # The scale is float32, as transformers computes it: a few float32 units of the largest output.
        assert np.abs(got - expected).max() <= 1e-6 * np.abs(expected).max()


@pytest.mark.parametrize(
    "make",
    [lambda: MultiHeadAttention(2, 8, rope=RotaryEmbedding()),
     lambda: GroupQueryAttention(8, 4, 2, rope=RotaryEmbedding(), position_bias=AlibiBias(num_heads=4))],
    ids=["mha-rope", "gqa-rope-alibi"],
)  # fmt: skip
def test_a_mask_of_rank_2_is_for_every_sequence_with_or_without_a_cache(make):
    # Keras's and keras-hub's layers take `(q_len, k_len)` for the whole batch; so do these.
    layer = make()
    causal = np.tril(np.ones((7, 7), bool))
    expected = layer(X, X, attention_mask=np.broadcast_to(causal, (2, 7, 7))).numpy()
    np.testing.assert_array_equal(layer(X, X, attention_mask=causal).numpy(), expected)
    heads = getattr(layer, "num_key_value_heads", 2)
    cache = np.zeros((2, 2, 7, heads, 8), "float32")
    output, _ = layer(X, X, cache=cache, cache_update_index=0, attention_mask=causal)
    np.testing.assert_allclose(output.numpy(), expected, atol=1e-6)

    # keras-hub's way of decoding: a loop of the backend, one token a step at a traced index, each
    # step's row of the mask `(1, slots)`.
    def step(index, outputs, cache):
        token = keras.ops.slice(X, (0, index, 0), (2, 1, 16))
        row = keras.ops.slice(causal, (index, 0), (1, 7))
        output, cache = layer(token, token, cache=cache, cache_update_index=index, attention_mask=row)
        return index + 1, keras.ops.slice_update(outputs, (0, index, 0), output), cache

    _, steps, _ = keras.ops.while_loop(lambda index, *_: index < 7, step, (0, np.zeros_like(X), cache))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(steps), expected, atol=1e-5)
    for shape in ((7, 6), (3, 7, 7), (7,)):
        with pytest.raises(ValueError, match=r"`attention_mask` must have shape \(2, 7, 7\) or \(7, 7\)"):
            layer(X, X, attention_mask=np.ones(shape, bool))


@pytest.mark.parametrize(
    "bias",
    [None, lambda: AlibiBias(num_heads=2), lambda: RelativePositionBias(2, 16, 40)],
    ids=["no-bias", "alibi", "t5"],
)
def test_a_query_that_sees_no_key_weights_every_key_alike(bias):
    # transformers fills masked scores with the dtype's minimum: a row with no visible key is a
    # softmax of equal scores, 1/k_len on every key, whatever the bias (float64, where a finite
    # fill added to the bias would not give equal scores).
    layer = MultiHeadAttention(2, 8, rope=RotaryEmbedding(), position_bias=bias and bias(), dtype="float64")
    x = X.astype("float64")
    mask = np.ones((2, 7, 7), bool)
    mask[0, 2] = False  # query 2 of the first sequence sees nothing
    output, weights = layer(x, x, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(weights.numpy()[0, :, 2], np.full((2, 7), 1 / 7), rtol=1e-15)
    # The fused route (no scores asked for) gives the same outputs.
    fused = layer(x, x, attention_mask=mask).numpy()
    assert np.abs(fused - output.numpy()).max() <= 1e-12 * np.abs(output.numpy()).max()
    values = layer._value_dense(x).numpy()[0]  # (k_len, heads, key_dim): their mean, projected
    mean = np.einsum("nh,nhd->d", values.mean(0), layer._output_dense.kernel.numpy())
    expected = mean + layer._output_dense.bias.numpy()
    assert np.abs(output.numpy()[0, 2] - expected).max() <= 1e-12 * np.abs(expected).max()
