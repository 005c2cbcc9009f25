"""Every decoder of transformers 5.25 whose language model rotates queries and keys, read from its
config class's defaults: its rotation is the one transformers' own attention modules apply, its
plan has their self-attention layers, softmax scales and windows, or it is refused by the
mechanism it needs. The printed values come from `tools/print_transformers.py` (`transformers_5_25.json`)."""

import json
import pathlib

import keras
import numpy as np
import pytest
from fingerprints import OVERRIDES, ROPE_KEYS, fixed_vectors

from tf_posenc import (
    RotaryEmbedding,
    _hf_config,
    _hf_module_defaults,
    attention_temperature,
    hf_attention_layers,
)
from tf_posenc._rows import row_error_bound

PRINTED = json.loads((pathlib.Path(__file__).parent / "transformers_5_25.json").read_text())
TYPES = PRINTED["types"]
# Their code returns the rotated features de-interleaved, `[evens | odds]`
# (`apply_rotary_pos_emb_interleave`): a fixed order of the features, the same for queries and
# keys, so the scores are those of interleaved pairs rotated in place.
DEINTERLEAVED = {
    "axk1", "axk2", "bailing_hybrid", "deepseek_v3", "deepseek_v32", "dots3_note_text", "glm4_moe_lite",
    "glm_moe_dsa", "hy_v4", "hy_v4_vl_text", "longcat_flash", "mistral4", "youtu",
}  # fmt: skip
# Zaya computes queries and keys with a causal convolution over time: tokens at different
# positions differ before the rotation, which the printer's identical tokens assume they do not.
NOT_COMPARABLE = {"zaya"}
# The float64 run of transformers' modules agrees within 1e-11 but where a module's frequencies
# are float32 whatever it runs in: GPT-J's and CodeGen's `10000 ** (arange(int64) / dim)` (torch's
# default float dtype), 6.1e-7 off in the dots. Within the 4e-6 the rotation is held to.
BOUNDS = {"gptj": 4e-6, "codegen": 4e-6}
# Layers whose attention module rotates when given rows, and whose decoder gives it none
# (LaraMini's full-attention layers): the rotation is compared, and the plan has none.
ROWS_WITHHELD = {"lara_mini": "full_attention"}


def config_of(text_type):
    """The config class's defaults, with the printer's overrides: rope parameters inside
    `rope_parameters`, the other keys at the top, as transformers 5 keeps them."""
    config = {"model_type": text_type}
    overrides = OVERRIDES.get(text_type, {})
    rope = {key: value for key, value in overrides.items() if key in ROPE_KEYS}
    if rope:
        config["rope_parameters"] = {**_hf_config.read(config)["rope_parameters"], **rope}
    config.update({key: value for key, value in overrides.items() if key not in ROPE_KEYS})
    return config


def rotate(rope, vectors, positions):
    """`rope(vectors, positions=positions)` restated in float64 from the layer's own frequencies,
    layout, rotated width, M-RoPE sections and cos/sin factor: `vectors` `(n, dim)`, positions
    `(n,)` or `(3, n)`."""
    dim = vectors.shape[-1]
    width = rope._rotated_width(dim)
    frequencies = rope.frequencies(dim, seq_len=int(np.max(positions)) + 1)
    if rope.mrope_section is not None:
        positions = np.broadcast_to(positions, (len(rope.mrope_section), vectors.shape[0]))
        angles = positions[rope.mrope_axes(len(frequencies))].T * frequencies
    else:
        angles = np.asarray(positions, np.float64)[:, None] * frequencies
    cos, sin = np.cos(angles) * rope.attention_scaling, np.sin(angles) * rope.attention_scaling
    first, second = (
        (slice(0, width // 2), slice(width // 2, width))
        if rope.layout == "half"
        else (slice(0, width, 2), slice(1, width, 2))
    )
    rotated = vectors.copy()
    rotated[:, first] = vectors[:, first] * cos - vectors[:, second] * sin
    rotated[:, second] = vectors[:, second] * cos + vectors[:, first] * sin
    return rotated


def transformers_rotation(text_type, rope, dim, positions, nope):
    """What the printer measured, `R(p) R(0)^-1` applied to its vector, for the rope: the first
    `nope` features of a latent-attention head pass through; a de-interleaving model's features
    are `[evens | odds]` of the pairs it rotates."""
    vector, units = fixed_vectors(dim)
    part = np.broadcast_to(vector[nope:], (positions.shape[-1], dim - nope)).copy()
    width = rope._rotated_width(dim - nope)
    modules_of = _hf_module_defaults.ALIASES.get(text_type, text_type)  # the type whose code runs
    deinterleaved = rope.layout == "interleave" and modules_of in DEINTERLEAVED
    if deinterleaved:
        inner = part.copy()
        inner[:, 0:width:2], inner[:, 1:width:2] = part[:, : width // 2], part[:, width // 2 : width]
        part = inner
    at_zero = rotate(rope, part, np.zeros_like(positions))
    rotated = rotate(rope, part * (part / at_zero), positions)  # R(0)^-1 first: the cos/sin factor
    if deinterleaved:
        rotated = np.concatenate([rotated[:, 0:width:2], rotated[:, 1:width:2], rotated[:, width:]], axis=1)
    whole = np.concatenate([np.broadcast_to(vector[:nope], (rotated.shape[0], nope)), rotated], axis=1)
    return whole @ units.T


ROTATIONS = [
    (text_type, key)
    for text_type, entry in sorted(TYPES.items())
    for key, printed in entry.get("rotations", {}).items()
    if "error" not in printed and text_type not in NOT_COMPARABLE and text_type not in _hf_config.MECHANISMS
]


@pytest.mark.parametrize("text_type, key", ROTATIONS, ids=[f"{t}-{k.split(':')[1]}" for t, k in ROTATIONS])
def test_the_rotation_is_transformers_attentions(text_type, key):
    printed = TYPES[text_type]["rotations"][key]
    config = config_of(text_type)
    read = _hf_config.read(config)
    layer_type = printed["layer_type"]
    if layer_type not in _hf_config._nested_layer_types(read, _hf_config._rope_parameters(read)):
        layer_type = None  # every layer rotates alike
    try:
        rope = RotaryEmbedding.from_hf_config(config, layer_type=layer_type, dtype="float64")
    except ValueError as error:  # a layer type without rope parameters (Ergo's and Beam's full layers)
        assert "have no rotary embedding" in str(error), error
        rope = None
    positions = np.array(printed["positions"][1:])
    if printed["mrope"]:
        positions = np.stack([positions, positions * 2 + 1, positions * 3 + 2])
    rotates, temperature = rope is not None, None
    if text_type not in _hf_config.PLAN_MECHANISMS:
        # The plan's first layer of this type: whether it rotates, and its query temperature.
        plan = hf_attention_layers(config)
        kinds = _hf_config.layer_types_of(read) or ["full_attention"] * len(plan)
        kind = printed["layer_type"] or "full_attention"
        assert kind in kinds, (kind, sorted(set(kinds)))
        entry = plan[kinds.index(kind)]
        assert rope is not None or entry.rope is None
        rotates, temperature = entry.rope is not None, entry.temperature
        if ROWS_WITHHELD.get(text_type) == kind:
            assert not rotates
            rotates = True
    for name in ("q", "k"):
        dim = printed[name]["dim"]
        rope_dim = read.get("qk_rope_head_dim")
        nope = dim - rope_dim if rope_dim and dim != rope_dim else 0
        if rotates:
            ours = transformers_rotation(text_type, rope, dim, positions, nope)
        else:  # a layer without rotation: the identity
            vector, units = fixed_vectors(dim)
            ours = np.broadcast_to(units @ vector, (positions.shape[-1], 3))
        if name == "q" and temperature is not None:  # Ministral 3's, Mistral 4's and Llama 4's scaled queries
            # Llama 4 scales by the cache's slots (the printer's tokens sit at slots 0, 1, ...), the
            # others by the positions.
            at = np.arange(1, positions.shape[-1] + 1) if temperature.slots else positions
            floor_scale, attn_scale, offset, _ = temperature
            scale = attention_temperature(at, floor_scale, attn_scale, offset)
            ours = ours * keras.ops.convert_to_numpy(scale)[:, None]
        assert np.abs(ours - np.array(printed[name]["dots"])).max() <= BOUNDS.get(text_type, 1e-9), name


FLOAT32_ROWS = [
    (text_type, key)
    for text_type, entries in sorted(PRINTED["float32_rows"].items())
    if text_type != "source" and text_type not in _hf_config.MECHANISMS
    for key in entries
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "text_type, key", FLOAT32_ROWS, ids=[f"{t}-{k.split(':')[1]}" for t, k in FLOAT32_ROWS]
)
def test_the_float32_rows_are_transformers_float32_rows(text_type, key):
    # Each rope's float32 rows against transformers' rotary module run as it ships, in float32,
    # at positions 0-63 (M-RoPE: three different rows of ids within 0-63): printed at 63, the
    # largest angle, and over 0-63 by its float32 rows' printed distance from its float64 rows,
    # which ours equal (`test_the_rotation_is_transformers_attentions`).
    printed = PRINTED["float32_rows"][text_type][key]
    layer_type = TYPES[text_type]["rotations"][key]["layer_type"]
    config = config_of(text_type)
    read = _hf_config.read(config)
    if layer_type not in _hf_config._nested_layer_types(read, _hf_config._rope_parameters(read)):
        layer_type = None
    rope = RotaryEmbedding.from_hf_config(config, layer_type=layer_type)
    # Op by op: the ops a compiled eager call runs, without tracing one per configuration.
    rope._compiled_in_eager_calls = lambda: False
    # The head the module rotates, as the attention module has it (Gemma 4's global heads), or
    # the rotating part of a latent head.
    dim = TYPES[text_type]["rotations"][key]["q"]["dim"]
    if read.get("qk_rope_head_dim"):
        dim = read["qk_rope_head_dim"]
    positions = np.arange(64)
    if TYPES[text_type]["rotations"][key]["mrope"]:
        positions = np.stack([positions, (positions * 2 + 1) % 64, (positions * 3 + 2) % 64])
    given = positions[:, None, :] if positions.ndim == 2 else positions
    cos, sin = (
        keras.ops.convert_to_numpy(rows)[0].astype(np.float64)
        for rows in rope.rows(np.zeros((1, 64, 1, dim), "float32"), positions=given)
    )
    width = cos.shape[-1]
    pairs = slice(0, width // 2) if rope.layout == "half" else slice(0, width, 2)
    assert np.abs(cos[63, pairs] - printed["cos_63"]).max() <= 1e-5
    assert np.abs(sin[63, pairs] - printed["sin_63"]).max() <= 1e-5
    # Over 0-63: ours within the float32 row bound of the exact rows, transformers' float32 rows
    # within their printed distance of them.
    frequencies = rope.frequencies(dim)
    if rope.mrope_section is not None:
        angles = positions[rope.mrope_axes(len(frequencies))].T * frequencies
    else:
        angles = positions[:, None] * frequencies
    ours = max(
        np.abs(cos[:, pairs] - np.cos(angles) * rope.attention_scaling).max(),
        np.abs(sin[:, pairs] - np.sin(angles) * rope.attention_scaling).max(),
    )
    assert ours <= row_error_bound("float32") * max(1.0, rope.attention_scaling)
    assert ours + printed["error_0_63"] <= 1e-5


LAYER_TYPE_CASES = [
    (model_type, case, kinds)
    for model_type, cases in PRINTED["layer_types"].items()
    if model_type != "source"
    for case, kinds in cases
]


@pytest.mark.parametrize(
    "model_type, case, kinds",
    LAYER_TYPE_CASES,
    ids=[f"{t}-{'-'.join(f'{k}={v}' for k, v in c.items())}" for t, c, _ in LAYER_TYPE_CASES],
)
def test_layer_types_are_derived_as_the_config_class_derives_them(model_type, case, kinds):
    # Other layer counts and other values of the keys each class's rule reads (Bamba's
    # `attn_layer_indices`, Qwen3-Next's `full_attention_interval`, ...), against what the config
    # class derives (printed).
    read = _hf_config.read({"model_type": model_type, **case})
    assert _hf_config.layer_types_of(read) == kinds


def test_a_layer_type_rule_refuses_an_interval_that_is_not_positive():
    config = {"model_type": "qwen3_next", "full_attention_interval": 0}
    with pytest.raises(ValueError, match=r"`full_attention_interval` must be a positive integer. Received: "):
        hf_attention_layers(config)
    # A derived hybrid's attention layers rotate, its linear ones have no positions (Bamba-9B's).
    plan = hf_attention_layers({"model_type": "bamba", "attn_layer_indices": [9, 18, 27]})
    assert [index for index, entry in enumerate(plan) if entry.rope is not None] == [9, 18, 27]


PLANS = [
    text_type
    for text_type, entry in sorted(TYPES.items())
    if entry.get("plan")
    and text_type not in _hf_config.MECHANISMS
    and text_type not in _hf_config.PLAN_MECHANISMS
]


@pytest.mark.parametrize("text_type", PLANS)
def test_the_plan_has_transformers_self_attention_layers_and_scales(text_type):
    printed = TYPES[text_type]["plan"]
    plan = hf_attention_layers(config_of(text_type))
    assert [entry.self_attention for entry in plan] == [row[0] for row in printed]
    for entry, (self_attention, scaling) in zip(plan, printed, strict=True):
        if self_attention and scaling is not None:
            assert entry.scaling == pytest.approx(scaling, rel=1e-12)
        if not self_attention:
            assert entry.rope is None and entry.scaling is None
    # Each layer's window as its attention module holds it, where the module holds one.
    windows = TYPES[text_type].get("windows", [])
    for index, (entry, window) in enumerate(zip(plan, windows, strict=False)):
        if entry.self_attention and window != "absent":
            assert entry.sliding_window == window, (index, entry.sliding_window, window)


def test_every_rotary_decoder_is_read_or_refused_by_the_mechanism_it_needs():
    read, refused = set(), {}
    for text_type in TYPES:
        try:
            RotaryEmbedding.from_hf_config(config_of(text_type))
            read.add(text_type)
        except ValueError as error:
            refused[text_type] = str(error)
    for text_type, message in refused.items():
        mechanism = _hf_config.MECHANISMS.get(text_type)
        if mechanism is not None:
            assert mechanism in message and "need a mechanism" in message, text_type
        else:  # a model whose config turns positions off, or whose layers rotate by layer type
            assert "rotates no query or key" in message or "`layer_type` must be one of" in message, message
    # (The others are not decoders: `test_hf_encoders.py`.)
    assert set(_hf_config.MECHANISMS) & set(TYPES) <= set(refused)
    # Qwen3-Omni's config class's own defaults have 73-wide heads, which transformers' rotation
    # refuses too (the printer and `config_of` give it its checkpoints' 128).
    with pytest.raises(ValueError, match="even, positive number of rotating features"):
        RotaryEmbedding.from_hf_config({"model_type": "qwen3_omni_moe_text"})
    # Each multimodal model type reads as its language model.
    for text_type, entry in TYPES.items():
        for parent in entry["parents"] if text_type not in _hf_config.MECHANISMS else ():
            # (A type that runs another's modules, EXAONE 3 Llama's, reads as that type.)
            modules_of = _hf_module_defaults.ALIASES.get(text_type)
            assert _hf_config.read({"model_type": parent})["model_type"] in (text_type, parent, modules_of)
    assert len(read) + len(refused) == len(TYPES)


def test_a_config_that_turns_positions_off_rotates_nothing():
    for config, reason in (
        ({"model_type": "granitemoehybrid"}, "position_embedding_type"),
        ({"model_type": "zamba2"}, "use_mem_rope"),
        ({"model_type": "falcon", "alibi": True}, "AlibiBias"),
        ({"model_type": "glm5_next_text"}, "no rope parameters"),
    ):
        with pytest.raises(ValueError, match=reason):
            RotaryEmbedding.from_hf_config(config)
        assert all(entry.rope is None for entry in hf_attention_layers(config))
    # The same model types with positions on rotate.
    assert (
        RotaryEmbedding.from_hf_config({"model_type": "zamba2", "use_mem_rope": True}).max_wavelength
        == 10000.0
    )
    assert (
        RotaryEmbedding.from_hf_config(
            {"model_type": "granitemoehybrid", "position_embedding_type": "rope"}
        ).max_wavelength
        == 10000.0
    )


@pytest.mark.parametrize(
    "text_type, key",
    [
        ("glm4v_text", "Glm4vTextAttention:None"),  # M-RoPE sections over interleaved pairs of half a head
        ("qwen3_5_text", "Qwen3_5Attention:full_attention"),  # interleaved M-RoPE of a quarter of a head
        ("deepseek_v3", "DeepseekV3Attention:None"),  # the interleaved last features of a latent head
        ("gptj", "GPTJAttention:None"),  # `rotary_dim` interleaved features
        ("glm4_moe", "Glm4MoeAttention:None"),  # 21 of 42 features: 22 rotate at exponents over 21
    ],
)
def test_the_layer_rotates_as_the_restatement(text_type, key):
    # The restatement above, against the layer itself (float64), on the printed positions.
    printed = TYPES[text_type]["rotations"][key]
    rope = RotaryEmbedding.from_hf_config(config_of(text_type), dtype="float64")
    dim = printed["q"]["dim"]
    nope = dim - rope._rotated_width(dim) if text_type == "deepseek_v3" else 0
    positions = np.array(printed["positions"][1:])
    if printed["mrope"]:
        positions = np.stack([positions, positions * 2 + 1, positions * 3 + 2])
    vectors = np.random.default_rng(1).uniform(-1, 1, (positions.shape[-1], dim - nope))
    given = positions[:, None, :] if positions.ndim == 2 else positions
    layer = keras.ops.convert_to_numpy(rope(vectors[None, :, None, :], positions=given))[0, :, 0]
    assert np.abs(layer - rotate(rope, vectors, positions)).max() <= row_error_bound("float64")


def test_deepseek_v4s_output_turns_back_as_transformers_turns_it():
    # DeepSeek-V4's values are its keys, rotated: its attention output is turned back at the
    # query's position, `apply_rotary_pos_emb(attn_output, cos, -sin)`, on the last
    # `qk_rope_head_dim` features of a head: `rope(output, rows=(cos, -sin))` with its rows.
    printed = PRINTED["deepseek_v4_output"]
    positions = np.array(printed["positions"])
    head_dim, rope_dim = 512, 64
    part = np.broadcast_to(fixed_vectors(head_dim)[0][-rope_dim:], (1, len(positions), 1, rope_dim))
    for label, base in (("main", 10000.0), ("compress", 160000.0)):
        rope = RotaryEmbedding.from_hf_config(
            {"model_type": "deepseek_v4"}, layer_type=label, dtype="float64"
        )
        assert (rope.max_wavelength, rope.layout) == (base, "interleave")
        cos, sin = rope.rows(part, positions=positions)
        undone = keras.ops.convert_to_numpy(rope(part, rows=(cos, -sin)))[0, :, 0]
        # The float64 restatement of its `apply_rotary_pos_emb` (interleaved pairs) with -sin.
        angles = positions[:, None] * base ** (-np.arange(0, rope_dim, 2) / rope_dim)
        even, odd = part[0, :, 0, 0::2], part[0, :, 0, 1::2]
        exact = np.empty_like(part[0, :, 0])
        exact[:, 0::2] = even * np.cos(angles) + odd * np.sin(angles)
        exact[:, 1::2] = odd * np.cos(angles) - even * np.sin(angles)
        bound = 4 * row_error_bound("float64") * np.abs(part).max()
        assert np.abs(undone - exact).max() <= bound
        assert np.abs(undone - np.array(printed[label])).max() <= bound  # transformers' own, float64
        # Turning back undoes the keys' (and values') rotation.
        turned = rope(part, positions=positions)
        back = keras.ops.convert_to_numpy(rope(turned, rows=(cos, -sin)))
        assert np.abs(back - part).max() <= bound


def test_group_query_attention_refuses_layers_it_is_not():
    from tf_posenc import GroupQueryAttention

    qwen3_next = {
        "model_type": "qwen3_next",
        "num_hidden_layers": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    }
    with pytest.raises(ValueError, match="Layer 0 is not self-attention"):
        GroupQueryAttention.from_hf_config(qwen3_next, 0)
    assert GroupQueryAttention.from_hf_config(qwen3_next, 3).rope.partial_rotary_factor == 0.25
    with pytest.raises(ValueError, match="latent attention"):
        GroupQueryAttention.from_hf_config({"model_type": "deepseek_v3", "num_hidden_layers": 2}, 0)


# Their config classes set `head_dim = hidden_size // num_attention_heads` when a config gives
# none (transformers 5.25): the class default's 64 or 128 is not a default.
@pytest.mark.parametrize(
    "model_type", ["falcon", "moshi", "nemotron", "arcee", "diffllama", "recurrent_gemma"]
)
def test_a_derived_head_dim_follows_the_configs_sizes(model_type):
    sized = {"model_type": model_type, "hidden_size": 96, "num_attention_heads": 4, "num_key_value_heads": 4}
    assert _hf_config._head_dim(_hf_config.read(sized), None) == 24
    attending = [
        entry for entry in hf_attention_layers({**sized, "num_hidden_layers": 3}) if entry.self_attention
    ]
    assert attending[0].scaling == pytest.approx(24**-0.5)


# Which layers of a six-layer Cohere2-MoE rotate, as transformers 5.25.0's `Cohere2MoeAttention`
# builds them (`sliding_window is not None or force_rope`, printed for these configs): a dense
# full layer rotates while `prefix_dense_sliding_window_pattern` is 1.
COHERE2_MOE_ROTATING = [
    ({"first_k_dense_replace": 2}, [True, True, True, True, True, False]),
    (
        {"first_k_dense_replace": 2, "prefix_dense_sliding_window_pattern": 2},
        [True, False, True, True, True, False],
    ),
    ({"mlp_layer_types": ["sparse", "sparse", "sparse", "dense", "sparse", "sparse"]}, [True] * 6),
    ({}, [True, True, True, False, True, True]),
]


@pytest.mark.parametrize(
    "given, rotating",
    COHERE2_MOE_ROTATING,
    ids=["dense-prefix", "prefix-pattern-2", "dense-full-layer", "default"],
)
def test_cohere2_moes_dense_full_layers_rotate_as_its_modules_do(given, rotating):
    plan = hf_attention_layers({"model_type": "cohere2_moe", "num_hidden_layers": 6, **given})
    assert [layer.rope is not None for layer in plan] == rotating
