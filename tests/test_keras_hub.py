"""keras-hub's own models with exact positions: `tf_posenc.keras_hub.exact_rotary` on tiny random
keras-hub 0.32 backbones, against keras-hub's own logits and a float64 restatement of its rotary
formulas at large positions."""

import math

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf
from helpers import rounding_floor

from tf_posenc import RotaryEmbedding
from tf_posenc.keras_hub import SmolLM3Rotary, exact_rotary

SMALL = {"vocabulary_size": 64, "num_layers": 2, "hidden_dim": 32, "intermediate_dim": 64}
HEADS = {"num_query_heads": 4, "num_key_value_heads": 2}
PHI3_SU = {  # Phi-3-mini-128k's rope shape, on 4 pairs
    "max_sequence_length": 256,
    "rope_scaling_type": "su",
    "rope_scaling_short_factor": [1.0, 1.2, 1.5, 2.5],
    "rope_scaling_long_factor": [1.0, 2.0, 8.0, 32.0],
}
LLAMA31_ROPE = {
    "rope_max_wavelength": 500000,
    "rope_frequency_adjustment_factor": 8.0,
    "rope_low_freq_factor": 1.0,
    "rope_high_freq_factor": 4.0,
    "rope_pretraining_sequence_length": 64,
}
# Each backbone with a rotation, as small as keras-hub builds it.
BACKBONES = {
    "llama": lambda: keras_hub.models.LlamaBackbone(**SMALL, **HEADS),
    "llama3.1": lambda: keras_hub.models.Llama3Backbone(**SMALL, **HEADS, **LLAMA31_ROPE),
    "mistral": lambda: keras_hub.models.MistralBackbone(**SMALL, **HEADS, rope_scaling_factor=2.0),
    "mixtral": lambda: keras_hub.models.MixtralBackbone(**SMALL, **HEADS, num_experts=2),
    "gemma": lambda: keras_hub.models.GemmaBackbone(**SMALL, **HEADS, head_dim=8),
    "gemma3": lambda: keras_hub.models.Gemma3Backbone(
        **SMALL, **HEADS, head_dim=8, image_size=16, global_rope_scaling_factor=8.0
    ),
    "qwen": lambda: keras_hub.models.QwenBackbone(**SMALL, **HEADS, rope_max_wavelength=1e6),
    "qwen_moe": lambda: keras_hub.models.QwenMoeBackbone(
        **SMALL, **HEADS, moe_intermediate_dim=16, shared_expert_intermediate_dim=16, num_experts=2, top_k=1
    ),
    "qwen3": lambda: keras_hub.models.Qwen3Backbone(**SMALL, **HEADS, head_dim=8),
    "qwen3_moe": lambda: keras_hub.models.Qwen3MoeBackbone(
        **SMALL, **HEADS, moe_intermediate_dim=16, num_experts=2, top_k=1
    ),
    "phi3": lambda: keras_hub.models.Phi3Backbone(**SMALL, **HEADS),
    "phi3-su": lambda: keras_hub.models.Phi3Backbone(**SMALL, **HEADS, **PHI3_SU),
    "gpt_neox": lambda: keras_hub.models.GPTNeoXBackbone(**SMALL, num_heads=4),
    "gpt_oss": lambda: keras_hub.models.GptOssBackbone(
        **SMALL, **HEADS, num_experts=2, rope_scaling_factor=32.0, sliding_window=8
    ),
    "smollm3": lambda: keras_hub.models.SmolLM3Backbone(
        vocabulary_size=64, hidden_dim=32, intermediate_dim=64, num_layers=2, num_attention_heads=4,
        num_key_value_heads=2, attention_bias=False, attention_dropout=0.0,
        rope_layer_enabled_list=[True, False], layer_types=["full_attention"] * 2, mlp_bias=False,
        layer_norm_epsilon=1e-6, max_position_embeddings=128, rope_theta=2e6, partial_rotary_factor=1.0,
    ),
    "gemma4": lambda: keras_hub.models.Gemma4Backbone(
        **SMALL, **HEADS, head_dim=8, image_size=16, global_rope_partial_rotary_factor=0.5
    ),
    "qwen3_5": lambda: keras_hub.models.Qwen3_5Backbone(**{**SMALL, "num_layers": 4}, **HEADS, head_dim=16),
    "gemma3n": lambda: keras_hub.models.Gemma3nBackbone(
        text_vocab_size=64, text_hidden_size=32, num_hidden_layers=2, pad_token_id=0, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, intermediate_size=[64, 64], hidden_activation="gelu_approximate",
        layer_types=["sliding_attention", "full_attention"], sliding_window=8, rope_theta=10000.0,
        max_position_embeddings=128, vocab_size_per_layer_input=64, hidden_size_per_layer_input=8,
        altup_num_inputs=2, laurel_rank=4,
    ),
    **{
        name: lambda cls=cls: cls(
            vocabulary_size=64, encoder_hidden_dim=32, encoder_intermediate_dim=64, encoder_num_layers=1,
            encoder_num_attention_heads=4, encoder_num_key_value_heads=2, encoder_head_dim=8,
            encoder_layer_types=["full_attention"], decoder_hidden_dim=32, decoder_intermediate_dim=64,
            decoder_num_layers=1, decoder_num_attention_heads=4, decoder_num_key_value_heads=2,
            decoder_head_dim=8, decoder_layer_types=["full_attention"],
        )
        for name, cls in (("t5gemma", keras_hub.models.T5GemmaBackbone),
                          ("t5gemma2", keras_hub.models.T5Gemma2Backbone))
    },
}  # fmt: skip


def inputs(length=64, start=0, backbone=None):
    """Token ids (and the other inputs `backbone` takes) for `length` positions."""
    tokens = (np.arange(start, start + length) * 7 % 64)[None].astype("int32")
    names = [tensor.name for tensor in backbone.inputs] if backbone is not None else []
    given = {"token_ids": tokens, "padding_mask": np.ones_like(tokens)}
    if "position_ids" in names:
        given["position_ids"] = np.arange(length)[None].astype("int32")
    if "encoder_token_ids" in names:
        given = {f"{part}_{key}": value for part in ("encoder", "decoder") for key, value in given.items()}
    return given


def outputs(backbone, given):
    """The backbone's outputs on `given`, flattened (encoder-decoders return a dict)."""
    return np.concatenate(
        [np.ravel(keras.ops.convert_to_numpy(value)) for value in keras.tree.flatten(backbone(given))]
    )


def built(name):
    keras.utils.set_random_seed(len(name))
    return BACKBONES[name]()


def keras_hub_rotary_sites(model):
    from tf_posenc.keras_hub import _sites

    return _sites(model)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BACKBONES))
def test_the_swap_keeps_keras_hubs_logits_at_positions_0_to_63(name):
    backbone = built(name)
    given = inputs(backbone=backbone)
    theirs = outputs(backbone, given)
    sites = keras_hub_rotary_sites(backbone)
    assert sites, name
    assert exact_rotary(backbone) is backbone
    assert keras_hub_rotary_sites(backbone) == []  # every site converted
    ours = outputs(backbone, given)
    # keras-hub's float32 angles are within a few units of 2**-24 rad here.
    assert np.abs(ours - theirs).max() <= 2e-5 * max(1.0, np.abs(theirs).max()), name
    for parent, attribute, theirs_layer in sites:
        exact = getattr(parent, attribute)
        assert isinstance(exact, (RotaryEmbedding, SmolLM3Rotary))
        # Tracked in the keras-hub layer's place (Keras's store of sublayers, which `model.layers`,
        # the weights and saving read), not beside it.
        assert any(layer is exact for layer in parent._layers), name
        assert not any(layer is theirs_layer for layer in parent._layers), name
    # Again: nothing left to change, the same numbers.
    exact_rotary(backbone)
    np.testing.assert_array_equal(outputs(backbone, given), ours)


# ---------------------------------------------------------------------------------------------
# keras-hub's formulas restated in float64 (keras-hub 0.32, `rotary_embedding.py`,
# `llama_rotary_embedding.py`, `phi3_rotary_embedding.py`)


def keras_hub_frequencies(layer, dim, last_position):
    """The float64 frequencies and cos/sin factor of a keras-hub rotary layer on `dim` features."""
    config = vars(layer)
    kind = type(layer).__name__
    denominator = config.get("denominator_dim") or dim
    plain = float(layer.max_wavelength) ** -(np.arange(0, dim, 2) / denominator)
    if kind == "LlamaRotaryEmbedding":
        if layer.low_freq_factor is None:
            return plain, 1.0
        original, low, high = layer.pretraining_sequence_length, layer.low_freq_factor, layer.high_freq_factor
        factor = layer.frequency_adjustment_factor
        wavelength = 2 * math.pi / plain
        smooth = (original / wavelength - low) / (high - low)
        blended = (1 - smooth) * plain / factor + smooth * plain
        scaled = np.where(wavelength > original / low, plain / factor, plain)
        return np.where(
            (wavelength >= original / high) & (wavelength <= original / low), blended, scaled
        ), 1.0
    if kind == "Phi3SuScaledRotaryEmbedding":
        long = last_position + 1 > layer.pretraining_sequence_length
        factors = layer.inverese_freq_long_factor if long else layer.inverese_freq_short_factor
        return plain / np.asarray(factors, np.float64), layer.embedding_scaling_factor
    factor = float(layer.scaling_factor)
    if layer.rope_type == "linear":
        return plain / factor, 1.0
    if layer.rope_type == "dynamic":
        return plain / factor ** (dim / max(1, dim - 2)), 1.0
    assert layer.rope_type == "yarn"
    base, original = float(layer.max_wavelength), layer.original_max_position_embeddings

    def correction(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction(layer.beta_fast), correction(layer.beta_slow)
    if layer.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    ramp = np.clip((np.arange(dim // 2) - low) / max(high - low, 0.001), 0, 1)
    extrapolated = base ** -(np.arange(0, dim, 2) / dim)
    return extrapolated / factor * ramp + extrapolated * (1 - ramp), 0.1 * math.log(factor) + 1


def keras_hub_rotation(layer, x, start):
    """keras-hub's rotation of `x` `(batch, seq, heads, dim)` from `start`, in float64."""
    dim = x.shape[-1]
    positions = np.arange(start, start + x.shape[1], dtype=np.float64)
    frequencies, scale = keras_hub_frequencies(layer, dim, positions[-1])
    angles = positions[:, None] * frequencies[None]
    cos = np.concatenate([np.cos(angles)] * 2, -1)[None, :, None] * scale
    sin = np.concatenate([np.sin(angles)] * 2, -1)[None, :, None] * scale
    x = x.astype(np.float64)
    half = np.concatenate([-x[..., dim // 2 :], x[..., : dim // 2]], -1)
    return x * cos + half * sin


DRIFT_NAMES = ["llama3.1", "mistral", "gemma3", "gemma4", "qwen", "phi3-su", "gpt_oss"]


@pytest.mark.slow
@pytest.mark.parametrize("name", DRIFT_NAMES)
def test_at_large_positions_the_swap_is_exact_and_keras_hub_drifts(name):
    backbone = built(name)
    layers = {id(layer): layer for _, _, layer in keras_hub_rotary_sites(backbone)}
    x = np.random.default_rng(1).normal(size=(1, 16, 2, 8)).astype("float32")
    for layer in layers.values():
        ours = RotaryEmbedding.from_keras_hub(layer)
        step = tf.function(lambda q, start, ours=ours: ours(q, start_index=start))
        for start in (2**17, 2**20 - 16):
            exact = keras_hub_rotation(layer, x, start)
            floor = rounding_floor(exact, "float32")
            full = ours(x, start_index=start).numpy()
            assert np.abs(full - exact).max() <= 4 * floor, (name, start)
            # Single-token cached steps, the start a tensor as in keras-hub's `call_with_cache`.
            steps = np.concatenate(
                [step(x[:, i : i + 1], tf.constant(start + i)).numpy() for i in (0, 15)], 1
            )
            assert np.abs(steps - exact[:, [0, 15]]).max() <= 4 * floor, (name, start)
            theirs = keras.ops.convert_to_numpy(layer(x, start_index=start))
            assert np.abs(theirs - exact).max() > 100 * floor, (name, start)  # keras-hub's float32 angles


def test_from_keras_hub_reads_each_layer_as_it_behaves():
    llama = keras_hub.models.Llama3Backbone(
        **SMALL, **HEADS, **LLAMA31_ROPE, rope_position_scaling_factor=4.0
    )
    layer = llama.transformer_layers[0]._self_attention_layer.rotary_embedding_layer
    ours = RotaryEmbedding.from_keras_hub(layer)
    # keras-hub's Llama layer ignores `position_scaling_factor`, so this layer does too.
    assert (ours.rope_type, ours.scaling_factor, ours.original_max_position_embeddings) == ("llama3", 8.0, 64)
    yarn = keras_hub.layers.RotaryEmbedding(rope_type="yarn", scaling_factor=4.0, truncate=False)
    ours = RotaryEmbedding.from_keras_hub(yarn, dtype="float64")
    assert ours.attention_scaling == pytest.approx(0.1 * math.log(4.0) + 1, rel=1e-15)
    assert (ours.truncate, ours.compute_dtype) == (False, "float64")
    partial = keras_hub.layers.RotaryEmbedding(max_wavelength=1e6, denominator_dim=32, dtype="bfloat16")
    ours = RotaryEmbedding.from_keras_hub(partial)
    np.testing.assert_allclose(ours.frequencies(8), 1e6 ** -(np.arange(0, 8, 2) / 32), rtol=1e-15)
    assert ours.dtype_policy.name == "bfloat16" and ours.name == partial.name
    from keras_hub.src.models.moonshine.moonshine_layers import MoonshineRotaryEmbedding

    with pytest.raises(
        ValueError, match=r"keras-hub's `MoonshineRotaryEmbedding` computes its own embedding"
    ):
        RotaryEmbedding.from_keras_hub(MoonshineRotaryEmbedding(head_dim=8))
    with pytest.raises(ValueError, match=r"`layer` must be a keras-hub rotary layer. Received: Dense"):
        RotaryEmbedding.from_keras_hub(keras.layers.Dense(2))


class HoldsMoonshine(keras.layers.Layer):
    """A layer holding a rotary site no tf_posenc layer reproduces, beside one it does."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        from keras_hub.src.models.moonshine.moonshine_layers import MoonshineRotaryEmbedding

        self.angles = MoonshineRotaryEmbedding(head_dim=8)
        self.rope = keras_hub.layers.RotaryEmbedding()


def test_sites_it_cannot_convert_are_named_or_left_with_a_warning():
    holder = HoldsMoonshine(name="holder")
    with pytest.raises(ValueError, match=r"Cannot make holder.angles \(MoonshineRotaryEmbedding\) exact"):
        exact_rotary(holder)
    with pytest.warns(UserWarning, match=r"left these keras-hub rotary sites as they are:\nholder.angles"):
        exact_rotary(holder, strict=False)
    assert isinstance(holder.rope, RotaryEmbedding) and not isinstance(holder.angles, RotaryEmbedding)
    with pytest.raises(ValueError, match=r"`strict` must be a boolean"):
        exact_rotary(holder, strict="yes")


def qwen35_mrope_restated(x, ids, section, width, base=10000.0):
    """keras-hub 0.32's `_apply_mrope` (Qwen3.5) in float64: t/h/w angles interleaved at stride 3
    by `section`, the first `width` features rotated in the half layout, the rest passed through."""
    half = width // 2
    angles = ids[:, 1:, :, None].astype(np.float64) * base ** (-np.arange(0, width, 2) / width)
    chosen = angles[:, 0].copy()  # (batch, seq_len, half): the t angles, then h and w where they go
    for i in range(half):
        if i < 3 * section[1] and i % 3 == 1:
            chosen[..., i] = angles[:, 1, :, i]
        elif i < 3 * section[2] and i % 3 == 2:
            chosen[..., i] = angles[:, 2, :, i]
    both = np.concatenate([chosen, chosen], axis=-1)[:, :, None]
    turning = x[..., :width].astype(np.float64)
    partner = np.concatenate([-turning[..., half:], turning[..., :half]], axis=-1)
    return np.concatenate([turning * np.cos(both) + partner * np.sin(both), x[..., width:]], axis=-1)


def test_qwen35_mrope_path_is_made_exact():
    # Qwen3.5's full-attention layers are every fourth; head 32 rotates its first 8 features.
    qwen35 = keras_hub.models.Qwen3_5Backbone(
        **{**SMALL, "num_layers": 4}, **HEADS, head_dim=32, mrope_section=[2, 1, 1]
    )
    (attention,) = [
        site for site, _, _ in keras_hub_rotary_sites(qwen35) if getattr(site, "mrope_section", None)
    ]
    x = np.random.default_rng(5).uniform(-1, 1, (2, 6, 4, 32)).astype("float32")
    ids = np.stack([np.arange(6)] * 4)[None].repeat(2, axis=0)  # (batch, 4, seq_len): text, t, h, w
    ids[:, 2, 2:5], ids[:, 3, 2:5] = (
        [[2, 3, 3], [2, 2, 3]],
        [[2, 3, 2], [3, 2, 3]],
    )  # an image's rows and columns
    calls = {"near": ids, "far": ids + 2**17, "text": None}

    def rotated():
        return {
            name: keras.ops.convert_to_numpy(attention._apply_partial_rope(x, 0, v))
            for name, v in calls.items()
        }

    theirs = rotated()
    exact_rotary(qwen35)
    assert isinstance(attention.rotary_embedding_layer, RotaryEmbedding)
    ours = rotated()
    np.testing.assert_allclose(ours["near"], theirs["near"], atol=2e-6)  # small positions: keras-hub's values
    np.testing.assert_allclose(ours["text"], theirs["text"], atol=2e-6)
    exact = {name: qwen35_mrope_restated(x, calls[name], (2, 1, 1), 8) for name in ("near", "far")}
    for name in exact:
        assert np.abs(ours[name] - exact[name]).max() <= 4 * rounding_floor(exact[name], "float32")
    far_error = np.abs(ours["far"] - exact["far"]).max()
    assert np.abs(theirs["far"] - exact["far"]).max() > 100 * far_error  # keras-hub's drift
    # The backbone runs with the exact layers; a second call finds nothing left to swap.
    assert exact_rotary(qwen35) is qwen35 and not keras_hub_rotary_sites(qwen35)


@pytest.mark.slow
def test_a_saved_model_reloads_with_keras_hubs_layers_and_swaps_to_the_same_logits(tmp_path):
    backbone = exact_rotary(built("llama3.1"))
    expected = keras.ops.convert_to_numpy(backbone(inputs(start=3)))
    backbone.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    assert keras_hub_rotary_sites(reloaded)  # keras-hub's configs have no field for the rotary
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(exact_rotary(reloaded)(inputs(start=3))), expected
    )
    backbone.save_to_preset(str(tmp_path / "preset"))
    preset = keras_hub.models.Backbone.from_preset(str(tmp_path / "preset"))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(exact_rotary(preset)(inputs(start=3))), expected)
    # SmolLM3's inv_freq keeps its path: its checkpoint loads into the swapped model and back.
    smol = built("smollm3")
    paths = [weight.path for weight in smol.weights]
    exact_rotary(smol)
    assert [weight.path for weight in smol.weights] == paths
    smol.save_weights(tmp_path / "smol.weights.h5")
    fresh = built("smollm3")
    fresh.load_weights(tmp_path / "smol.weights.h5")
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(exact_rotary(fresh)(inputs())), keras.ops.convert_to_numpy(smol(inputs()))
    )


@pytest.mark.slow
def test_a_swapped_causal_lm_generates_and_fits_under_xla():
    keras.utils.set_random_seed(0)
    causal_lm = keras_hub.models.LlamaCausalLM(backbone=built("llama3.1"), preprocessor=None)
    causal_lm.compile(sampler="greedy")
    prompt = {
        "token_ids": np.array([[5, 9, 3, 0, 0, 0, 0, 0]]),
        "padding_mask": np.array([[1] * 3 + [0] * 5]),
    }
    theirs = causal_lm.generate(prompt, stop_token_ids=None)
    exact_rotary(causal_lm)
    assert causal_lm.generate_function is None  # traced again with the exact layers
    ours = causal_lm.generate(prompt, stop_token_ids=None)
    np.testing.assert_array_equal(ours["token_ids"], theirs["token_ids"])  # positions 0-7: the same tokens
    causal_lm.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=True)  # fmt: skip
    x = inputs(16)
    history = causal_lm.fit(x, np.roll(x["token_ids"], -1, axis=1), epochs=2, verbose=0, shuffle=False)
    assert all(np.isfinite(history.history["loss"]))


def test_a_keras_hub_that_moved_a_class_is_named_with_its_version(monkeypatch):
    from tf_posenc import _keras_hub_layers

    moved = {
        **_keras_hub_layers._CLASSES,
        "LlamaRotaryEmbedding": ("keras_hub.src.models.llama.moved", "Rope"),
    }
    monkeypatch.setattr(_keras_hub_layers, "_CLASSES", moved)
    message = rf"keras-hub {keras_hub.__version__} has no `keras_hub.src.models.llama.moved.Rope`"
    with pytest.raises(ValueError, match=message):
        exact_rotary(built("llama"))
    with pytest.raises(ValueError, match=message):
        RotaryEmbedding.from_keras_hub(keras_hub.layers.RotaryEmbedding())


@pytest.mark.parametrize(
    "arguments",
    [{"truncate": True}, {"truncate": False}, {"beta_slow": 0.01, "original_max_position_embeddings": 2**16}],
    ids=["truncate", "no-truncate", "ramp-capped"],
)
def test_yarn_converts_by_the_installed_keras_hubs_meaning(arguments, monkeypatch):
    # The installed keras-hub's own frequencies, and its rotation at 2**17 against ours: keras-hub's
    # float32 angles there are within a few hundred units of 2**-24 rad per position unit.
    theirs = keras_hub.layers.RotaryEmbedding(rope_type="yarn", scaling_factor=4.0, **arguments)
    ours = RotaryEmbedding.from_keras_hub(theirs)
    dim = 16
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(theirs._get_inverse_freq(dim)), ours.frequencies(dim), rtol=1e-6
    )
    x = np.random.default_rng(2).normal(size=(1, 4, 2, dim)).astype("float32")
    exact = keras_hub_rotation(theirs, x, 2**17)
    assert np.abs(ours(x, start_index=2**17).numpy() - exact).max() <= 4 * rounding_floor(exact, "float32")
    assert np.abs(keras.ops.convert_to_numpy(theirs(x, start_index=2**17)) - exact).max() < 0.05
    # A keras-hub whose YaRN means something else is refused by name, never converted silently.
    monkeypatch.setattr(keras_hub, "__version__", "0.31.1")
    with pytest.raises(ValueError, match=r"keras-hub 0.31.1's YaRN is not keras-hub 0.32's"):
        RotaryEmbedding.from_keras_hub(theirs)
    monkeypatch.setattr(keras_hub, "__version__", "0.32.0.dev0")
    with pytest.raises(ValueError, match=r"keras-hub 0.32.0.dev0's YaRN"):
        RotaryEmbedding.from_keras_hub(theirs)
