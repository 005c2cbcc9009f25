"""RotaryEmbedding's rope types against transformers: its code restated in float64, the values
it printed, and the exact rotation; `from_hf_config` on published model configs."""

import inspect
import json
import types

import keras
import numpy as np
import pytest
import tensorflow as tf
from bounds import ROTATION_BOUND
from helpers import as_float64, rounding_floor, serve_without_tf_posenc
from hf_configs import CONFIGS
from reference import reference_partial_rotation, reference_rotation, rope_frequencies, transformers_rope

from tf_posenc import RotaryEmbedding, _rope_types, hf_attention_layers

# Printed by transformers 5.24.0 (torch 2.13.0 CPU) for the configs of `hf_configs.py`:
# `<Model>RotaryEmbedding(config)` (Llama, Qwen2, Qwen3, DeepseekV3, GptOss, Phi3, Gemma3,
# Gemma4Text, GPTNeoX; DeepseekV3 for Kimi-K2, HunYuanDenseV1, Glm4, Glm4Moe, Llama4Text, whose
# cos and sin are the real and imaginary parts of its `freqs_cis`, Ministral3); its `inv_freq`
# buffer at three pair indices and `attention_scaling`;
# `forward(x, position_ids=[[0, 1, 1000, 4000]])` cos and sin at position 1000, at the first
# column and at the last column of the first half; and the `inv_freq` after a forward pass over
# positions up to 131071 (where LongRoPE and dynamic NTK change it).
TRANSFORMERS_PRINTED = {
    "llama-3.1-8b": {
        "inv_freq": {0: 1.0, 32: 0.0005248460220173001, 63: 3.068925877869333e-07},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 0.9999999403953552],
        "sin_1000": [0.8268795609474182, 0.00030689258710481226],
    },
    "llama-3.2-1b": {
        "inv_freq": {0: 1.0, 16: 0.000429556705057621, 31: 9.418306490260875e-08},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 1.0],
        "sin_1000": [0.8268795609474182, 9.418306581210345e-05],
    },
    "qwen2.5-7b-yarn": {
        "inv_freq": {0: 1.0, 32: 0.0006029411451891065, 63: 3.102344408034696e-07},
        "attention_scaling": 1.138629436111989,
        "cos_1000": [0.6403413414955139, 1.1386293172836304],
        "sin_1000": [0.9415094256401062, 0.00035324206692166626],
    },
    "qwen3-8b": {
        "inv_freq": {0: 1.0, 32: 0.0010000000474974513, 63: 1.2409377632138785e-06},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 0.9999992251396179],
        "sin_1000": [0.8268795609474182, 0.0012409373885020614],
    },
    "deepseek-v3": {
        "inv_freq": {0: 1.0, 16: 0.005500000435858965, 31: 3.3338035336782923e-06},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 0.9999944567680359],
        "sin_1000": [0.8268795609474182, 0.003333797212690115],
    },
    "gpt-oss-20b": {
        "inv_freq": {0: 1.0, 16: 0.0004564839182421565, 31: 3.023511396804679e-07},
        "attention_scaling": 1.3465735902799727,
        "cos_1000": [0.7572848200798035, 1.3465734720230103],
        "sin_1000": [1.1134542226791382, 0.0004071380535606295],
    },
    "phi-3-128k": {
        "inv_freq": {0: 0.9523810148239136, 24: 0.004999999888241291, 47: 3.9722213841741905e-05},
        "attention_scaling": 1.1902380714238083,
        "cos_1000": [-1.0565756559371948, 1.18929922580719],
        "sin_1000": [-0.5480096340179443, 0.047266460955142975],
        "inv_freq_131072": {0: 0.9708738327026367, 24: 0.000333222298650071, 47: 1.8693523315960192e-06},
    },
    "phi-4-mini": {
        "inv_freq": {0: 1.0, 24: 0.009999999776482582, 47: 0.00012115274876123294},
        "attention_scaling": 1.1902380714238083,
        "cos_1000": [0.6693649888038635, 1.1815136671066284],
        "sin_1000": [0.9841835498809814, 0.14384812116622925],
        "inv_freq_131072": {0: 1.0, 24: 0.0006829792982898653, 47: 2.5361680400237674e-06},
    },
    "gemma-3-4b/full_attention": {
        "inv_freq": {0: 0.125, 64: 0.0001250000059371814, 127: 1.3924673680776323e-07},
        "attention_scaling": 1.0,
        "cos_1000": [0.7877144813537598, 1.0],
        "sin_1000": [-0.6160404682159424, 0.00013924673839937896],
    },
    "gemma-3-4b/sliding_attention": {
        "inv_freq": {0: 1.0, 64: 0.009999999776482582, 127: 0.00010746077896328643},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 0.994231641292572],
        "sin_1000": [0.8268795609474182, 0.10725408047437668],
    },
    "gemma-4/full_attention": {
        "inv_freq": {0: 1.0, 128: 0.0, 255: 0.0},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 1.0],
        "sin_1000": [0.8268795609474182, 0.0],
    },
    "gemma-4/sliding_attention": {
        "inv_freq": {0: 1.0, 64: 0.009999999776482582, 127: 0.00010746077896328643},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 0.994231641292572],
        "sin_1000": [0.8268795609474182, 0.10725408047437668],
    },
    "gpt-neox-20b": {
        "inv_freq": {0: 1.0, 6: 0.009999999776482582, 11: 0.00021544341871049255},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 0.9768816828727722],
        "sin_1000": [0.8268795609474182, 0.21378061175346375],
    },
    "llama-2-7b-dynamic": {
        "inv_freq": {0: 1.0, 32: 0.009999999776482582, 63: 0.00011547819303814322},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 0.9933397769927979],
        "sin_1000": [0.8268795609474182, 0.11522170901298523],
        "inv_freq_131072": {0: 1.0, 32: 0.0012191279092803597, 63: 1.8329873228140059e-06},
    },
    "kimi-k2": {
        "inv_freq": {0: 1.0, 16: 0.004472136031836271, 31: 8.764412768869079e-07},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 0.9999996423721313],
        "sin_1000": [0.8268795609474182, 0.0008764411322772503],
    },
    "hunyuan-7b": {
        "inv_freq": {0: 1.0, 32: 0.00029935772181488574, 63: 1.1547820122359553e-07},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 1.0],
        "sin_1000": [0.8268795609474182, 0.00011547820031410083],
    },
    "glm-4-0414": {
        "inv_freq": {0: 1.0, 16: 0.009999999776482582, 31: 0.0001333521504420787},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 0.991121768951416],
        "sin_1000": [0.8268795609474182, 0.13295726478099823],
    },
    "glm-4.5": {
        "inv_freq": {0: 1.0, 16: 0.0010000000474974513, 31: 1.5399265294036013e-06},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 0.9999988079071045],
        "sin_1000": [0.8268795609474182, 0.0015399259282276034],
    },
    "llama-4-scout": {
        "inv_freq": {0: 1.0, 32: 0.001414213445968926, 63: 1.5344629389346665e-07},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 1.0],
        "sin_1000": [0.8268795609474182, 0.00015344629355240613],
    },
    "ministral-3": {
        "inv_freq": {0: 1.0, 32: 0.0003382352879270911, 63: 7.75586102008674e-08},
        "attention_scaling": 1.0,
        "cos_1000": [0.5623790621757507, 1.0],
        "sin_1000": [0.8268795609474182, 7.755860860925168e-05],
    },
}

FAMILIES = [
    ("llama-3.1-8b", None),
    ("llama-3.2-1b", None),
    ("qwen2.5-7b-yarn", None),
    ("qwen3-8b", None),
    ("deepseek-v3", None),
    ("gpt-oss-20b", None),
    ("phi-3-128k", None),
    ("phi-4-mini", None),
    ("gemma-3-4b", "full_attention"),
    ("gemma-3-4b", "sliding_attention"),
    ("gemma-4", "full_attention"),
    ("gemma-4", "sliding_attention"),
    ("gpt-neox-20b", None),
    ("llama-2-7b-dynamic", None),
    ("kimi-k2", None),
    ("hunyuan-7b", None),
    ("glm-4-0414", None),
    ("glm-4.5", None),
    ("llama-4-scout", None),
    ("ministral-3", None),
]
FAMILY_IDS = [name if layer_type is None else f"{name}/{layer_type}" for name, layer_type in FAMILIES]

# What `from_hf_config` must read from each, besides the defaults.
EXPECTED_ARGUMENTS = {
    "llama-3.1-8b": {"rope_type": "llama3", "max_wavelength": 500000.0, "scaling_factor": 8.0,
                     "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0},
    "llama-3.2-1b": {"rope_type": "llama3", "scaling_factor": 32.0, "original_max_position_embeddings": 8192},
    "qwen2.5-7b-yarn": {"rope_type": "yarn", "max_wavelength": 1000000.0, "scaling_factor": 4.0,
                        "original_max_position_embeddings": 32768, "beta_fast": 32.0, "beta_slow": 1.0},
    "qwen3-8b": {"rope_type": "linear", "max_wavelength": 1000000, "scaling_factor": None},
    "deepseek-v3": {"rope_type": "yarn", "scaling_factor": 40.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                    "layout": "interleave", "original_max_position_embeddings": 4096},
    "gpt-oss-20b": {"rope_type": "yarn", "max_wavelength": 150000, "scaling_factor": 32.0, "truncate": False},
    "phi-3-128k": {"rope_type": "longrope", "scaling_factor": None, "original_max_position_embeddings": 4096,
                   "max_position_embeddings": 131072},
    "phi-4-mini": {"rope_type": "longrope", "partial_rotary_factor": 0.75},
    "gemma-3-4b/full_attention": {"rope_type": "linear", "max_wavelength": 1000000.0,
                                  "scaling_factor": 8.0},
    "gemma-3-4b/sliding_attention": {"rope_type": "linear", "max_wavelength": 10000.0,
                                     "scaling_factor": None},
    "gemma-4/full_attention": {"rope_type": "proportional", "max_wavelength": 1000000.0,
                               "partial_rotary_factor": 0.25},
    "gemma-4/sliding_attention": {"rope_type": "linear", "max_wavelength": 10000.0},
    "gpt-neox-20b": {"rope_type": "linear", "partial_rotary_factor": 0.25, "layout": "half"},
    "llama-2-7b-dynamic": {"rope_type": "dynamic_ntk", "scaling_factor": 2.0,
                           "max_position_embeddings": 4096},
    "kimi-k2": {"rope_type": "yarn", "max_wavelength": 50000.0, "scaling_factor": 32.0, "beta_fast": 1.0,
                "beta_slow": 1.0, "layout": "interleave"},
    "hunyuan-7b": {"rope_type": "ntk", "scaling_factor": 1000.0, "max_wavelength": 10000.0},
    "glm-4-0414": {"rope_type": "linear", "partial_rotary_factor": 0.5, "layout": "interleave"},
    "glm-4.5": {"rope_type": "linear", "partial_rotary_factor": 0.5, "layout": "half"},
    "llama-4-scout": {"rope_type": "llama3", "scaling_factor": 16.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 1.0, "layout": "interleave"},
    "ministral-3": {"rope_type": "yarn", "scaling_factor": 16.0, "original_max_position_embeddings": 16384,
                    "max_position_embeddings": 262144},
}  # fmt: skip


def family_layer(family, layer_type, **kwargs):
    return RotaryEmbedding.from_hf_config(CONFIGS[family], layer_type=layer_type, **kwargs)


@pytest.mark.parametrize("name, layer_type", FAMILIES, ids=FAMILY_IDS)
def test_from_hf_config_reads_each_family(name, layer_type):
    config = family_layer(name, layer_type).get_config()
    key = name if layer_type is None else f"{name}/{layer_type}"
    for argument, value in EXPECTED_ARGUMENTS[key].items():
        assert config[argument] == value, argument
    assert json.loads(json.dumps(config)) == config


def test_from_hf_config_takes_a_path_or_an_object(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIGS["deepseek-v3"]))
    from_dict = RotaryEmbedding.from_hf_config(CONFIGS["deepseek-v3"], name="rope").get_config()
    assert RotaryEmbedding.from_hf_config(str(path), name="rope").get_config() == from_dict
    assert RotaryEmbedding.from_hf_config(path, name="rope").get_config() == from_dict
    as_object = types.SimpleNamespace(**CONFIGS["deepseek-v3"])
    assert RotaryEmbedding.from_hf_config(as_object, name="rope").get_config() == from_dict
    overridden = RotaryEmbedding.from_hf_config(CONFIGS["deepseek-v3"], layout="half", dtype="bfloat16")
    assert overridden.layout == "half" and overridden.compute_dtype == "bfloat16"


@pytest.mark.parametrize("name, layer_type", FAMILIES, ids=FAMILY_IDS)
def test_frequencies_are_transformers_restated_in_float64(name, layer_type):
    layer = family_layer(name, layer_type)
    for seq_len in (None, 4001, 131072, 2**20):
        expected, attention, head_dim = transformers_rope(CONFIGS[name], layer_type, seq_len)
        np.testing.assert_allclose(layer.frequencies(head_dim, seq_len), expected, rtol=1e-14, atol=0)
    assert layer.attention_scaling == pytest.approx(attention, rel=1e-15)


@pytest.mark.slow
@pytest.mark.parametrize("name, layer_type", FAMILIES, ids=FAMILY_IDS)
def test_values_printed_by_transformers(name, layer_type):
    printed = TRANSFORMERS_PRINTED[name if layer_type is None else f"{name}/{layer_type}"]
    layer = family_layer(name, layer_type)
    head_dim = transformers_rope(CONFIGS[name], layer_type)[2]
    for label, seq_len in (("inv_freq", 4001), ("inv_freq_131072", 131072)):
        frequencies = layer.frequencies(head_dim, seq_len)
        for index, value in printed.get(label, printed["inv_freq"]).items():
            # transformers computes its inverse frequencies in float32.
            assert frequencies[index] == pytest.approx(value, rel=2**-21, abs=1e-12), (label, index)
    assert layer.attention_scaling == pytest.approx(printed["attention_scaling"], rel=1e-15)
    # cos and sin at position 1000: rotating unit vectors gives them back.
    pairs = len(layer.frequencies(head_dim))
    half = layer.layout == "half"
    columns = (0, pairs - 1)
    for column, cosine, sine in zip(columns, printed["cos_1000"], printed["sin_1000"], strict=True):
        basis = np.zeros((1, 1, head_dim), "float32")
        basis[0, 0, column if half else 2 * column] = 1.0
        rotated = layer(basis, start_index=1000).numpy()[0, 0]
        partner = column + pairs if half else 2 * column + 1
        # transformers' float32 angle 1000 * w is off by up to 1000 * 2**-24 rad.
        assert rotated[column if half else 2 * column] == pytest.approx(cosine, abs=1e-4)
        assert rotated[partner] == pytest.approx(sine, abs=1e-4)


@pytest.mark.parametrize("name, layer_type", FAMILIES, ids=FAMILY_IDS)
def test_rotation_is_exact_for_every_family(name, layer_type):
    layer = family_layer(name, layer_type)
    head_dim = transformers_rope(CONFIGS[name], layer_type)[2]
    x = np.random.default_rng(len(name)).normal(size=(1, 32, 1, head_dim)).astype("float32")
    for start in (100, 2**17 - 32, 2**20):
        frequencies, scale, _ = transformers_rope(CONFIGS[name], layer_type, seq_len=start + 32)
        exact = reference_partial_rotation(
            x, np.arange(start, start + 32)[None], frequencies, layer.layout, scale
        )
        error = np.abs(layer(x, start_index=start).numpy() - exact).max()
        assert error <= 4 * rounding_floor(exact, "float32"), start


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("name", ["llama-3.1-8b", "phi-4-mini", "deepseek-v3", "gpt-oss-20b"])
def test_half_precision_rotation_is_rounded_once(name, policy):
    compute = "float16" if policy == "mixed_float16" else "bfloat16"
    layer = family_layer(name, None, dtype=policy)
    head_dim = transformers_rope(CONFIGS[name])[2]
    x = as_float64(tf.cast(np.random.default_rng(1).normal(size=(1, 32, 2, head_dim)), compute))
    start = 2**17 - 32
    frequencies, scale, _ = transformers_rope(CONFIGS[name], seq_len=start + 32)
    exact = reference_partial_rotation(
        x, np.arange(start, start + 32)[None], frequencies, layer.layout, scale
    )
    rotated = layer(tf.constant(x, compute), start_index=start)
    assert rotated.dtype == compute
    assert np.abs(as_float64(rotated) - exact).max() <= 2 * rounding_floor(exact, compute)


def test_float32_rotation_of_transformers_is_far_from_exact():
    # transformers' own float32 route (inv_freq in float32, angle = float32(p) * inv_freq,
    # then cos/sin), restated in NumPy float32, against tf_posenc at the same positions.
    layer = family_layer("llama-3.1-8b", None)
    frequencies, _, head_dim = transformers_rope(CONFIGS["llama-3.1-8b"])
    positions = np.arange(2**17 - 32, 2**17)
    angles = positions.astype(np.float32)[:, None] * frequencies.astype(np.float32)
    ones = np.ones((1, 32, 1, head_dim), "float32")
    exact = reference_rotation(ones, positions[None], frequencies)
    theirs = np.concatenate([np.cos(angles) - np.sin(angles), np.cos(angles) + np.sin(angles)], -1)
    ours = layer(ones, start_index=int(positions[0])).numpy()
    their_error = np.abs(theirs - exact[0, :, 0]).max()
    our_error = np.abs(ours - exact).max()
    assert our_error <= 4 * rounding_floor(exact, "float32")
    assert their_error > 1000 * our_error


ALL_TYPES = {
    "linear": {"scaling_factor": 2.0},
    "dynamic": {"scaling_factor": 2.0},
    "yarn": {"scaling_factor": 8.0, "original_max_position_embeddings": 64, "mscale": 0.7,
             "mscale_all_dim": 1.0},
    "llama3": {"scaling_factor": 8.0, "original_max_position_embeddings": 64},
    "longrope": {"short_factor": [1.0, 1.5, 2.0, 3.0] * 2, "long_factor": [2.0, 4.0, 8.0, 16.0] * 2,
                 "original_max_position_embeddings": 4096, "max_position_embeddings": 16384},
    "dynamic_ntk": {"scaling_factor": 2.0, "max_position_embeddings": 64},
    "proportional": {"partial_rotary_factor": 0.5},
    "ntk": {"scaling_factor": 4.0},
    "partial": {"partial_rotary_factor": 0.5, "layout": "interleave"},
}  # fmt: skip


@pytest.mark.parametrize("rope_type", list(ALL_TYPES))
def test_decoding_one_token_at_a_time_has_the_full_pass_bits(rope_type):
    kwargs = ALL_TYPES[rope_type]
    layer = RotaryEmbedding(rope_type="linear" if rope_type == "partial" else rope_type, **kwargs)
    x = np.random.default_rng(5).normal(size=(2, 12, 3, 16)).astype("float32")
    start = 40  # the full pass stays within 64 positions, so dynamic NTK keeps its base
    full = layer(x, start_index=start).numpy()
    steps = [layer(x[:, t : t + 1], start_index=start + t).numpy() for t in range(12)]
    np.testing.assert_array_equal(np.concatenate(steps, axis=1), full)
    if rope_type != "dynamic_ntk":  # needs the extent while tracing (tested below)
        step = tf.function(lambda x, t: layer(x, start_index=t))
        traced = [step(x[:, t : t + 1], tf.constant(start + t)).numpy() for t in range(12)]
        np.testing.assert_array_equal(np.concatenate(traced, axis=1), full)


def test_longrope_switches_to_the_long_factors_where_transformers_does():
    layer = RotaryEmbedding(rope_type="longrope", **ALL_TYPES["longrope"])
    x = np.random.default_rng(6).normal(size=(1, 1, 2, 16)).astype("float32")
    base = rope_frequencies(16)
    short, long = base / np.array([1.0, 1.5, 2.0, 3.0] * 2), base / np.array([2.0, 4.0, 8.0, 16.0] * 2)
    scale = np.sqrt(1 + np.log(4) / np.log(4096))  # factor 16384 / 4096, transformers' default
    step = tf.function(lambda x, t: layer(x, start_index=t))
    # One token at position t: transformers' max(position_ids) + 1 = t + 1 > 4096 picks long.
    for t in (4090, 4094, 4095, 4096, 4100):
        frequencies = long if t + 1 > 4096 else short
        exact = reference_rotation(x, [[t]], frequencies) * scale
        eager = layer(x, start_index=t).numpy()
        assert np.abs(eager - exact).max() <= 4 * rounding_floor(exact, "float32"), t
        np.testing.assert_array_equal(step(x, tf.constant(t)).numpy(), eager)  # switched in the graph
    # A full pass reaching past 4096 rotates every position with the long factors.
    sequence = np.random.default_rng(7).normal(size=(1, 10, 2, 16)).astype("float32")
    exact = reference_rotation(sequence, np.arange(4090, 4100)[None], long) * scale
    full = layer(sequence, start_index=4090).numpy()
    assert np.abs(full - exact).max() <= 4 * rounding_floor(exact, "float32")
    positions = layer(sequence, positions=np.arange(4090, 4100)).numpy()
    np.testing.assert_array_equal(positions, full)


def test_dynamic_ntk_follows_the_extent_and_needs_it_while_tracing(tmp_path):
    layer = RotaryEmbedding(rope_type="dynamic_ntk", **ALL_TYPES["dynamic_ntk"])
    x = np.random.default_rng(8).normal(size=(1, 8, 2, 16)).astype("float32")
    config = {"model_type": "llama", "head_dim": 16, "max_position_embeddings": 64,
              "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}  # fmt: skip
    for start in (0, 56, 57, 1000):
        frequencies = transformers_rope(config, seq_len=start + 8)[0]
        exact = reference_rotation(x, np.arange(start, start + 8)[None], frequencies)
        assert np.abs(layer(x, start_index=start).numpy() - exact).max() <= 4 * rounding_floor(
            exact, "float32"
        )
    # Positions known while tracing: a Python start with a fixed length, or constants.
    fixed = tf.function(lambda x: layer(x, start_index=1000))
    np.testing.assert_array_equal(fixed(x).numpy(), layer(x, start_index=1000).numpy())
    with pytest.raises(ValueError, match=r"`rope_type='dynamic_ntk'` computes its frequencies"):
        tf.function(lambda x, t: layer(x, start_index=t))(x, tf.constant(3))
    queries = keras.Input((None, 2, 16))
    model = keras.Model(queries, layer(queries))
    with pytest.raises(ValueError, match=r"must be known when the call is traced"):
        model.export(str(tmp_path / "exported"), verbose=False)  # a None length


def test_attention_factor_can_be_set_or_turned_off():
    x = np.random.default_rng(9).normal(size=(1, 6, 2, 16))
    yarn = {"rope_type": "yarn", "scaling_factor": 40.0, "original_max_position_embeddings": 64}
    frequencies = transformers_rope(
        {"model_type": "llama", "head_dim": 16, "max_position_embeddings": 2560,
         "rope_scaling": {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 64}}
    )[0]  # fmt: skip
    plain = reference_rotation(x, np.arange(6)[None], frequencies)
    cases = [
        ({}, 0.1 * np.log(40.0) + 1),
        ({"attention_factor": 1.0}, 1.0),
        ({"attention_factor": 0.5}, 0.5),
        ({"mscale": 1.0, "mscale_all_dim": 1.0}, 1.0),  # DeepSeek-V3: the ratio is exactly 1
        ({"mscale": 0.707, "mscale_all_dim": 1.0}, (0.0707 * np.log(40.0) + 1) / (0.1 * np.log(40.0) + 1)),
        ({"mscale": 0.707}, 0.1 * np.log(40.0) + 1),  # both are needed, as in transformers
    ]
    for extra, scale in cases:
        layer = RotaryEmbedding(**yarn, **extra, dtype="float64")
        np.testing.assert_allclose(layer(x).numpy(), plain * scale, rtol=0, atol=1e-10, err_msg=str(extra))
    longrope = RotaryEmbedding(rope_type="longrope", **ALL_TYPES["longrope"], attention_factor=1.0)
    unscaled = longrope(x.astype("float32"), start_index=100).numpy()
    exact = reference_rotation(
        x, np.arange(100, 106)[None], rope_frequencies(16) / np.array([1.0, 1.5, 2.0, 3.0] * 2)
    )
    assert np.abs(unscaled - exact).max() <= 4 * rounding_floor(exact, "float32")


def test_scaling_factor_is_inferred_from_the_context_lengths():
    lengths = {"original_max_position_embeddings": 4096, "max_position_embeddings": 131072}
    inferred = RotaryEmbedding(rope_type="yarn", **lengths)
    explicit = RotaryEmbedding(rope_type="yarn", scaling_factor=32.0, original_max_position_embeddings=4096)
    np.testing.assert_array_equal(inferred.frequencies(64), explicit.frequencies(64))
    assert inferred.attention_scaling == explicit.attention_scaling == 0.1 * np.log(32) + 1
    np.testing.assert_allclose(
        RotaryEmbedding(rope_type="yarn").frequencies(64), rope_frequencies(64), rtol=1e-15
    )
    keras_hub_default = RotaryEmbedding()  # scaling_factor None: keras-hub's 1.0
    np.testing.assert_array_equal(
        keras_hub_default.frequencies(64), RotaryEmbedding(scaling_factor=1.0).frequencies(64)
    )


@pytest.mark.parametrize("layout", ["half", "interleave"])
def test_partial_rotation_passes_the_rest_through(layout):
    layer = RotaryEmbedding(partial_rotary_factor=0.25, layout=layout, max_wavelength=10000)
    x = np.random.default_rng(10).normal(size=(2, 9, 3, 32)).astype("float32")
    rotated = layer(x, start_index=70000).numpy()
    np.testing.assert_array_equal(rotated[..., 8:], x[..., 8:])
    exact = reference_partial_rotation(x, np.arange(70000, 70009)[None], rope_frequencies(8), layout)
    assert np.abs(rotated - exact).max() <= 4 * rounding_floor(exact, "float32")
    proportional = RotaryEmbedding(rope_type="proportional", partial_rotary_factor=0.25, layout=layout)
    spread = proportional(x, start_index=70000).numpy()
    frequencies = np.concatenate([rope_frequencies(32)[:4], np.zeros(12)])
    exact = reference_rotation(x, np.arange(70000, 70009)[None], frequencies, layout)
    assert np.abs(spread - exact).max() <= 4 * rounding_floor(exact, "float32")
    still = [column for column in range(32) if (column % 16 >= 4 if layout == "half" else column // 2 >= 4)]
    np.testing.assert_array_equal(spread[..., still], x[..., still])


def config_with(name, **changes):
    """A copy of a published config with some keys changed (None removes a key)."""
    config = json.loads(json.dumps(CONFIGS[name]))
    for path, value in changes.items():
        *parents, key = path.split("__")
        target = config
        for parent in parents:
            target = target[parent]
        if value is None:
            target.pop(key)
        else:
            target[key] = value
    return config


@pytest.mark.parametrize(
    "config, layer_type, message",
    [
        (config_with("llama-3.1-8b", rope_scaling__low_freq_factor=None), None, r"give `low_freq_factor`"),
        (config_with("phi-3-128k", rope_scaling__long_factor=None), None, r"must give `long_factor`"),
        (config_with("phi-3-128k", rope_scaling__long_factor=[1.0] * 47), None, r"`long_factor` must have"),
        (config_with("gemma-3-4b"), None, r"`layer_type` must be one of"),
        (config_with("gemma-4"), "local", r"`layer_type` must be one of"),
        (config_with("llama-3.1-8b"), "sliding_attention", r"`layer_type` must be None or a layer type"),
        (config_with("llama-3.1-8b", rope_scaling__type="linear"), None, r"gives `rope_type` twice"),
        (config_with("qwen3-8b", rope_parameters={"rope_type": "linear", "factor": 2.0},
                     rope_scaling={"rope_type": "linear", "factor": 4.0}), None, r"both `rope_parameters`"),
        (config_with("gpt-neox-20b", partial_rotary_factor=0.5), None, r"`partial_rotary_factor` twice"),
        (config_with("qwen3-8b", rope_scaling={"type": "mrope", "mrope_section": [16, 24, 20]}), None,
         r"`mrope_section` must add up to the 64"),
        (config_with("qwen3-8b", rope_scaling={"rope_type": "ntk-by-parts", "factor": 2.0}), None,
         r"`rope_type` must be one of"),
        # Without a model type no config class fills the keys in.
        (config_with("qwen3-8b", head_dim=None, hidden_size=None, model_type=None), None,
         r"rotary head size"),
        (config_with("llama-2-7b-dynamic", max_position_embeddings=None, model_type=None), None,
         r"`max_position_embeddings`"),
        (config_with("qwen3-8b", model_type="mamba"), None, r"`model_type` must be a model type of"),
        ({"text_config": {**CONFIGS["qwen3-8b"], "model_type": "mamba2"}, "model_type": "llava"}, None,
         r"Received: model_type='mamba2'"),
        (config_with("qwen3-8b", rope_scaling={"rope_type": "linear"}), None, r"must give `factor`"),
        # Phi slices `int(head_dim * partial_rotary_factor)` features, which an odd width breaks.
        ({**config_with("gpt-neox-20b", rotary_pct=0.27), "model_type": "phi"}, None,
         r"even, positive number of rotating features"),
    ],
    ids=[
        "llama3-key-missing", "longrope-list-missing", "longrope-list-length", "layer-type-needed",
        "layer-type-unknown", "layer-type-unwanted", "two-type-keys", "two-parameter-dicts",
        "two-partial-factors", "mrope-sections", "unknown-type", "no-head-size", "dynamic-without-context",
        "unknown-model-type", "unknown-language-model-type",
        "linear-without-factor", "odd-partial-width",
    ],
)  # fmt: skip
def test_missing_or_contradictory_config_keys_are_named(config, layer_type, message):
    with pytest.raises(ValueError, match=message):
        RotaryEmbedding.from_hf_config(config, layer_type=layer_type)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rope_type": "longrope"}, r"needs `short_factor` and `long_factor`"),
        ({"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0, 2.0]}, r"the same length"),
        ({"rope_type": "longrope", "short_factor": [1.0, -2.0], "long_factor": [1.0, 2.0]}, r"positive"),
        ({"short_factor": [1.0], "long_factor": [1.0]}, r"with rope_type='longrope'"),
        ({"rope_type": "dynamic_ntk", "scaling_factor": 2.0}, r"needs `max_position_embeddings`"),
        ({"partial_rotary_factor": 0}, r"`partial_rotary_factor` must be a finite number greater than 0"),
        ({"partial_rotary_factor": 1.5}, r"`partial_rotary_factor` must be in \(0, 1\]"),
        ({"rope_type": "llama3", "low_freq_factor": 4.0, "high_freq_factor": 1.0}, r"at least `low_freq"),
        ({"attention_factor": 0.0}, r"`attention_factor` must be a finite number greater than 0"),
        ({"mscale": -1.0}, r"`mscale` must be a finite number at least 0"),
        ({"max_position_embeddings": 0}, r"`max_position_embeddings` must be a positive integer"),
    ],
    ids=[
        "longrope-lists-missing", "longrope-lists-differ", "longrope-negative", "lists-without-longrope",
        "dynamic-ntk-context", "partial-zero", "partial-above-one", "llama3-boundaries", "attention-zero",
        "mscale-negative", "context-zero",
    ],
)  # fmt: skip
def test_bad_rope_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RotaryEmbedding(**kwargs)


def test_factor_lists_must_fit_the_head_when_it_is_known():
    layer = RotaryEmbedding(rope_type="longrope", short_factor=[1.0] * 4, long_factor=[2.0] * 4)
    with pytest.raises(ValueError, match=r"`short_factor` must have one entry per rotating feature pair: 8"):
        layer(np.zeros((1, 3, 16), "float32"))
    with pytest.raises(ValueError, match=r"`short_factor` must have one entry per rotating feature pair"):
        layer(keras.Input((None, 2, 16)))
    layer(np.zeros((1, 3, 8), "float32"))  # 4 pairs: fits


# One family of each rope type (and the partial, interleaved and per-layer-type readings).
SAVED_FAMILIES = [FAMILIES[i] for i in (0, 4, 7, 10, 13)]


@pytest.mark.parametrize("name, layer_type", SAVED_FAMILIES, ids=[FAMILY_IDS[i] for i in (0, 4, 7, 10, 13)])
def test_each_family_round_trips_through_its_config_and_a_keras_file(name, layer_type, tmp_path):
    layer = family_layer(name, layer_type, name="rope")
    config = layer.get_config()
    assert json.loads(json.dumps(config)) == config
    assert RotaryEmbedding.from_config(config).get_config() == config
    head_dim = transformers_rope(CONFIGS[name], layer_type)[2]
    queries = keras.Input((12, 2, head_dim))
    model = keras.Model(queries, layer(queries, start_index=5000))
    x = np.random.default_rng(11).normal(size=(1, 12, 2, head_dim)).astype("float32")
    model.save(tmp_path / "rope.keras")
    reloaded = keras.models.load_model(tmp_path / "rope.keras")
    assert reloaded.get_layer("rope").get_config() == config
    np.testing.assert_array_equal(reloaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_keras_hub_rotary_embedding_test_cases_pass():
    # The expectations of keras-hub's own `rotary_embedding_test.py` (keras_hub/src/layers/
    # modeling): values printed by transformers' LlamaLinearScalingRotaryEmbedding for
    # scaling_factor 2.0 at positions 0-2 and 5.0 at position 12 (all-ones queries of width 4).
    expected_linear = [[1.0, 1.0, 1.0, 1.0], [0.398157001, 0.994987488, 1.357008100, 1.004987478],
                       [-0.301168621, 0.989950180, 1.381773233, 1.009949803]]  # fmt: skip
    rotated = RotaryEmbedding(scaling_factor=2.0)(np.ones((1, 3, 2, 4), "float32")).numpy()
    np.testing.assert_allclose(rotated[0, :, 0], expected_linear, atol=1e-6)
    np.testing.assert_allclose(rotated[0, :, 1], expected_linear, atol=1e-6)
    cached = RotaryEmbedding(scaling_factor=5.0)(np.ones((1, 1, 2, 4), "float32"), start_index=12).numpy()
    np.testing.assert_allclose(
        cached[0, 0, 0], [-1.412856817, 0.975714266, -0.061930716, 1.023709655], atol=1e-6
    )
    # Position 3 of all-ones features of width 6, and the decoding, permuted-axes and float16
    # cases of the same file.
    sequence = RotaryEmbedding()(np.ones((1, 4, 6), "float32")).numpy()
    np.testing.assert_allclose(sequence[0, 3], [-1.1311, 0.8515, 0.9935, -0.8489, 1.1291, 1.0064], atol=1e-4)
    data = np.random.default_rng(12).uniform(size=(2, 3, 4)).astype("float32")
    layer = RotaryEmbedding(3)
    steps = np.concatenate([layer(data[:, t : t + 1], start_index=t).numpy() for t in range(3)], axis=1)
    np.testing.assert_allclose(steps, layer(data).numpy(), atol=1e-6)
    permuted = RotaryEmbedding(3, sequence_axis=-1, feature_axis=-2)(np.transpose(data, (0, 2, 1))).numpy()
    np.testing.assert_allclose(np.transpose(permuted, (0, 2, 1)), layer(data).numpy(), atol=1e-6)
    assert RotaryEmbedding(dtype="float16")(keras.Input((100, 32))).dtype == "float16"


EXPORTED = {
    "llama3": ({"rope_type": "llama3", "scaling_factor": 8.0, "original_max_position_embeddings": 64,
                "max_wavelength": 500000.0},
               {"rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}),
    "yarn-mscale": ({"rope_type": "yarn", "scaling_factor": 40.0, "original_max_position_embeddings": 64,
                     "mscale": 0.707, "mscale_all_dim": 1.0, "layout": "interleave"},
                    {"rope_scaling": {"rope_type": "yarn", "factor": 40.0, "mscale": 0.707,
                     "original_max_position_embeddings": 64, "mscale_all_dim": 1.0}}),
    "longrope": ({"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0] * 2,
                  "long_factor": [2.0, 4.0, 8.0, 16.0] * 2, "original_max_position_embeddings": 8,
                  "max_position_embeddings": 32},
                 {"rope_scaling": {"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0] * 2,
                  "long_factor": [2.0, 4.0, 8.0, 16.0] * 2, "original_max_position_embeddings": 8}}),
    "partial": ({"partial_rotary_factor": 0.5}, {"partial_rotary_factor": 0.5}),
}  # fmt: skip


def exported_model():
    queries, positions = keras.Input((None, 2, 16)), keras.Input((None,), dtype="int32")
    rotated = []
    for kind, (kwargs, _) in EXPORTED.items():
        layer = RotaryEmbedding(**kwargs, name=kind)
        rotated.append(layer(queries, positions=positions))
        if kind == "longrope":  # with `start_index` too: the switch follows the length
            rotated.append(layer(queries))
    return keras.Model([queries, positions], keras.ops.concatenate(rotated, axis=-1))


def exported_expectations(q, p):
    """Per layer: the rotation at the given positions (and for longrope, at 0 .. seq_len - 1)."""
    expected = []
    for kind, (kwargs, config) in EXPORTED.items():
        config = {"model_type": "llama", "head_dim": 16, "max_position_embeddings": 32, **config}
        for positions in (p, np.arange(q.shape[1])[None])[: 2 if kind == "longrope" else 1]:
            frequencies, scale, _ = transformers_rope(config, seq_len=int(positions.max()) + 1)
            expected.append(
                reference_partial_rotation(q, positions, frequencies, kwargs.get("layout", "half"), scale)
            )
    return np.concatenate(expected, axis=-1)


@pytest.mark.slow
def test_rope_types_export_to_saved_model_litert_and_onnx(tmp_path):
    # The converters are the test extra's; the rest of this file also runs at the floors.
    from test_runtimes import to_onnx_with_positions, to_tflite_with_positions

    # The longrope layer (pretraining context 8) switches inside each graph: the length-12
    # batch and the positions reaching 20 take the long factors, the length-5 batch the short.
    model = exported_model()
    rng = np.random.default_rng(13)
    cases = {}
    for length, last in ((5, 4), (12, 20)):
        q = rng.normal(size=(2, length, 2, 16)).astype("float32")
        p = np.stack([np.arange(length), np.minimum(np.arange(length) * 2, last)]).astype("int32")
        cases[length] = (q, p, exported_expectations(q, p))
    model.export(str(tmp_path / "exported"), verbose=False)
    served = serve_without_tf_posenc(
        tmp_path, {f"out{length}": [q, p] for length, (q, p, _) in cases.items()}
    )

    litert = to_tflite_with_positions(model, tmp_path, exported=tmp_path / "exported")
    specs = [tf.TensorSpec((None, None, 2, 16), tf.float32), tf.TensorSpec((None, None), tf.int32)]
    onnx = to_onnx_with_positions(model, specs)

    for length, (q, p, exact) in cases.items():
        bound = 4 * rounding_floor(exact, "float32")
        assert np.abs(served[f"out{length}"] - exact).max() <= bound
        assert np.abs(litert(q, p) - exact).max() <= bound
        assert np.abs(onnx(q, p) - exact).max() <= bound


def test_the_constructor_and_get_config_follow_the_registry():
    signature = inspect.signature(RotaryEmbedding.__init__).parameters
    names = [name for name in signature if name not in ("self", "kwargs")]
    assert names == list(_rope_types.ARGUMENTS)
    assert {name: signature[name].default for name in names} == {
        name: argument.default for name, argument in _rope_types.ARGUMENTS.items()
    }
    config = RotaryEmbedding(rope_type="longrope", short_factor=[1.0] * 4, long_factor=[2.0] * 4).get_config()
    assert {name: config[name] for name in names}["short_factor"] == [1.0] * 4
    assert set(names) <= set(config)


def test_a_new_rope_type_is_one_record(monkeypatch, tmp_path):
    """A type added to the registry alone is taken by the layer, its config round trip,
    `rotary_frequencies` and `from_hf_config` (by the transformers name the record gives)."""
    record = _rope_types.RopeType(
        lambda dim, options, seq_len: (
            1 / (3 * np.float64(options.max_wavelength) ** (np.arange(0, dim, 2) / dim))
        ),
        transformers_names=("thirds",),
        scale=lambda factor, options: 2.0,
    )
    monkeypatch.setitem(_rope_types.REGISTRY, "thirds", record)
    layer = RotaryEmbedding.from_hf_config(
        {"head_dim": 8, "rope_scaling": {"rope_type": "thirds", "factor": 2.0}}
    )
    assert (layer.rope_type, layer.attention_scaling) == ("thirds", 2.0)
    np.testing.assert_allclose(layer.frequencies(8), rope_frequencies(8) / 3, rtol=1e-15)
    x = np.random.default_rng(3).normal(size=(1, 5, 8)).astype("float32")
    expected = 2.0 * reference_rotation(x, np.arange(5)[None], rope_frequencies(8) / 3)
    np.testing.assert_allclose(layer(x).numpy(), expected, atol=ROTATION_BOUND * np.abs(expected).max())
    again = RotaryEmbedding.from_config(json.loads(json.dumps(layer.get_config())))
    np.testing.assert_array_equal(again(x).numpy(), layer(x).numpy())


@pytest.mark.parametrize("name", ["deepseek-v3", "kimi-k2"])
def test_deepseek_rotation_in_place_gives_transformers_scores(name):
    # transformers' `apply_rotary_pos_emb_interleave` (deepseek_v3) returns the rotated pairs
    # de-interleaved, `cat([x1 cos - x2 sin, x2 cos + x1 sin])`; the pairs stay in place here.
    layer = RotaryEmbedding.from_hf_config(CONFIGS[name])
    frequencies, scale, head_dim = transformers_rope(CONFIGS[name], None, seq_len=2**17 + 8)
    rng = np.random.default_rng(3)
    q, k = (rng.normal(size=(1, 8, 2, head_dim)).astype("float32") for _ in range(2))
    positions = np.arange(2**17, 2**17 + 8)
    angles = positions[:, None, None] * frequencies
    cos, sin = scale * np.cos(angles), scale * np.sin(angles)

    def transformers_interleave(x):
        x1, x2 = x[..., 0::2].astype(np.float64), x[..., 1::2].astype(np.float64)
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    theirs = np.einsum("bqhd,bkhd->bhqk", transformers_interleave(q), transformers_interleave(k))
    rotated_q, rotated_k = (layer(x, start_index=2**17).numpy().astype(np.float64) for x in (q, k))
    ours = np.einsum("bqhd,bkhd->bhqk", rotated_q, rotated_k)
    bound = 8 * rounding_floor(theirs, "float32") * head_dim
    assert np.abs(ours - theirs).max() <= bound


def test_llama4_scout_rotates_through_the_plan_as_from_hf_config():
    config = {**CONFIGS["llama-4-scout"], "num_hidden_layers": 4}
    plan = hf_attention_layers(config)
    rotating = [entry for entry in plan if entry.rope is not None]
    assert len(rotating) == 3 and [entry.chunk_size for entry in rotating] == [8192] * 3
    single = RotaryEmbedding.from_hf_config(config, name=rotating[0].rope.name)
    assert rotating[0].rope.get_config() == single.get_config()
    assert single.rope_type == "llama3" and single.layout == "interleave"
    frequencies = single.frequencies(128)
    plain = 500000.0 ** -(np.arange(0, 128, 2) / 128)
    long = 2 * np.pi / plain > 8192  # past original / low_freq_factor: divided by 16, no blend
    np.testing.assert_allclose(frequencies, np.where(long, plain / 16, plain), rtol=1e-15)


@pytest.mark.parametrize(
    "arguments, message",
    [({"rope_type": "longrope"}, r"`rope_type='longrope'` needs `short_factor` and `long_factor`"),
     ({"max_wavelength": -10000}, r"`max_wavelength` must be a finite number greater than 1"),
     ({"max_wavelength": float("nan")}, r"`max_wavelength` must be a finite number greater than 1"),
     ({"rope_type": "ntk-aware"}, r"`rope_type` must be one of \('linear'"),
     ({"scaling_factor": 0.5}, r"`scaling_factor` must be"),
     ({"rope_type": "longrope", "short_factor": [1.0] * 3, "long_factor": [2.0] * 3},
      r"`short_factor` must have one entry per rotating feature pair: 32"),
     ({"dim": 7}, r"`dim` must be even"),
     ({"dim": 0}, r"`dim` must be a positive integer"),
     ({"partial_rotary_factor": 0.5}, r"`dim` is the width that rotates"),
     ({"rope_type": "dynamic_ntk", "max_position_embeddings": 8, "seq_len": -1}, r"`seq_len` must be a non")],
    ids=["longrope-without-factors", "negative-base", "nan-base", "unknown-type", "factor-below-1",
         "factors-per-pair", "odd-dim", "zero-dim", "partial-not-proportional", "negative-seq-len"],
)  # fmt: skip
def test_rotary_frequencies_checks_what_the_layer_checks(arguments, message):
    arguments = {"dim": 64, **arguments}
    with pytest.raises(ValueError, match=message):
        _rope_types.rotary_frequencies(arguments.pop("dim"), **arguments)


@pytest.mark.parametrize(
    "arguments",
    [{}, {"rope_type": "yarn", "max_position_embeddings": 16384, "original_max_position_embeddings": 4096},
     {"rope_type": "llama3", "scaling_factor": 8.0, "original_max_position_embeddings": 8192},
     {"rope_type": "proportional", "partial_rotary_factor": 0.25}],
    ids=["plain", "yarn-inferred-factor", "llama3", "proportional"],
)  # fmt: skip
def test_rotary_frequencies_are_the_layers(arguments):
    # `scaling_factor=None` means what the layer's does: YaRN infers 16384 / 4096 = 4 here.
    expected = RotaryEmbedding(**arguments).frequencies(64)
    np.testing.assert_array_equal(_rope_types.rotary_frequencies(64, **arguments), expected)
    assert np.all(np.isfinite(expected))
