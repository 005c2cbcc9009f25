"""Latent attention (DeepSeek's MLA) against transformers 5.25's own modules: every model type with
`kv_lora_rank` (`tests/transformers_latent_attention_5_25.json`, printed by `print_transformers.py
latent` in float64 with `fingerprints.module_weights` under the modules' state-dict names), built
by `MultiHeadLatentAttention.from_hf_config` from the config as transformers saves it, loaded by
`load_hf_attention_weights` and called on the same hidden states at the same positions; the
latent cache against the full pass; the layer's own checks, saving and reloading."""

import json
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf
from fingerprints import MODULE_POSITIONS, module_input, module_weights

import tf_posenc
from tf_posenc import _hf_latent, _hf_latent_defaults

PRINTED = json.loads((pathlib.Path(__file__).parent / "transformers_latent_attention_5_25.json").read_text())
TYPES = PRINTED["types"]
PREFIX = "model.layers.0.self_attn."
# The model types refused, with the words of the mechanism their error names.
REFUSED = {
    "glm5_next_text": "pooled key",
    "mistral_large4_text": "alpha",
}
# The quick suite's cases: the plain module, the indexer, the window with a gate and scaled latents,
# sinks with a value gate, and a model whose latent attention rotates nothing.
QUICK = {"deepseek_v3", "deepseek_v32", "dots3_note_text", "hy_v4", "kimi_linear"}
CASES = [
    pytest.param(
        name, label, id=f"{name}-{label.split(':')[1]}", marks=() if name in QUICK else pytest.mark.slow
    )
    for name, entry in sorted(TYPES.items())
    if entry.get("model_type", name) not in REFUSED
    for label, case in entry.get("layers", {}).items()
]


def build(name, label, **kwargs):
    """The printed case's layer as a user builds it, its weights and the printed output."""
    entry = TYPES[name]
    case = entry["layers"][label]
    layer = tf_posenc.MultiHeadLatentAttention.from_hf_config(
        entry["config"], case["layer_index"], **{"dtype": "float64", **kwargs}
    )
    weights = {PREFIX + key: value for key, value in module_weights(case["shapes"]).items()}
    return layer, weights, case


def test_every_latent_type_is_read_or_refused_by_its_mechanism():
    # The printer finds the types (every config class with `kv_lora_rank`); 17 of 19 are read.
    assert len(_hf_latent_defaults.TYPES) == 19
    read = {TYPES[name]["model_type"] for name, *_ in (case.values for case in CASES)}
    assert read | set(REFUSED) == set(_hf_latent_defaults.TYPES)
    assert len(read) == 17
    for model_type, words in REFUSED.items():
        index = next(iter(TYPES[model_type]["layers"].values()))["layer_index"]
        with pytest.raises(ValueError, match=words):
            tf_posenc.MultiHeadLatentAttention.from_hf_config(TYPES[model_type]["config"], index)


@pytest.mark.parametrize(("name", "label"), CASES)
def test_latent_attention_module_matches_transformers(name, label):
    """Within 1e-9 of the largest output, in float64, on the query rows whose keys transformers'
    indexer picks unambiguously (its `topk` orders tied scores as its kernel happens to)."""
    layer, weights, case = build(name, label)
    tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
    hidden = module_input(TYPES[name]["config"]["hidden_size"])
    positions = np.asarray([MODULE_POSITIONS], "int32")
    output = keras.ops.convert_to_numpy(
        layer(hidden, hidden, query_positions=positions, key_positions=positions, use_causal_mask=True)
    )
    expected = np.asarray(case["output"]).reshape(output.shape)
    rows = [row for row in range(output.shape[1]) if row not in case.get("ambiguous_rows", [])]
    assert len(rows) >= output.shape[1] - 1
    error = np.abs(output[:, rows] - expected[:, rows]).max() / np.abs(expected).max()
    assert error < 1e-9, error


def test_every_key_a_latent_module_reads_is_accounted_for():
    # A key a module of transformers' next release reads, and this file does not know, is a
    # refusal (below), not a wrong number: every key read today is read or explained.
    known = set(_hf_latent._READS) | set(_hf_latent._MECHANISMS)
    for model_type, row in _hf_latent_defaults.TYPES.items():
        assert set(row["reads"]) <= known, (model_type, set(row["reads"]) - known)


def test_an_unknown_key_or_weight_of_a_module_is_refused_by_name(monkeypatch):
    config = TYPES["deepseek_v3"]["config"]
    row = _hf_latent_defaults.TYPES["deepseek_v3"]
    monkeypatch.setitem(row, "reads", [*row["reads"], "attention_temperature_scale"])
    with pytest.raises(ValueError, match="attention_temperature_scale"):
        tf_posenc.MultiHeadLatentAttention.from_hf_config(config, 0)
    monkeypatch.undo()
    layers = {label: dict(facts) for label, facts in row["layers"].items()}
    for facts in layers.values():
        facts["parameters"] = [*facts["parameters"], "q_scale.weight"]
    monkeypatch.setitem(row, "layers", layers)
    with pytest.raises(ValueError, match="q_scale.weight"):
        tf_posenc.MultiHeadLatentAttention.from_hf_config(config, 0)


def test_layers_that_reuse_another_layers_selection_are_refused():
    config = dict(TYPES["glm_moe_dsa"]["config"])
    config["indexer_types"] = ["full", "shared"] + ["full"] * (config["num_hidden_layers"] - 2)
    tf_posenc.MultiHeadLatentAttention.from_hf_config(config, 0)
    with pytest.raises(ValueError, match=r"indexer_types\[1\]='shared'"):
        tf_posenc.MultiHeadLatentAttention.from_hf_config(config, 1)


def test_the_loader_refuses_a_missing_or_an_unused_weight():
    layer, weights, _ = build("deepseek_v3", "DeepseekV3Attention:None")
    extra = {**weights, PREFIX + "q_norm.weight": np.ones(4)}
    with pytest.raises(ValueError, match="q_norm.weight"):
        tf_posenc.load_hf_attention_weights(layer, extra, PREFIX)
    missing = {key: value for key, value in weights.items() if "kv_a_layernorm" not in key}
    with pytest.raises(ValueError, match="kv_a_layernorm.weight"):
        tf_posenc.load_hf_attention_weights(layer, missing, PREFIX)


def full_and_cached(layer, hidden, prompt, dtype):
    """The full causal pass, and a prompt pass then single-token steps through the latent cache."""
    full = keras.ops.convert_to_numpy(layer(hidden, hidden, use_causal_mask=True))
    cache = np.zeros((hidden.shape[0], hidden.shape[1], layer.cache_width), dtype)
    outputs = []
    output, cache = layer(hidden[:, :prompt], hidden[:, :prompt], cache=cache, cache_update_index=0,
                          use_causal_mask=True)  # fmt: skip
    outputs.append(keras.ops.convert_to_numpy(output))
    for index in range(prompt, hidden.shape[1]):
        step = hidden[:, index : index + 1]
        output, cache = layer(step, step, cache=cache, cache_update_index=index, use_causal_mask=True)
        outputs.append(keras.ops.convert_to_numpy(output))
    return full, np.concatenate(outputs, axis=1)


@pytest.mark.parametrize(
    ("name", "label"),
    [
        pytest.param("deepseek_v3+yarn", "DeepseekV3Attention:None", marks=pytest.mark.slow),
        ("deepseek_v32", "DeepseekV32Attention:indexed_attention"),
        pytest.param("dots3_note_text", "Dots3NoteTextAttention:sliding_attention", marks=pytest.mark.slow),
        pytest.param("hy_v4", "HYV4Attention:indexed_attention", marks=pytest.mark.slow),
    ],
    ids=["yarn", "indexer", "window-gate-scaled", "sinks-gate-indexer"],
)
def test_a_prompt_then_single_steps_through_the_latent_cache_equal_the_full_pass(name, label):
    """Absorbed (cache) against expanded (no cache): equal in float64, and within 1e-6 in float32
    for a prompt of 3 and 6 single steps."""
    layer, weights, _ = build(name, label)
    tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
    hidden = np.random.default_rng(3).standard_normal((2, 9, TYPES[name]["config"]["hidden_size"]))
    full, cached = full_and_cached(layer, hidden, 3, "float64")
    assert np.abs(full - cached).max() < 1e-12 * np.abs(full).max()
    single, weights32, _ = build(name, label, dtype="float32")
    tf_posenc.load_hf_attention_weights(single, weights32, PREFIX)
    full, cached = full_and_cached(single, hidden.astype("float32"), 3, "float32")
    assert np.abs(full - cached).max() < 1e-6 * max(1.0, np.abs(full).max())


def test_the_cache_holds_the_latent_the_shared_key_and_the_indexers_key():
    plain, _, _ = build("deepseek_v3", "DeepseekV3Attention:None")
    indexed, _, _ = build("deepseek_v32", "DeepseekV32Attention:indexed_attention")
    assert plain.cache_width == 16 + 4
    assert indexed.cache_width == 16 + 4 + 8
    # DeepSeek-V3's sizes: 576 numbers a token, against 128 heads' keys and values of 192 and 128.
    v3 = tf_posenc.MultiHeadLatentAttention(128, 512, 128, 64, 128, q_lora_rank=1536)
    assert v3.cache_width == 576 and 128 * (192 + 128) // v3.cache_width == 71


def test_positions_and_left_padding_follow_the_positions():
    """Left padding shifts the positions: the padded row's real tokens give the unpadded output."""
    layer, weights, _ = build("deepseek_v3", "DeepseekV3Attention:None")
    tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
    hidden = np.random.default_rng(4).standard_normal((1, 5, 32))
    alone = keras.ops.convert_to_numpy(layer(hidden, hidden, use_causal_mask=True))
    padded = np.concatenate([np.zeros((1, 2, 32)), hidden], axis=1)
    positions = np.asarray([[0, 0, 0, 1, 2, 3, 4]])
    real = np.asarray([[False, False, True, True, True, True, True]])
    mask = real[:, None, :] & real[:, :, None] | np.eye(7, dtype=bool)[None]
    output = keras.ops.convert_to_numpy(
        layer(padded, padded, query_positions=positions, key_positions=positions, use_causal_mask=True,
              attention_mask=mask)
    )  # fmt: skip
    assert np.abs(output[:, 2:] - alone).max() < 1e-12


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"qk_rope_head_dim": 5}, "`qk_rope_head_dim` must be even"),
        (
            {"rope": tf_posenc.RotaryEmbedding(partial_rotary_factor=0.5)},
            "`partial_rotary_factor` must be 1.0",
        ),
        (
            {"rope": tf_posenc.RotaryEmbedding(mrope_section=[2, 2, 2])},
            "`rope` must rotate the `qk_rope_head_dim`",
        ),
        ({"gate": "query"}, "give `q_lora_rank`"),
        ({"index_n_heads": 2}, "give `q_lora_rank`"),
        ({"gate": "output"}, "`gate` must be one of"),
    ],
    ids=["odd-rope", "partial-rope", "mrope-sections", "query-gate", "indexer", "gate"],
)
def test_bad_arguments_are_named_at_construction(arguments, words):
    sizes = {
        "num_heads": 4,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 12,
        "qk_rope_head_dim": 4,
        "v_head_dim": 8,
    }
    with pytest.raises(ValueError, match=words):
        tf_posenc.MultiHeadLatentAttention(**{**sizes, **arguments})


def test_a_cache_of_the_wrong_width_or_slots_is_named():
    layer, _, _ = build("deepseek_v32", "DeepseekV32Attention:indexed_attention")
    hidden = np.ones((1, 2, 32))
    with pytest.raises(ValueError, match=r"`cache` must have shape \(batch, slots, 28\).*indexer's key"):
        layer(hidden, hidden, cache=np.zeros((1, 4, 20)), cache_update_index=0)
    with pytest.raises(ValueError, match="`cache` has 4 slots"):
        layer(hidden, hidden, cache=np.zeros((1, 4, 28)), cache_update_index=3)


@pytest.mark.slow
def test_a_saved_layer_reloads_and_takes_transformers_weights(tmp_path):
    layer, weights, case = build("hy_v4", "HYV4Attention:indexed_attention")
    hidden = module_input(32)
    inputs = keras.Input((6, 32), dtype="float64")
    model = keras.Model(inputs, layer(inputs, inputs, use_causal_mask=True))
    config = json.loads(json.dumps(layer.get_config()))
    assert config["hf_module"]["fields"]["model_type"] == "hy_v4"
    path = tmp_path / "latent.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path).layers[-1]
    assert isinstance(reloaded, tf_posenc.MultiHeadLatentAttention)
    tf_posenc.load_hf_attention_weights(reloaded, weights, PREFIX)
    tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
    expected = keras.ops.convert_to_numpy(layer(hidden, hidden, use_causal_mask=True))
    output = keras.ops.convert_to_numpy(reloaded(hidden, hidden, use_causal_mask=True))
    assert np.array_equal(output, expected)


@pytest.mark.slow
def test_a_cached_step_compiles_with_xla_and_matches_eager():
    layer, weights, _ = build("deepseek_v32", "DeepseekV32Attention:indexed_attention", dtype="float32")
    tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
    hidden = np.random.default_rng(5).standard_normal((1, 6, 32)).astype("float32")
    cache = np.zeros((1, 6, layer.cache_width), "float32")
    _, cache = layer(hidden[:, :5], hidden[:, :5], cache=cache, cache_update_index=0, use_causal_mask=True)

    @tf.function(jit_compile=True)
    def step(token, cache, index):
        return layer(token, token, cache=cache, cache_update_index=index, use_causal_mask=True)

    compiled, _ = step(hidden[:, 5:], cache, tf.constant(5))
    eager, _ = layer(hidden[:, 5:], hidden[:, 5:], cache=cache, cache_update_index=5, use_causal_mask=True)
    assert np.abs(np.asarray(compiled) - np.asarray(eager)).max() < 1e-5


def test_mixed_precision_keeps_positions_exact():
    """Under `mixed_bfloat16` the rotation's rows come from int32 positions in float32 (never
    bfloat16 positions): far positions still give the float32 layer's output, to bfloat16's
    resolution."""
    layer32, weights, _ = build("deepseek_v3", "DeepseekV3Attention:None", dtype="float32")
    mixed, _, _ = build("deepseek_v3", "DeepseekV3Attention:None", dtype="mixed_bfloat16")
    for layer in (layer32, mixed):
        tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
    hidden = np.random.default_rng(6).standard_normal((1, 4, 32)).astype("float32")
    positions = np.asarray([[70001, 70002, 70003, 70004]], "int32")
    expected = keras.ops.convert_to_numpy(
        layer32(hidden, hidden, query_positions=positions, key_positions=positions, use_causal_mask=True)
    )
    output = mixed(hidden, hidden, query_positions=positions, key_positions=positions, use_causal_mask=True)
    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"
    output = keras.ops.convert_to_numpy(keras.ops.cast(output, "float32"))
    assert np.abs(output - expected).max() < 0.05 * np.abs(expected).max()


def test_one_token_without_a_cache_sees_itself():
    layer, weights, _ = build("deepseek_v3", "DeepseekV3Attention:None")
    tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
    hidden = np.random.default_rng(7).standard_normal((1, 3, 32))
    first = keras.ops.convert_to_numpy(
        layer(hidden[:, :1], hidden[:, :1])
    )  # no warning of a softmax over one
    full = keras.ops.convert_to_numpy(layer(hidden, hidden, use_causal_mask=True))
    assert np.abs(first - full[:, :1]).max() < 1e-12


def test_kimi_linears_layers_come_from_its_checkpoints_own_key():
    """Kimi Linear's latent layers rotate nothing, so no rotary plan says which they are: its
    `layer_types`, or its checkpoints' 1-based `linear_attn_config["full_attn_layers"]`."""
    config = {k: v for k, v in TYPES["kimi_linear"]["config"].items() if k != "layer_types"}
    with pytest.raises(ValueError, match="full_attn_layers"):
        tf_posenc.MultiHeadLatentAttention.from_hf_config(config, 4)
    config["linear_attn_config"] = {**(config.get("linear_attn_config") or {}), "full_attn_layers": [5]}
    layer = tf_posenc.MultiHeadLatentAttention.from_hf_config(config, 4)
    assert layer.rope is None and layer.kv_lora_rank == 16
    with pytest.raises(ValueError, match="not self-attention"):
        tf_posenc.MultiHeadLatentAttention.from_hf_config(config, 3)
