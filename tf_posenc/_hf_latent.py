"""Internal: transformers' latent-attention modules (DeepSeek's MLA and the models built on it)
read from a config, one layer at a time. The facts come from `_hf_latent_defaults`, printed from
transformers 5.25's code and modules by `tools/print_transformers.py latent`: what each module's
code reads of its config, its parameters, how it rotates, its norms' epsilons and its scales. A
key or a parameter this file does not account for is refused, naming it."""

from typing import NamedTuple

from tf_posenc import _hf_latent_defaults, _rope_types, _validation

# Every config key the printed modules read, accounted for: read here (or by the layer plan), or
# why it does not change a module's output. A key not listed is a mechanism this file lacks.
_READS = {
    "hidden_size": "read",
    "num_attention_heads": "read",
    "q_lora_rank": "read",
    "kv_lora_rank": "read",
    "qk_nope_head_dim": "read",
    "qk_rope_head_dim": "read",
    "v_head_dim": "read",
    "attention_bias": "read",
    "attention_dropout": "read: dropout in training",
    "num_key_value_heads": (
        "read: transformers repeats each head's expanded keys by its ratio to the query heads, "
        "so it must equal them"
    ),
    "rms_norm_eps": "read where a module's latent or indexer norms take it",
    "index_n_heads": "read (the indexer)",
    "index_head_dim": "read (the indexer)",
    "index_topk": "read (the indexer)",
    "indexer_types": "read: a layer that reuses the previous layer's selection is refused",
    "per_layer_config": "read: a layer's own sizes",
    "qk_head_dim": "read: LongCat-Flash's, which must be `qk_nope_head_dim + qk_rope_head_dim`",
    "_attn_implementation": "transformers' choice of attention kernel, the same softmax",
    "head_dim": "the rotary width, read by the layer plan",
    "max_position_embeddings": "the rotary's, read by the layer plan",
    "rope_parameters": "the rotary's and the softmax scale's, read by the layer plan",
    "rope_interleave": "the rotary's layout, read by the layer plan",
    "layer_types": "read by the layer plan",
    "sliding_window": "read by the layer plan",
    "learnable_sink_init": "the sinks' initial value, which the loaded `sinks` replace",
}
# Keys whose mechanism tf_posenc lacks, by what they do.
_MECHANISMS = {
    "no_rope_layers": "Mistral Large 4's layers without rotation, whose heads change size",
    "kv_sharing_modes": "Mistral Large 4's layers that reuse another layer's latent",
    "index_kpool": "GLM-5-Next's indexer, which selects pools of keys by a gated, pooled key",
    "index_kpool_always_select_tail": "GLM-5-Next's indexer, which also selects the query's own pool",
}
# The parameters of a module, by name below its prefix: what the layer builds for each.
_PARAMETERS = {
    "q_proj.weight", "q_a_proj.weight", "q_a_proj.bias", "q_a_layernorm.weight", "q_b_proj.weight",
    "kv_a_proj_with_mqa.weight", "kv_a_proj_with_mqa.bias", "kv_a_layernorm.weight", "kv_b_proj.weight",
    "o_proj.weight", "o_proj.bias",
    "g_proj.weight",  # an output gate per head
    "gate_proj.weight",  # an output gate per value feature
    "q_gate_proj.weight",  # A.X K2's query and gate, from the normed and the raw query latent
    "sinks",
    "k_rope_only_layernorm.weight",  # dots.llm3's norm of the shared rotary key
    "indexer.wq_b.weight", "indexer.wk.weight", "indexer.k_norm.weight", "indexer.k_norm.bias",
    "indexer.weights_proj.weight",
}  # fmt: skip
# The forward arguments of a module: another is a mechanism the layer lacks.
_ARGUMENTS = {"hidden_states", "position_embeddings", "attention_mask", "cache", "position_ids", "kwargs"}
_SHARED_SELECTION = "prev_topk_indices"


class Indexer(NamedTuple):
    """DeepSeek Sparse Attention's indexer: its heads, their size, the keys each query keeps,
    which end of its heads rotates (`rope_first`) and how (`layout`), and its key norm's epsilon."""

    n_heads: int
    head_dim: int
    topk: int
    rope_first: bool
    layout: str
    epsilon: float


class LatentAttention(NamedTuple):
    """One layer's latent-attention module: its sizes and mechanisms, and the model type whose
    weights `load_hf_attention_weights` loads into it."""

    model_type: str
    hidden_size: int
    heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    bias: bool
    epsilon: float
    gate: str | None  # "head" (`g_proj`), "feature" (`gate_proj`) or "query" (`q_gate_proj`)
    sinks: bool
    key_rope_norm: bool
    latent_scaling: bool
    dropout: float
    indexer: Indexer | None
    yarn_mscale: bool = True  # DeepSeek's `yarn_apply_mscale` in the softmax scale


def is_latent(model_type):
    return model_type in _hf_latent_defaults.TYPES


def default(model_type, key):
    """The config class's default of `key` for a latent-attention type, or None."""
    return _hf_latent_defaults.TYPES.get(model_type, {}).get("defaults", {}).get(key)


def rotates(model_type):
    """Whether any latent-attention module of the type rotates (Kimi Linear's does not)."""
    return any(
        facts["rotation"] is not None for facts in _hf_latent_defaults.TYPES[model_type]["layers"].values()
    )


def unrotated_layer_types(config):
    """Each layer's type for a model whose latent attention rotates nothing, so that no rotary
    plan reads it: `layer_types`, or the 1-based `full_attn_layers` of Kimi Linear's checkpoints'
    `linear_attn_config` (which its config class converts so)."""
    types = config.get("layer_types")
    if types:
        return list(types)
    full = (config.get("linear_attn_config") or {}).get("full_attn_layers")
    count = config.get("num_hidden_layers")
    if full is not None and isinstance(count, int):
        return ["full_attention" if index + 1 in full else "linear_attention" for index in range(count)]
    raise ValueError(
        f"The config must say which layers attend (model_type={config.get('model_type')!r}): give "
        "`layer_types`, or `linear_attn_config` with its `full_attn_layers`, and `num_hidden_layers`. "
        "Received: neither"
    )


def _facts(row, layer_type, model_type):
    """The printed facts of the module that serves `layer_type`."""
    for label, facts in row["layers"].items():
        if label.split(":", 1)[1] == str(layer_type):
            return facts
    if len(row["layers"]) == 1:  # one module for every layer, printed without a layer type
        return next(iter(row["layers"].values()))
    raise ValueError(
        f"transformers' model_type={model_type!r} has no latent-attention module for layers of type "
        f"{layer_type!r}. Received: a layer of type {layer_type!r}"
    )


def layer_config(config, layer_index):
    """The config as layer `layer_index` sees it: the config class's defaults under the config,
    and its `per_layer_config` entry over both. A config without `per_layer_config` takes the
    class's own where the class derives one (dots.llm3's sliding layers), at its layer count."""
    row = _hf_latent_defaults.TYPES.get(config.get("model_type"), {"defaults": {}})
    read = {**row["defaults"], **config}
    per_layer = config.get("per_layer_config")
    derived = row["defaults"].get("per_layer_config")
    if per_layer is None and derived:
        count = len(row["defaults"].get("layer_types") or [])
        if config.get("num_hidden_layers", count) != count:
            raise ValueError(
                f"The config must give `per_layer_config`: model_type={config.get('model_type')!r} derives "
                "each layer's sizes by a rule of its config class, which tf_posenc reads at the default "
                f"{count} layers only. Received: num_hidden_layers={config.get('num_hidden_layers')}"
            )
        per_layer = derived
    overrides = {int(key): value for key, value in (per_layer or {}).items()}
    return {**read, **overrides.get(layer_index, {})}


def _refuse(model_type, what):
    raise ValueError(
        f"The latent attention of model_type={model_type!r} needs a mechanism tf_posenc does not have: "
        f"{what}."
    )


def module(config, layer_index, layer_type):
    """The `LatentAttention` of layer `layer_index` (of type `layer_type`, from the plan) of a
    config read by `_hf_config.read`."""
    model_type = config["model_type"]
    row = _hf_latent_defaults.TYPES[model_type]
    for key in row["reads"]:
        if key in _MECHANISMS and config.get(key) not in (None, [], {}, False):
            _refuse(model_type, f"{_MECHANISMS[key]} (`{key}`)")
        if key not in _READS and key not in _MECHANISMS:
            _refuse(model_type, f"its module reads `{key}`, which tf_posenc does not read")
    facts = _facts(row, layer_type, model_type)
    unknown = sorted(set(facts["parameters"]) - _PARAMETERS)
    if unknown:
        _refuse(model_type, f"its module holds {', '.join(f'`{name}`' for name in unknown)}")
    arguments = set(facts["forward_arguments"]) - _ARGUMENTS - {_SHARED_SELECTION}
    if arguments:
        _refuse(
            model_type, f"its module's forward takes {', '.join(f'`{name}`' for name in sorted(arguments))}"
        )
    # A key the config gives as null stays null (`q_lora_rank=None`: a query projected in one step).
    read = layer_config(config, layer_index)
    kinds = read.get("indexer_types")
    if kinds and layer_index < len(kinds) and kinds[layer_index] != "full":
        _refuse(
            model_type,
            f"layer {layer_index} reuses the keys the previous layer's indexer selected "
            f"(`indexer_types[{layer_index}]={kinds[layer_index]!r}`)",
        )
    heads = read["num_attention_heads"]
    kv_heads = read.get("num_key_value_heads") or heads
    if kv_heads != heads:
        raise ValueError(
            f"Latent attention expands its latent to every query head: transformers 5.25 runs "
            f"model_type={model_type!r} only with `num_key_value_heads` equal to `num_attention_heads` "
            f"({heads}). Received: num_key_value_heads={kv_heads}"
        )
    nope, rope = read["qk_nope_head_dim"], read["qk_rope_head_dim"]
    if "qk_head_dim" in row["reads"] and read.get("qk_head_dim") not in (None, nope + rope):
        raise ValueError(
            f"`qk_head_dim` must be `qk_nope_head_dim + qk_rope_head_dim` ({nope + rope}). "
            f"Received: qk_head_dim={read['qk_head_dim']}"
        )
    parameters = set(facts["parameters"])
    q_lora_rank = read.get("q_lora_rank")
    if "q_proj.weight" in parameters:  # the module projects the query in one step, always
        q_lora_rank = None
    gate = None
    for name, kind in (
        ("g_proj.weight", "head"),
        ("gate_proj.weight", "feature"),
        ("q_gate_proj.weight", "query"),
    ):
        if name in parameters:
            gate = kind
    epsilon = read["rms_norm_eps"] if facts["latent_eps_is_config"] else facts["latent_eps"]
    indexer = None
    if "indexer" in facts:
        printed = facts["indexer"]
        indexer = Indexer(
            n_heads=read["index_n_heads"],
            head_dim=read["index_head_dim"],
            topk=read["index_topk"],
            rope_first=printed["rope_first"],
            layout=printed["rotation"],
            epsilon=read["rms_norm_eps"] if printed["key_eps_is_config"] else printed["key_eps"],
        )
    # Scales beside the softmax's are LongCat-Flash's and dots.llm3's sqrt(hidden / rank) of the
    # query and key latents: the printer says which rank each is of, or None for another scale.
    scales = facts["latent_scales"]
    if any(rank is None for rank in scales.values()) or (
        scales and sorted(scales.values()) != ["kv_lora_rank", "q_lora_rank"]
    ):
        _refuse(model_type, f"its module's scales {sorted(scales)}, which tf_posenc does not know")
    latent_scaling = bool(scales)
    return LatentAttention(
        model_type=model_type,
        hidden_size=read["hidden_size"],
        heads=heads,
        q_lora_rank=q_lora_rank,
        kv_lora_rank=read["kv_lora_rank"],
        qk_nope_head_dim=nope,
        qk_rope_head_dim=rope,
        v_head_dim=read["v_head_dim"],
        bias=bool(read.get("attention_bias")),
        epsilon=float(epsilon),
        gate=gate,
        sinks="sinks" in parameters,
        key_rope_norm="k_rope_only_layernorm.weight" in parameters,
        latent_scaling=latent_scaling,
        dropout=float(read.get("attention_dropout") or 0.0),
        indexer=indexer,
        yarn_mscale=facts["yarn_mscale"],
    )


def softmax_scale(config, parameters):
    """transformers' `self.scaling` of a latent-attention module of `config` (its first layer's
    sizes) with rope `parameters`: `(qk_nope_head_dim + qk_rope_head_dim) ** -0.5`, times YaRN's
    `0.1 * mscale_all_dim * ln(factor) + 1` squared where the module applies `yarn_apply_mscale`."""
    row = _hf_latent_defaults.TYPES[config["model_type"]]
    read = {**row["defaults"], **config}
    scale = (read["qk_nope_head_dim"] + read["qk_rope_head_dim"]) ** -0.5
    if not next(iter(row["layers"].values()))["yarn_mscale"]:
        return scale
    if parameters.get("rope_type", parameters.get("type", "default")) == "default":
        return scale
    return scale * _rope_types.yarn_softmax_factor(parameters.get("factor"), parameters.get("mscale_all_dim"))


def checked_layer_index(layer_index, count):
    if not isinstance(layer_index, int) or isinstance(layer_index, bool) or not 0 <= layer_index < count:
        raise ValueError(
            f"`layer_index` must be a decoder layer of the config, 0 .. {count - 1}. "
            f"{_validation.received('layer_index', layer_index)}"
        )
