"""The model types of transformers 5.25 that rotate queries and keys and are not decoders (text
encoders and embedders, speech and audio models, the other towers), read from their config
classes' defaults by `RotaryEmbedding.from_hf_config`: their rows and a vector rotated by each
rotary module's own `apply_rotary_pos_emb`, run in float64, as `tools/print_transformers.py
encoders` printed them (transformers 5.25.0, torch 2.13.0: `transformers_encoders_5_25.json`);
or refused by the mechanism they need."""

import json
import pathlib
import re

import numpy as np
import pytest
from fingerprints import fixed_vectors
from helpers import slow_unless

from tf_posenc import GroupQueryAttention, RotaryEmbedding, _hf_config, attention_mask, hf_attention_layers
from tf_posenc import _hf_encoder_defaults as encoder_defaults

PRINTED = json.loads((pathlib.Path(__file__).parent / "transformers_encoders_5_25.json").read_text())
TYPES = PRINTED["types"]
# Measured: 1.5e-11 at most (T5Gemma 2's sliding layers), at positions up to 2**17 - 1, whose
# angles reach 1e5: the two float64 computations of an angle differ by its last bits.
BOUND = 1e-10
CASES = [
    (model_type, kind)
    for model_type, entry in sorted(TYPES.items())
    if "rows" in entry and model_type not in _hf_config.MECHANISMS
    for kind in entry["rows"]
]


# The settings under which a model uses the rotary module its class defaults build (ESM-2's
# class adds a learned table by default; its rotary checkpoints set "rotary").
ROTATING = {"esm": {"position_embedding_type": "rotary"}}


def rotated_by_us(model_type, kind, entry):
    """Our rows at the printed positions and the printed vector rotated, as the model's head
    holds it (a partial rotation's other features ride along)."""
    layer_type = None if kind == "None" else kind
    config = {"model_type": model_type, **ROTATING.get(model_type, {})}
    rope = RotaryEmbedding.from_hf_config(config, layer_type=layer_type, dtype="float64")
    head = _hf_config._head_dim(_hf_config.read(config), layer_type)
    width = entry["rows"][kind]["width"]
    vector, units = fixed_vectors(width)
    features = np.zeros(head)
    features[:width] = vector + 0.0
    features[width:] = np.linspace(-1.0, 1.0, head - width)
    positions = np.asarray(entry["positions"])
    if entry.get("axes") == 2:  # NeoMME's rows of ids p and 2p + 1
        positions = np.stack([positions, positions * 2 + 1])[:, None, :]
    batch = np.broadcast_to(features, (1, len(entry["positions"]), 1, head)).copy()
    rotated = np.asarray(rope(batch, positions=positions))[0, :, 0]
    cos, sin = (np.asarray(rows)[0, -1] for rows in rope.rows(batch, positions=positions))
    return rope, rotated, features, (cos, sin), units, width


# Without `slow`, a case of each mechanism: per layer type, interleaved, partial, two axes.
QUICK = {"modernbert", "moonshine", "neomme", "openai_privacy_filter"}


@pytest.mark.parametrize("model_type, kind", slow_unless(QUICK, CASES))
def test_the_rotation_is_the_rotary_modules(model_type, kind):
    entry = TYPES[model_type]
    printed = entry["rows"][kind]
    rope, rotated, features, (cos, sin), units, width = rotated_by_us(model_type, kind, entry)
    # The rows: each pair's cosine and sine at the last position, wherever each code keeps them
    # (transformers' `[f | f]`, `f` repeated per pair, or `f`; ours by the layer's layout).
    theirs = {}
    for name, row in (("cos", printed["cos"]), ("sin", printed["sin"])):
        row = np.asarray(row)
        if len(row) == width // 2:  # one per pair (the privacy filter's)
            theirs[name] = row
        elif np.allclose(row[: width // 2], row[width // 2 :], rtol=0, atol=1e-15):
            theirs[name] = row[: width // 2]
        else:
            theirs[name] = row[0::2]
    pairs = slice(0, width // 2) if rope.layout == "half" else slice(0, width, 2)
    assert np.abs(cos[pairs] - theirs["cos"]).max() <= BOUND
    assert np.abs(sin[pairs] - theirs["sin"]).max() <= BOUND
    # The vector, rotated by the module's apply function: whole at the last position, and at
    # every position dotted with three unit vectors.
    assert np.abs(rotated[-1, :width] - printed["rotated"]).max() <= BOUND
    assert np.abs(rotated[:, :width] @ units.T - printed["dots"]).max() <= BOUND
    np.testing.assert_array_equal(
        rotated[:, width:], np.broadcast_to(features[width:], rotated[:, width:].shape)
    )


def test_every_rotating_model_that_is_not_a_decoder_is_read_or_refused_by_name():
    read, refused, axial, unprinted = set(), {}, set(), {}
    for model_type, entry in TYPES.items():
        # The layer types a model rotates by (ModernBERT's global and local layers).
        rows = entry.get("rows") or TYPES.get(entry.get("config_type"), {}).get("rows") or {"None": None}
        try:
            for kind in rows:
                layer_type = None if kind == "None" else kind
                RotaryEmbedding.from_hf_config(
                    {"model_type": model_type, **ROTATING.get(model_type, {})}, layer_type=layer_type
                )
            read.add(model_type)
        except ValueError as error:
            if model_type in _hf_config.MECHANISMS or "holds models that rotate differently" in str(error):
                refused[model_type] = str(error)
            elif entry.get("rope_type") == "axial":
                axial.add(model_type)
                assert "`AxialRotaryEmbedding`'s" in str(error), model_type
            else:  # no rotary module builds from its config: a part of a composite model that
                # does not rotate (its module's rotation is another part's), or GLM-Image's text
                # model, whose default sections do not fit its default width in transformers either
                assert "error" in entry and "which tf_posenc has no rules for" in str(error), model_type
                unprinted[model_type] = str(error)
    for model_type, message in refused.items():
        if model_type in _hf_config.MECHANISMS:
            assert _hf_config.MECHANISMS[model_type] in message and "need a mechanism" in message
        else:  # a composite config of several rotating models
            assert "holds models that rotate differently: pass its" in message, message
    assert sorted(refused) == [
        "blt_global_transformer", "dia", "efficientloftr", "eomt_dinov3", "llama4_vision_model",
        "musicflamingo", "nemo_speechlm", "t5gemma",
    ]  # fmt: skip
    # Every entry printed with rows is read, under its type or its composite's.
    assert {t for t, entry in TYPES.items() if "rows" in entry} - read == {"blt_global_transformer"}
    assert (len(read), len(refused), len(axial), len(unprinted)) == (60, 8, 37, 45)
    # Their multimodal and composite configs read as their text model or sub-config.
    for parent, text_type in encoder_defaults.TEXT_MODEL_TYPES.items():
        assert _hf_config.read({"model_type": parent})["model_type"] == text_type
    for parent, (key, part) in encoder_defaults.SUB_CONFIGS.items():
        if parent not in _hf_config._ROTATING_PARTS:
            given = {
                "model_type": parent,
                key: {"rope_parameters": {"rope_type": "default", "rope_theta": 7.0}},
            }
            assert RotaryEmbedding.from_hf_config(given).max_wavelength == 7.0, parent
            assert _hf_config.read({"model_type": parent})["model_type"] == part
    # What the config gives replaces the defaults: ModernBERT's local rope theta.
    modernbert = {"model_type": "modernbert", "rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 160000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    }}  # fmt: skip
    assert (
        RotaryEmbedding.from_hf_config(modernbert, layer_type="sliding_attention").max_wavelength == 10000.0
    )
    assert RotaryEmbedding.from_hf_config(modernbert, layer_type="full_attention").max_wavelength == 160000.0


# The text encoders' plans (16 tokens, the first padding, dropped from the masks) and the speech
# models' (16 positions, none padding).
PLANS = {
    model_type: plan
    for model_type, plan in sorted({**PRINTED["plans"], **PRINTED["speech_plans"]}.items())
    if "error" not in plan and model_type in _hf_config._ENCODER_PLANS
}
# OpenAI's privacy filter multiplies its queries and keys by head_dim ** -0.25 each and gives the
# attention function `scaling=1.0`: the scale of an unscaled `q . k` is head_dim ** -0.5.
PRESCALED = {"openai_privacy_filter": 16**-0.5}


@pytest.mark.parametrize("model_type", slow_unless(QUICK, PLANS))
def test_the_plan_is_the_models_masks_and_scales(model_type):
    # The printer ran each model whole at small sizes (a window of 3; ModernBERT's
    # `local_attention` 6) and kept the mask and softmax scale each attention module gave the
    # attention function.
    assert_plan_is_printed(model_type, PLANS[model_type], PRESCALED.get(model_type))


def assert_plan_is_printed(model_type, printed, scaling=None):
    """The plan of `model_type` at the printed overrides has the printed masks and scales (or
    `scaling`), and rotates on every layer."""
    plan = hf_attention_layers({**printed["overrides"], "model_type": model_type})
    assert len(plan) == len(printed["layers"])
    positions = np.arange(len(printed["layers"][0]["mask"]))
    for entry, layer in zip(plan, printed["layers"], strict=True):
        mask = attention_mask(positions, positions, causal=entry.causal, sliding_window=entry.sliding_window)
        np.testing.assert_array_equal(np.asarray(mask)[0], np.asarray(layer["mask"], bool))
        assert entry.scaling == pytest.approx(scaling or layer["scaling"], rel=1e-15)
        assert entry.rope is not None


# Codecs whose one config builds two transformers, an encoder and a decoder, with one plan.
TWO_TRANSFORMERS = {"mimi": ("mimi_encoder", "mimi_decoder"),
                    "pocket_tts_audio_tokenizer": ("pocket_tts_audio_tokenizer_encoder",
                                                   "pocket_tts_audio_tokenizer_decoder")}  # fmt: skip


@pytest.mark.parametrize("codec", sorted(TWO_TRANSFORMERS))
def test_a_codecs_plan_is_each_of_its_transformers(codec):
    for part in TWO_TRANSFORMERS[codec]:
        assert_plan_is_printed(codec, PLANS[part])


def test_every_model_type_read_or_refused_by_the_plan_has_its_plan_printed():
    printed = {
        name for name, plan in {**PRINTED["plans"], **PRINTED["speech_plans"]}.items() if "error" not in plan
    }
    assert set(_hf_config._ENCODER_PLANS) - set(TWO_TRANSFORMERS) <= printed
    # Voxtral Realtime's encoder slides on every layer when its config sets a window, and is
    # causal over every earlier position without one.
    voxtral = {"model_type": "voxtral_realtime_encoder", "num_hidden_layers": 2}
    assert [entry.sliding_window for entry in hf_attention_layers(voxtral)] == [750, 750]
    unwindowed = hf_attention_layers({**voxtral, "sliding_window": None})
    assert [(entry.sliding_window, entry.causal) for entry in unwindowed] == [(None, True)] * 2
    # Qwen2.5-Omni's talker slides only with `use_sliding_window`, from `max_window_layers` on.
    talker = {
        "model_type": "qwen2_5_omni_talker",
        "num_hidden_layers": 3,
        "sliding_window": 8,
        "max_window_layers": 1,
    }
    assert [entry.sliding_window for entry in hf_attention_layers(talker)] == [None] * 3
    sliding = hf_attention_layers({**talker, "use_sliding_window": True})
    assert [entry.sliding_window for entry in sliding] == [None, 8, 8]


def test_esm_rotates_only_with_rotary_positions():
    with pytest.raises(ValueError, match="`position_embedding_type` is not 'rotary'"):
        RotaryEmbedding.from_hf_config({"model_type": "esm"})  # ESM-2's class default: "absolute"
    plan = hf_attention_layers({"model_type": "esm", "num_hidden_layers": 2})
    assert [(entry.rope, entry.causal) for entry in plan] == [(None, False)] * 2
    rotary = hf_attention_layers(
        {"model_type": "esm", "num_hidden_layers": 2, "position_embedding_type": "rotary"}
    )
    assert all(entry.rope is not None for entry in rotary)


def test_sliding_layers_of_a_model_whose_layers_do_not_slide_are_refused():
    # Qwen3-Omni's code predictor reads its layer types and fails on a sliding one in transformers.
    config = {"model_type": "qwen3_omni_moe_talker_code_predictor", "num_hidden_layers": 2}
    assert [entry.causal for entry in hf_attention_layers(config)] == [True, True]
    with pytest.raises(
        ValueError, match=r"`layer_types` must not hold 'sliding_attention'.*Received: layer_types"
    ):
        hf_attention_layers({**config, "layer_types": ["sliding_attention", "full_attention"]})


@pytest.mark.parametrize("model_type", sorted(_hf_config.ENCODER_PLAN_MECHANISMS))
def test_plans_that_need_a_mechanism_are_refused_naming_it(model_type):
    with pytest.raises(ValueError) as error:
        hf_attention_layers({"model_type": model_type})
    message = str(error.value)
    assert f"model_type={model_type!r} needs a mechanism tf_posenc does not have" in message
    assert _hf_config.ENCODER_PLAN_MECHANISMS[model_type] in message


@pytest.mark.parametrize("model_type", ["mimi_encoder", "csm", "pocket_tts", "blt_patcher", "esmc"])
def test_head_dim_follows_the_sizes_where_the_config_class_derives_it(model_type):
    # These classes set `head_dim = hidden_size // num_attention_heads` when a config gives none:
    # their default head size is not a default (it was read as 64 or 128 at any size).
    sized = {"model_type": model_type, "hidden_size": 96, "num_attention_heads": 4}
    assert RotaryEmbedding.from_hf_config(sized)(np.ones((1, 2, 1, 24), "float32")).shape == (1, 2, 1, 24)
    assert _hf_config._head_dim(_hf_config.read(sized), None) == 24
    assert hf_attention_layers({**sized, "num_hidden_layers": 1})[0].scaling == pytest.approx(24**-0.5)


def test_neommes_windows_are_derived_as_its_class_derives_them():
    # Its config class's defaults hold 17 layers' `per_layer_config` (each full layer None, every
    # other sliding layer 1024, the rest the config's 256): derived from the layer count, or read.
    defaults = encoder_defaults.DEFAULTS["neomme"]
    derived = hf_attention_layers({"model_type": "neomme"})
    given = hf_attention_layers({"model_type": "neomme", "per_layer_config": defaults["per_layer_config"]})
    windows = [entry.sliding_window for entry in derived]
    assert windows == [entry.sliding_window for entry in given]
    assert windows[:6] == [256, 1024, 256, 1024, 256, None] and windows[-1] is None and len(windows) == 17
    assert not any(entry.causal for entry in derived)


def test_older_config_keys_are_read_as_their_classes_read_them_or_refused():
    # ModernBERT's checkpoints on the Hub: `global_rope_theta`, `local_rope_theta`, `local_attention`
    # and `global_attn_every_n_layers` (its config class converts them; values of ModernBERT-large).
    hub = {"model_type": "modernbert", "hidden_size": 1024, "num_attention_heads": 16,
           "num_hidden_layers": 28, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
           "local_attention": 128, "global_attn_every_n_layers": 3}  # fmt: skip
    plan = hf_attention_layers({**hub, "global_rope_theta": 80000.0, "global_attn_every_n_layers": 4})
    assert [entry.sliding_window for entry in plan[:5]] == [None, 64, 64, 64, None]
    assert plan[0].rope.max_wavelength == 80000.0 and plan[1].rope.max_wavelength == 10000.0
    assert not any(entry.causal for entry in plan) and len(plan) == 28
    with pytest.raises(ValueError, match="gives `sliding_window` twice"):
        hf_attention_layers({**hub, "sliding_window": 32})
    with pytest.raises(ValueError, match=r"gives `attention_windows`.*AutoConfig.from_pretrained"):
        RotaryEmbedding.from_hf_config({"model_type": "ultrabert", "attention_windows": [128, 128, 0]})
    # EmbeddingGemma 2's full layers: 512-wide heads (its builder's `global_head_dim`) at any count.
    gemma = {"model_type": "embedding_gemma2_text", "num_hidden_layers": 12}
    plan = hf_attention_layers(gemma)
    assert [entry.sliding_window is None for entry in plan] == [False] * 5 + [True] + [False] * 5 + [True]
    assert plan[5].rope.get_config()["max_wavelength"] == 1000000.0
    full = RotaryEmbedding.from_hf_config(gemma, layer_type="full_attention")
    assert tuple(full(np.zeros((1, 2, 1, 512), "float32")).shape) == (1, 2, 1, 512)


def test_their_per_layer_plan_and_vision_towers_are_refused_with_what_to_use():
    # Every encoder's plan is read or refused by its mechanism now; Dia's decoder's, the last one
    # added, is its self-attention's (causal, scale 1.0), its cross-attention apart.
    dia = hf_attention_layers({"model_type": "dia_decoder"})
    assert len(dia) == 18 and all(entry.causal and entry.scaling == 1.0 for entry in dia)
    with pytest.raises(ValueError, match=r"attention module of model_type='esmc' \(not a decoder\)"):
        GroupQueryAttention.from_hf_config({"model_type": "esmc"}, 0)
    # ModernBERT's, EuroBERT's, ... modules are read (`test_hf_modules.py` compares them whole),
    # bidirectional.
    assert GroupQueryAttention.from_hf_config({"model_type": "modernbert"}, 0).is_causal is False
    # NeoMME's layers slide by their per-layer configs, not by its `layer_types`: the printer saw
    # every other layer slide where `layer_types` lists five sliding layers, then a full one.
    neomme = PRINTED["plans"]["neomme"]
    assert neomme["layer_types"][:2] == ["sliding_attention"] * 2
    assert np.asarray(neomme["layers"][1]["mask"]).all()
    with pytest.raises(ValueError, match=r"`encoder_config` or `decoder_config`"):
        RotaryEmbedding.from_hf_config({"model_type": "dia"})
    with pytest.raises(ValueError, match="`AxialRotaryEmbedding`'s"):
        RotaryEmbedding.from_hf_config({"model_type": "qwen2_vl_vision"})


def test_the_porting_page_lists_the_encoders_read():
    text = (pathlib.Path(__file__).parent.parent / "docs" / "porting.md").read_text(encoding="utf-8")

    def names(name):
        block = text[text.index(f"<!-- {name} -->") : text.index(f"<!-- /{name} -->")]
        return set(re.findall(r"`([a-z0-9_.-]+)`", block))

    read = set(encoder_defaults.DEFAULTS) - set(_hf_config.MECHANISMS)
    assert names("model-types-encoders-read") == read
    assert names("model-types-encoders-plan") == set(_hf_config._ENCODER_PLANS)
    parts = {*encoder_defaults.SUB_CONFIGS, *encoder_defaults.TEXT_MODEL_TYPES}
    assert names("model-types-encoders-parts") == parts - set(_hf_config._ROTATING_PARTS) - read
