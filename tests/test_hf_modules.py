"""Whole attention modules against transformers 5.25's own: each text model type's distinct
attention layers, and variants with its biases, norms and clamp switched on and its other layouts
(`tests/transformers_modules_5_25.json`, printed by `print_transformers.py modules` in float64
with `fingerprints.module_weights` under the modules' state-dict names), built by
`GroupQueryAttention.from_hf_config` from the same config, loaded by `load_hf_attention_weights`
and called on the same hidden states at the same positions. A module the layer cannot build is
refused by name, never loaded into a wrong answer."""

import json
import pathlib

import keras
import numpy as np
import pytest
from fingerprints import MODULE_POSITIONS, module_input, module_weights
from helpers import slow_unless

import tf_posenc
from tf_posenc import _hf_attention, _hf_config, _hf_defaults, _hf_encoder_defaults, _hf_module_defaults

PRINTED = json.loads((pathlib.Path(__file__).parent / "transformers_modules_5_25.json").read_text())
TYPES = PRINTED["types"]
CASES = [
    (name, key)
    for name, entry in sorted(TYPES.items())
    for key, layer in entry.get("layers", {}).items()
    if "error" not in layer
]
PREFIX = "model.layers.0.self_attn."
# GPT-J's and CodeGen's frequencies are float32 in transformers whatever it runs in
# (`10000 ** (arange(int64) / dim)`, torch's default float dtype): 1.5e-9 and 2.3e-9 off.
BOUNDS = {"gptj": 1e-8, "codegen": 1e-8}
# The model types refused, with the words of the mechanism their error names: by
# `from_hf_config` (the module), or already by `hf_attention_layers` (the positions).
REFUSED = {
    "beam": "query temperature",
    "doge": "dynamic mask",
    "dory": "sqk",
    "ernie4_5_vl_moe_text": "M-RoPE",
    "jetmoe": "mixture of attention experts",
    "minimax_m3_vl_text": "MiniMax-M3",
    "muse_glimmer_text": "qk_scale_factor",
    "muse_spark_text": "qk_scale_factor",
    "nanochat": "minus the angle",
    "qwen4_exp_text": "indexer",
    "zamba2": "twice the hidden size",
}
# Refused on some layer types only.
REFUSED_LAYERS = {("kolibri1_1", "indexed_attention"): "indexer"}


def model_type(name):
    return TYPES[name].get("model_type", name)


def refusal(name, key):
    words = REFUSED.get(model_type(name))
    return words or REFUSED_LAYERS.get((model_type(name), key.split(":")[1]))


def build(name, key):
    """The printed case's layer as a user builds it, its weights, and the printed output."""
    entry = TYPES[name]
    case = entry["layers"][key]
    config = {"model_type": model_type(name), **entry["config"]}
    layer = tf_posenc.GroupQueryAttention.from_hf_config(config, case["layer_index"], dtype="float64")
    shapes = {name: tuple(shape) for name, shape in case["shapes"].items()}
    weights = {PREFIX + name: value for name, value in module_weights(shapes).items()}
    return layer, weights, np.asarray(case["output"])


def call(layer, hidden_size):
    hidden = module_input(hidden_size)
    positions = np.asarray([MODULE_POSITIONS], "int32")
    causal = layer.is_causal is not False  # an encoder's (ModernBERT's) attends both ways
    output = layer(hidden, hidden, query_positions=positions, key_positions=positions, use_causal_mask=causal)
    return keras.ops.convert_to_numpy(output)


# Seven cases of the main mechanisms and layouts run in the quick suite (norms per head, across
# heads and after the rotation, a clamp, a fused projection, Falcon's groups, sinks, gates); every
# case runs with `slow` (each builds a rope of its own, whose rows are traced once: 0.3 s a case).
QUICK = {"llama", "olmoe+on", "stablelm+on", "phi3", "falcon+new", "gpt_oss", "qwen3_next"}


ACCEPTED = slow_unless(QUICK, (case for case in CASES if refusal(*case) is None))
REFUSALS = slow_unless(None, (case for case in CASES if refusal(*case) is not None))  # no call: all quick
ACCEPTED_NAMES = [case for case in CASES if refusal(*case) is None]


@pytest.mark.parametrize("name, key", ACCEPTED)
def test_the_whole_module_is_transformers(name, key):
    layer, weights, theirs = build(name, key)
    tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
    ours = call(layer, layer._hf_module.hidden_size)
    theirs = theirs.reshape(ours.shape)
    bound = BOUNDS.get(model_type(name), 1e-9)
    assert np.abs(ours - theirs).max() <= bound * np.abs(theirs).max()


@pytest.mark.parametrize("name, key", REFUSALS)
def test_a_module_the_layer_lacks_is_refused_by_name(name, key):
    with pytest.raises(ValueError, match="mechanism") as error:
        build(name, key)
    assert refusal(name, key) in str(error.value)
    assert repr(model_type(name)) in str(error.value)


# One case of each loading path: separate projections with norms split per head, a fused
# projection by heads, Falcon's grouped one, an interleaved gate, sinks.
LOADER_CASES = [
    ("stablelm+on", "StableLmAttention:None"),
    ("gpt_neox", "GPTNeoXAttention:None"),
    ("falcon+new", "FalconAttention:None"),
    ("qwen3_next", "Qwen3NextAttention:full_attention"),
    ("gpt_oss", "GptOssAttention:sliding_attention"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, key", LOADER_CASES, ids=[name for name, _ in LOADER_CASES])
def test_the_loader_uses_every_weight_and_nothing_else(name, key):
    layer, weights, _ = build(name, key)
    for missing in weights:
        partial = {other: value for other, value in weights.items() if other != missing}
        with pytest.raises(ValueError, match=f"has no `{missing}`"):
            tf_posenc.load_hf_attention_weights(layer, partial, PREFIX)
    stray = PREFIX + "o_proj.lora_A.weight"
    with pytest.raises(ValueError, match=f"`{stray}`.*does not use"):
        tf_posenc.load_hf_attention_weights(layer, {**weights, stray: np.ones((2, 2))}, PREFIX)
    first = sorted(weights)[0]
    with pytest.raises(ValueError, match=f"`{first}` must have shape"):
        tf_posenc.load_hf_attention_weights(layer, {**weights, first: np.ones(3)}, PREFIX)


def test_the_loader_takes_a_layer_from_a_config_only():
    layer = tf_posenc.GroupQueryAttention(8, 4, 2)
    with pytest.raises(ValueError, match="`layer` must come from `GroupQueryAttention.from_hf_config`"):
        tf_posenc.load_hf_attention_weights(layer, {}, PREFIX)


def test_every_model_type_is_compared_whole_or_refused():
    # The types `hf_attention_layers` reads: each is a printed module compared above, a latent
    # attention (DeepSeek's MLA, which `from_hf_config` refuses as such), or refused by name.
    read = set(_hf_defaults.DEFAULTS) - set(_hf_config.MECHANISMS) - set(_hf_config.PLAN_MECHANISMS)
    latent = {
        name
        for name in read
        if _hf_config.is_latent_attention({"model_type": name, **_hf_defaults.DEFAULTS[name]})
    }
    refused = {name for name, family in _hf_attention.FAMILIES.items() if family.refused}
    compared = {model_type(param.values[0]) for param in ACCEPTED}
    # Encoders whose modules are read: ModernBERT's.
    encoders = {name for name in _hf_attention.FAMILIES if name in _hf_encoder_defaults.DEFAULTS}
    assert encoders == {"modernbert", "eurobert", "ultrabert", "gte", "jina_embeddings_v3", "nomic_bert"}
    assert (read | encoders) - latent - refused == compared
    for name in sorted(latent | refused):
        with pytest.raises(ValueError, match="latent attention|needs a mechanism|not self-attention"):
            tf_posenc.GroupQueryAttention.from_hf_config({"model_type": name}, 0)


def test_the_loader_fills_a_layer_already_built_in_a_model():
    layer, weights, theirs = build("qwen2", "Qwen2Attention:full_attention")
    hidden = keras.Input((None, layer._hf_module.hidden_size), dtype="float64")
    keras.Model(hidden, layer(hidden, hidden, use_causal_mask=True))
    tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
    ours = call(layer, layer._hf_module.hidden_size)
    assert np.abs(ours - theirs.reshape(ours.shape)).max() <= 1e-9 * np.abs(theirs).max()


@pytest.mark.slow
def test_every_record_survives_the_layers_config():
    # What the loader reads after `keras.saving.load_model`: the record, through JSON, unchanged.
    for name, key in CASES:
        if refusal(name, key) is None:
            layer = build(name, key)[0]
            config = json.loads(json.dumps(layer.get_config()))
            assert type(layer).from_config(config)._hf_module == layer._hf_module, name


@pytest.mark.parametrize(
    "name, key",
    [
        ("gemma3_text", "Gemma3Attention:sliding_attention"),
        ("phi3", "Phi3Attention:None"),
        ("bitnet", "BitNetAttention:None"),
    ],
    ids=["gemma3_text", "phi3", "bitnet-output-norm"],
)
def test_a_reloaded_layer_takes_the_weights(name, key, tmp_path):
    layer, weights, theirs = build(name, key)
    hidden = keras.Input((None, layer._hf_module.hidden_size), dtype="float64")
    keras.Model(hidden, layer(hidden, hidden, use_causal_mask=True)).save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras").layers[1]
    tf_posenc.load_hf_attention_weights(reloaded, weights, PREFIX)
    ours = call(reloaded, reloaded._hf_module.hidden_size)
    assert np.abs(ours - theirs.reshape(ours.shape)).max() <= 1e-9 * np.abs(theirs).max()


def test_a_key_the_config_class_lacks_is_ignored():
    # HRM's config class has no `num_key_value_heads`, and transformers ignores one a config file
    # carries: every head has its own keys. The readers ignore it too.
    config = {"model_type": "hrm_text", "hidden_size": 32, "num_attention_heads": 4, "head_dim": 8}
    layer = tf_posenc.GroupQueryAttention.from_hf_config({**config, "num_key_value_heads": 2}, 0)
    assert layer.num_key_value_heads == 4
    # A type whose class has the key reads it.
    llama = {**config, "model_type": "llama", "num_key_value_heads": 2}
    llama = tf_posenc.GroupQueryAttention.from_hf_config(llama, 0)
    assert llama.num_key_value_heads == 2


def test_a_prefix_without_its_dot_is_named():
    layer, weights, _ = build("llama", "LlamaAttention:None")
    missing = r"no `model\.layers\.0\.self_attnq_proj\.weight`"
    with pytest.raises(ValueError, match=missing + r'.*the prefix "model\.layers\.0\.self_attn\."'):
        tf_posenc.load_hf_attention_weights(layer, weights, PREFIX[:-1])


def test_a_type_running_another_types_modules_reads_as_it_with_its_own_defaults():
    # EXAONE 3's config class is its own (rope_theta 500000 by default) and its modules Llama's:
    # `_hf_module_defaults.ALIASES`, found by the printer from `AutoModelForCausalLM`'s classes.
    sizes = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2}
    exaone = tf_posenc.GroupQueryAttention.from_hf_config({"model_type": "exaone", **sizes}, 0)
    llama = tf_posenc.GroupQueryAttention.from_hf_config({"model_type": "llama", **sizes}, 0)
    assert (exaone.rope.max_wavelength, llama.rope.max_wavelength) == (500000.0, 10000.0)
    assert exaone._hf_module._replace(model_type="llama") == llama._hf_module
    assert {"exaone", "internlm3"} <= {model_type(name) for name, _ in ACCEPTED_NAMES}


def test_gemma4s_layer_sizes_read_from_either_form_of_its_config():
    # A config.json gives Gemma 4's full layers `global_head_dim` and `num_global_key_value_heads`
    # (its config class derives `per_layer_config` from them); `to_dict()` gives the derived
    # `per_layer_config`, keyed "05". Both read as the same layer, which matches the printed module.
    name, key = "gemma4_text+k_eq_v", "Gemma4TextAttention:full_attention"
    entry = TYPES[name]
    case = entry["layers"][key]
    config = {"model_type": "gemma4_text", **entry["config"]}
    derived = {k: v for k, v in config.items() if k not in ("global_head_dim", "num_global_key_value_heads")}
    derived["per_layer_config"] = {"05": {"head_dim": 64, "num_key_value_heads": 1}}
    shapes = {name: tuple(shape) for name, shape in case["shapes"].items()}
    weights = {PREFIX + name: value for name, value in module_weights(shapes).items()}
    theirs = np.asarray(case["output"])
    for given in (config, derived):
        layer = tf_posenc.GroupQueryAttention.from_hf_config(given, 5, dtype="float64")
        assert (layer.head_dim, layer.num_key_value_heads) == (64, 1)
        assert layer._hf_module.values_from_keys
        tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
        ours = call(layer, 32)
        assert np.abs(ours - theirs.reshape(ours.shape)).max() <= 1e-9 * np.abs(theirs).max()
    # Without `attention_k_eq_v` its class ignores `num_global_key_value_heads`, and so do we;
    # the sliding layers keep the config's sizes.
    off = tf_posenc.GroupQueryAttention.from_hf_config({**config, "attention_k_eq_v": False}, 5)
    assert (off.head_dim, off.num_key_value_heads, off._hf_module.values_from_keys) == (64, 2, False)
    sliding = tf_posenc.GroupQueryAttention.from_hf_config(config, 0)
    assert (sliding.head_dim, sliding.num_key_value_heads) == (256, 2)


def test_a_value_projection_the_module_lacks_is_not_taken():
    # Gemma 4's full layer with keys as values has no `v_proj`: one given is a weight it does not use.
    layer, weights, _ = build("gemma4_text+k_eq_v", "Gemma4TextAttention:full_attention")
    stray = {**weights, PREFIX + "v_proj.weight": weights[PREFIX + "k_proj.weight"]}
    with pytest.raises(ValueError, match=r"v_proj\.weight`.*does not use"):
        tf_posenc.load_hf_attention_weights(layer, stray, PREFIX)


@pytest.mark.parametrize(
    "arguments, words",
    [
        ({"use_gate": True, "gate_activation": "no_such"}, "name of a Keras activation"),
        ({"use_gate": True, "gate_activation": 3}, "name of a Keras activation"),
        ({"gate_activation": "softplus"}, "pass `use_gate=True`"),
    ],
    ids=["unknown", "not-a-name", "without-a-gate"],
)
def test_a_gate_activation_is_checked_in_the_constructor(arguments, words):
    with pytest.raises(ValueError, match=words):
        tf_posenc.GroupQueryAttention(8, 4, 2, **arguments)


def test_a_softplus_gate_saves_and_applies():
    layer = tf_posenc.GroupQueryAttention(4, 2, 1, use_gate=True, gate_activation="softplus")
    x = keras.random.normal((1, 3, 8), seed=1)
    layer(x, x)
    copy = tf_posenc.GroupQueryAttention.from_config(json.loads(json.dumps(layer.get_config())))
    copy(x, x)
    copy.set_weights(layer.get_weights())
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(copy(x, x)), keras.ops.convert_to_numpy(layer(x, x))
    )
    dense = layer._gate_dense
    raw = np.einsum("bqm,muh->bquh", keras.ops.convert_to_numpy(x), keras.ops.convert_to_numpy(dense.kernel))
    raw = raw + keras.ops.convert_to_numpy(dense.bias)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(dense(x)), np.log1p(np.exp(raw)), rtol=1e-5, atol=1e-6
    )


def test_differential_attention_is_diffllamas_restated():
    # A float64 NumPy restatement of transformers 5.25's `DiffLlamaAttention.forward`: one set of
    # weights over two value halves, the halves of the heads subtracted with lambda, an RMS norm
    # over each pair's features, `1 - lambda_init`; against the layer and the printed module.
    layer, weights, theirs = build("diffllama", "DiffLlamaAttention:None")
    tf_posenc.load_hf_attention_weights(layer, weights, PREFIX)
    ours = call(layer, 32)
    w = {name[len(PREFIX) :]: value for name, value in weights.items()}
    heads, kv_heads, size = layer.num_query_heads, layer.num_key_value_heads, layer.head_dim
    hidden = module_input(32)[0]
    positions = np.asarray(MODULE_POSITIONS, "float64")
    angles = positions[:, None] / 10000.0 ** (np.arange(0, size, 2) / size)
    cos, sin = (np.concatenate([f(angles)] * 2, -1)[:, None] for f in (np.cos, np.sin))

    def turned(x):
        return x * cos + np.concatenate([-x[..., size // 2 :], x[..., : size // 2]], -1) * sin

    q = turned((hidden @ w["q_proj.weight"].T).reshape(-1, heads, size))
    k = turned((hidden @ w["k_proj.weight"].T).reshape(-1, kv_heads, size))
    v = (hidden @ w["v_proj.weight"].T).reshape(-1, kv_heads, size)
    group = heads // kv_heads
    k = np.repeat(k, group, axis=1)
    v1, v2 = (np.repeat(np.concatenate([part, part], 1), group, axis=1) for part in np.split(v, 2, axis=1))
    length = len(positions)
    scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(size)
    scores = np.where(np.tril(np.ones((length, length), bool)), scores, -np.inf)
    attention = np.exp(scores - scores.max(-1, keepdims=True))
    attention /= attention.sum(-1, keepdims=True)
    out = np.concatenate([np.einsum("hqk,khd->qhd", attention, part) for part in (v1, v2)], -1)
    first, second = np.split(out, 2, axis=1)
    lambda_init = 0.8 - 0.6 * np.exp(-0.3 * 0)
    lambda_ = (
        np.exp(np.sum(w["lambda_q1"] * w["lambda_k1"]))
        - np.exp(np.sum(w["lambda_q2"] * w["lambda_k2"]))
        + lambda_init
    )
    combined = first - lambda_ * second
    combined = combined / np.sqrt(np.mean(combined**2, -1, keepdims=True) + 1e-5) * (1 - lambda_init)
    restated = combined.reshape(length, -1) @ w["o_proj.weight"].T
    np.testing.assert_allclose(ours[0], restated, rtol=1e-11, atol=1e-11 * np.abs(restated).max())
    np.testing.assert_allclose(ours.ravel(), theirs, rtol=1e-9, atol=1e-9 * np.abs(theirs).max())


def test_differential_attention_decodes_through_a_cache_and_saves():
    config = {"model_type": "diffllama", "hidden_size": 32, "num_attention_heads": 4,
              "num_key_value_heads": 2, "num_hidden_layers": 3}  # fmt: skip
    layer = tf_posenc.GroupQueryAttention.from_hf_config(config, 2, dtype="float64")
    assert layer.differential == pytest.approx(0.8 - 0.6 * np.exp(-0.6))
    x = np.random.RandomState(3).standard_normal((2, 5, 32))
    full = keras.ops.convert_to_numpy(layer(x, x, use_causal_mask=True))
    cache = np.zeros((2, 2, 5, 2, 8))
    prompt, cache = layer(x[:, :3], x[:, :3], cache=cache, cache_update_index=0)
    steps = [keras.ops.convert_to_numpy(prompt)]
    for index in (3, 4):
        step, cache = layer(
            x[:, index : index + 1], x[:, index : index + 1], cache=cache, cache_update_index=index
        )
        steps.append(keras.ops.convert_to_numpy(step))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, rtol=1e-12, atol=1e-12)
    copy = tf_posenc.GroupQueryAttention.from_config(json.loads(json.dumps(layer.get_config())))
    copy(x, x)
    copy.set_weights(layer.get_weights())
    np.testing.assert_allclose(keras.ops.convert_to_numpy(copy(x, x, use_causal_mask=True)), full)


@pytest.mark.parametrize(
    "arguments, words",
    [
        ({"differential": 1.0}, r"a number in \[0, 1\)"),
        ({"differential": True}, r"a number in \[0, 1\)"),
        ({"differential": 0.2, "num_key_value_heads": 1}, "must be even in number"),
    ],
    ids=["one", "a-boolean", "odd-key-value-heads"],
)
def test_differential_attention_is_checked_in_the_constructor(arguments, words):
    arguments = {"head_dim": 8, "num_query_heads": 4, "num_key_value_heads": 2, **arguments}
    with pytest.raises(ValueError, match=words):
        tf_posenc.GroupQueryAttention(**arguments)


def test_every_key_a_read_module_reads_is_accounted_for():
    # The keys printed from each type's attention classes (`MODULE_READS`): a type read here
    # accounts for every one (read, or why it leaves the output alone), so that a key added by the
    # next transformers release is a refusal, not a wrong number.
    read = {model_type(name) for name, _ in ACCEPTED_NAMES}
    assert read <= set(_hf_module_defaults.MODULE_READS)
    assert {
        name: _hf_attention.unaccounted(name) for name in sorted(read) if _hf_attention.unaccounted(name)
    } == {}


def test_a_key_no_record_accounts_for_is_refused(monkeypatch):
    reads = dict(_hf_module_defaults.MODULE_READS)
    reads["llama"] = (*reads["llama"], "value_multiplier")  # a key a new release might read
    monkeypatch.setattr(_hf_module_defaults, "MODULE_READS", reads)
    config = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1}
    with pytest.raises(ValueError, match=r"model_type='llama'.*does not account for: 'value_multiplier'"):
        tf_posenc.GroupQueryAttention.from_hf_config(config, 0)


def test_differential_attention_without_a_rope_is_not_keras_own_call():
    # No position argument at all: the call still combines the paired heads.
    layer = tf_posenc.GroupQueryAttention(8, 4, 2, differential=0.2, dtype="float64")
    plain = tf_posenc.GroupQueryAttention(8, 4, 2, dtype="float64")
    x = np.random.RandomState(4).standard_normal((1, 3, 16))
    layer(x, x)
    plain(x, x)
    plain.set_weights(
        [w for w in layer.get_weights() if w.ndim != 1 or w.shape != (8,)][: len(plain.weights)]
    )
    ours = keras.ops.convert_to_numpy(layer(x, x))
    assert np.abs(ours - keras.ops.convert_to_numpy(plain(x, x))).max() > 1e-3
