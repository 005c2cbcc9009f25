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
from tf_posenc import _hf_attention, _hf_config, _hf_defaults, _hf_encoder_defaults

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
    "diffllama": "differential attention",
    "diffusion_gemma_text": "per_layer_config",
    "doge": "dynamic mask",
    "dory": "sqk",
    "ernie4_5_vl_moe_text": "M-RoPE",
    "gemma4_text": "per_layer_config",
    "gemma4_unified_text": "per_layer_config",
    "jetmoe": "mixture of attention experts",
    "laguna": "softplus",
    "mimo_v2_flash": "v_head_dim",
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
