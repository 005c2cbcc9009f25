"""Loading a transformers attention module's weights into tf_posenc's attention layers."""

import re

import numpy as np

from tf_posenc import _hf_conformer, _hf_deberta, _hf_decomposed, _hf_latent, _hf_plain, _validation


def _split_fused(module, fused):
    """(q, k, v) row blocks `(heads * head_dim, ...)` of a fused projection's weight or bias,
    in the module's layout."""
    heads, kv_heads, head_dim = module.heads, module.kv_heads, module.head_dim
    rest = fused.shape[1:]
    if module.fused == "qkv":  # Phi-3's `qkv_proj`: rows [q; k; v]
        q_rows, kv_rows = heads * head_dim, kv_heads * head_dim
        return fused[:q_rows], fused[q_rows : q_rows + kv_rows], fused[q_rows + kv_rows :]
    if module.fused == "per_head":  # GPT-NeoX's `query_key_value`: [q_h, k_h, v_h] per head
        blocks = fused.reshape(heads, 3, head_dim, *rest)
        return (blocks[:, index].reshape(heads * head_dim, *rest) for index in range(3))
    if module.fused == "codegen":  # four blocks, each [q, v, k] of a quarter of the heads
        blocks = fused.reshape(4, 3, -1, *rest)
        return (blocks[:, index].reshape(heads * head_dim, *rest) for index in (0, 2, 1))
    if module.fused == "falcon":  # per key-value group: its query heads, then its key and value
        group = heads // kv_heads
        blocks = fused.reshape(kv_heads, group + 2, head_dim, *rest)
        return (
            blocks[:, :group].reshape(heads * head_dim, *rest),
            blocks[:, group].reshape(kv_heads * head_dim, *rest),
            blocks[:, group + 1].reshape(kv_heads * head_dim, *rest),
        )
    if module.fused == "falcon_multi_query":  # rows [q; k; v], one key-value head
        q_rows = heads * head_dim
        return fused[:q_rows], fused[q_rows : q_rows + head_dim], fused[q_rows + head_dim :]
    raise AssertionError(module.fused)


def load_hf_attention_weights(layer, weights, prefix):
    """Loads every weight of a transformers attention module into `layer`.

    `layer` is an attention layer made by `GroupQueryAttention.from_hf_config` (decoders and the
    encoders it reads) or `MultiHeadAttention.from_hf_config` (DeBERTa-v2/v3 and SEW-D, the
    Conformer speech encoders, SAM-style and ViTDet vision encoders), or reloaded from a file
    saved with one (its config keeps what the loader needs); or a `DisentangledPositionBias`,
    the relative table a DeBERTa encoder's layers share, under the encoder's prefix (such as
    `"deberta.encoder."`), loaded before the layers. The layer knows the module's projections
    (separate, or fused as Phi-3's `qkv_proj`, GPT-NeoX's and Persimmon's `query_key_value`
    split per head, Falcon's grouped and multi-query layouts), its biases, query and key norms
    (Gemma's `1 + weight` loaded as the scale), sinks and output gate. Every weight under
    `prefix` must be used, every weight the layer needs must be there, and every shape must
    match: anything else is a `ValueError` naming the weight, so a
    mechanism the layer does not build shows as an error, never as a wrong number.

    Args:
        layer: A layer from `GroupQueryAttention.from_hf_config` or
            `MultiHeadAttention.from_hf_config` (or reloaded from one), or a
            `DisentangledPositionBias`.
        weights: Mapping of transformers' state-dict names to arrays (NumPy, or anything
            `numpy.asarray` takes: a safetensors file's tensors, a torch state dict's
            `.numpy()`).
        prefix: String. The module's prefix in `weights`, with its trailing dot, for example
            `"model.layers.0.self_attn."` (DeBERTa's: `"deberta.encoder.layer.0.attention.self."`,
            whose `output.dense` beside it is loaded too).

    Example:

        >>> import numpy as np, tf_posenc
        >>> config = {"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2,
        ...           "num_key_value_heads": 1, "num_hidden_layers": 1}
        >>> layer = tf_posenc.GroupQueryAttention.from_hf_config(config, 0)
        >>> shapes = {"q_proj": (8, 8), "k_proj": (4, 8), "v_proj": (4, 8), "o_proj": (8, 8)}
        >>> weights = {f"layers.0.self_attn.{name}.weight": np.ones(shape) for name, shape in shapes.items()}
        >>> tf_posenc.load_hf_attention_weights(layer, weights, "layers.0.self_attn.")
        >>> del weights["layers.0.self_attn.o_proj.weight"]
        >>> tf_posenc.load_hf_attention_weights(layer, weights, "layers.0.self_attn.")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: `weights` has no `layers.0.self_attn.o_proj.weight`, which the attention ...
    """
    from tf_posenc.layers.disentangled_position_bias import DisentangledPositionBias

    if not isinstance(prefix, str):
        raise ValueError(f"`prefix` must be a string. {_validation.received('prefix', prefix)}")
    if isinstance(layer, DisentangledPositionBias):
        return _load_relative_embeddings(layer, weights, prefix)
    module = getattr(layer, "_hf_module", None)
    if module is None:
        raise ValueError(
            "`layer` must come from `GroupQueryAttention.from_hf_config` or "
            "`MultiHeadAttention.from_hf_config`, "
            "which record the module's projections and norms, or be a `DisentangledPositionBias`. "
            f"{_validation.received('layer', layer)}"
        )
    if isinstance(module, _hf_deberta.DebertaAttention):
        return _load_deberta(layer, module, weights, prefix)
    if isinstance(module, _hf_conformer.ConformerAttention):
        return _load_conformer(layer, module, weights, prefix)
    if isinstance(module, _hf_decomposed.DecomposedAttention):
        return _load_decomposed(layer, module, weights, prefix)
    if isinstance(module, _hf_plain.PlainAttention):
        return _load_plain(layer, module, weights, prefix)
    if isinstance(module, _hf_latent.LatentAttention):
        return _load_latent(layer, module, weights, prefix)
    source = _Weights(weights, prefix, f"the attention module of model_type={module.model_type!r}")
    take = source.take
    hidden, heads, kv_heads, head_dim = module.hidden_size, module.heads, module.kv_heads, module.head_dim
    names = module.projections
    matrices, biases = {}, {}
    if module.fused is None:
        for role in ("q", "k") if module.values_from_keys else ("q", "k", "v"):
            matrices[role] = take(f"{names[role]}.weight")
            if role in module.biases:
                biases[role] = take(f"{names[role]}.bias")
        if module.values_from_keys:
            # Gemma 4's `attention_k_eq_v`: no value projection, the values being the key
            # projection's output; the layer's value projection takes the key's weights (the same
            # product, before the key norm and rotation, which the values do not take).
            matrices["v"] = matrices["k"]
            if "k" in biases:
                biases["v"] = biases["k"]
    else:
        fused_rows = (heads + 2 * kv_heads) * head_dim
        matrices["q"], matrices["k"], matrices["v"] = _split_fused(
            module, source.shaped(f"{names['qkv']}.weight", (fused_rows, hidden))
        )
        if module.biases & {"q", "k", "v"}:
            bias = source.shaped(f"{names['qkv']}.bias", (fused_rows,))
            biases["q"], biases["k"], biases["v"] = _split_fused(module, bias)
    matrices["o"] = take(f"{names['o']}.weight")
    if "o" in module.biases:
        biases["o"] = take(f"{names['o']}.bias")
    if module.gate == "separate":
        matrices["gate"] = take(f"{names['gate']}.weight")
        if "g" in module.biases:
            biases["gate"] = take(f"{names['gate']}.bias")
    elif module.gate == "per_head":  # one gate per head: its row repeated over the head's features
        gate = source.shaped(f"{names['gate']}.weight", (heads, hidden))
        matrices["gate"] = np.repeat(gate, head_dim, axis=0)
    elif module.gate == "interleaved":  # per head: its query's features, then its gate's
        both = _shaped(matrices["q"], (heads * 2 * head_dim, hidden), f"{prefix}{names['q']}.weight")
        both = both.reshape(heads, 2, head_dim, hidden)
        matrices["q"], matrices["gate"] = (
            both[:, index].reshape(heads * head_dim, hidden) for index in (0, 1)
        )
        if "q" in biases:
            pair = _shaped(biases["q"], (heads, 2, head_dim), f"{prefix}{names['q']}.bias")
            biases["q"], biases["gate"] = pair[:, 0].reshape(-1), pair[:, 1].reshape(-1)
    if module.value_head_dim is not None:
        # MiMo-V2-Flash's narrower values, held `head_dim` wide: each head's extra features have
        # zero weights in and out, so they add exactly nothing to the output.
        matrices["v"], matrices["o"], biases = _widened_values(module, matrices, biases, prefix)
    if module.value_scale is not None:  # the values scaled after their projection, folded into it
        matrices["v"] = matrices["v"] * module.value_scale
        if "v" in biases:
            biases["v"] = biases["v"] * module.value_scale
    rows = {"q": heads, "k": kv_heads, "v": kv_heads, "gate": heads}
    values = {}
    for role, sublayer in (("q", "query"), ("k", "key"), ("v", "value"), ("gate", "gate")):
        if role not in matrices:
            continue
        name = f"{prefix}{names.get(role) or names.get('qkv')}.weight"
        matrix = _shaped(matrices[role], (rows[role] * head_dim, hidden), name)
        values[f"{sublayer}/kernel"] = matrix.T.reshape(hidden, rows[role], head_dim)
        if layer.use_bias:
            bias = biases.get(role, np.zeros(rows[role] * head_dim))
            values[f"{sublayer}/bias"] = _shaped(
                bias, (rows[role] * head_dim,), name[: -len("weight")] + "bias"
            )
            values[f"{sublayer}/bias"] = values[f"{sublayer}/bias"].reshape(rows[role], head_dim)
    output = _shaped(matrices["o"], (hidden, heads * head_dim), f"{prefix}{names['o']}.weight")
    values["attention_output/kernel"] = output.T.reshape(heads, head_dim, hidden)
    if layer.use_bias:
        name = f"{prefix}{names['o']}.bias"
        values["attention_output/bias"] = _shaped(biases.get("o", np.zeros(hidden)), (hidden,), name)
    if module.norm is not None and module.norm.names:
        for norm_layer, name, count in (
            (layer.query_norm, module.norm.names[0], heads),
            (layer.key_norm, module.norm.names[1], kv_heads),
        ):
            values.update(_norm_values(module, norm_layer, name, count, take, prefix))
    if module.sinks:
        values["sinks"] = source.shaped("sinks", (heads,))
    if module.differential is not None:
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            values[name] = source.shaped(name, (head_dim,))
    if module.output_norm is not None:
        values["output_norm/scale"] = source.shaped(f"{module.output_norm[0]}.weight", (heads, head_dim))
    _finish(layer, module, source, "its module has a mechanism the layer lacks", values)


def _widened_values(module, matrices, biases, prefix):
    """The value projection's rows and the output projection's columns of values `value_head_dim`
    wide, placed in heads `head_dim` wide with zeros beside them."""
    hidden, heads, kv_heads = module.hidden_size, module.heads, module.kv_heads
    narrow, wide = module.value_head_dim, module.head_dim
    names = module.projections
    value = _shaped(matrices["v"], (kv_heads * narrow, hidden), f"{prefix}{names['v']}.weight")
    widened = np.zeros((kv_heads, wide, hidden))
    widened[:, :narrow] = value.reshape(kv_heads, narrow, hidden)
    output = _shaped(matrices["o"], (hidden, heads * narrow), f"{prefix}{names['o']}.weight")
    columns = np.zeros((hidden, heads, wide))
    columns[:, :, :narrow] = output.reshape(hidden, heads, narrow)
    biases = dict(biases)
    if "v" in biases:
        bias = np.zeros((kv_heads, wide))
        bias[:, :narrow] = _shaped(biases["v"], (kv_heads * narrow,), f"{prefix}{names['v']}.bias").reshape(
            kv_heads, narrow
        )
        biases["v"] = bias.reshape(-1)
    return widened.reshape(kv_heads * wide, hidden), columns.reshape(hidden, heads * wide), biases


class _Weights:
    """The weights under `prefix`, taken by their names below it as float64 arrays; what was
    taken is recorded, so that every weight given can be checked to be used. `what` names the
    module in the error of a missing weight."""

    def __init__(self, weights, prefix, what):
        self.weights, self.prefix, self.what = weights, prefix, what
        self.names = {name[len(prefix) :]: name for name in weights if name.startswith(prefix)}
        self.used = set()

    def take(self, name):
        if name not in self.names:
            hint = ""
            if self.prefix and not self.prefix.endswith(".") and f"{self.prefix}.{name}" in self.weights:
                hint = f' Did you mean the prefix "{self.prefix}." (with its trailing dot)?'
            raise ValueError(f"`weights` has no `{self.prefix}{name}`, which {self.what} has.{hint}")
        self.used.add(name)
        return np.asarray(self.weights[self.names[name]], dtype="float64")

    def shaped(self, name, shape):
        return _shaped(self.take(name), shape, f"{self.prefix}{name}")

    def unused(self):
        """The full names of the weights under the prefix that were not taken, sorted."""
        return sorted(self.names[name] for name in set(self.names) - self.used)


def _assign(layer, values):
    """Each variable of `layer` from `values`, by its path below the layer (`query/kernel`,
    `sinks`), wherever the layer sits; a shared position bias's are loaded on their own."""
    shared = getattr(layer, "position_bias", None)
    skipped = {id(variable) for variable in (shared.weights if shared is not None else ())}
    for variable in layer.weights:
        if id(variable) in skipped:
            continue
        parts = variable.path.split("/")
        path = next((p for p in ("/".join(parts[-2:]), parts[-1]) if p in values), None)
        if path is None:
            raise AssertionError(f"no value for {variable.path}")
        variable.assign(np.asarray(values[path]).reshape(tuple(variable.shape)).astype(variable.dtype))


def _projections(source, pairs, module, bias=True):
    """The kernels (and biases) of the sublayers of `pairs`, `(state-dict name, sublayer)`, from
    `(heads * head_dim, hidden)` weights: the values `_assign` takes."""
    hidden, heads, head_dim = module.hidden_size, module.heads, module.head_dim
    values = {}
    for name, dense in pairs:
        matrix = source.shaped(f"{name}.weight", (heads * head_dim, hidden))
        values[f"{dense}/kernel"] = matrix.T.reshape(hidden, heads, head_dim)
        if bias:
            values[f"{dense}/bias"] = source.shaped(f"{name}.bias", (heads * head_dim,)).reshape(
                heads, head_dim
            )
    return values


def _output_projection(source, name, module, bias=True):
    """The output projection `name` (`(hidden, heads * head_dim)`, and its bias) as `_assign`
    takes it."""
    hidden, heads, head_dim = module.hidden_size, module.heads, module.head_dim
    matrix = source.shaped(f"{name}weight", (hidden, heads * head_dim))
    values = {"attention_output/kernel": matrix.T.reshape(heads, head_dim, hidden)}
    if bias:
        values["attention_output/bias"] = source.shaped(f"{name}bias", (hidden,))
    return values


def _self_and_output(weights, prefix, module, what_self, example):
    """BERT's layout of an attention: the weights under `prefix`, which must end in `self.`, and
    those of the output projection `output.dense` beside it."""
    if not prefix.endswith("self."):
        raise ValueError(
            f"`prefix` must name {what_self}, ending in `self.` (for example `{example}`). "
            f"{_validation.received('prefix', prefix)}"
        )
    what = f"the attention module of model_type={module.model_type!r}"
    return _Weights(weights, prefix, what), _Weights(weights, f"{prefix[: -len('self.')]}output.dense.", what)


def _load_relative_embeddings(layer, weights, prefix):
    """DeBERTa-v2's `encoder.rel_embeddings.weight` and `encoder.LayerNorm` (with
    `norm_rel_ebd="layer_norm"`) under `prefix` (the encoder's, which also holds its layers: only
    those two modules' names are the table's, and each must be used)."""
    source = _Weights(weights, prefix, "the encoder's relative embeddings")
    values = {"rel_embeddings": source.shaped("rel_embeddings.weight", (2 * layer.span, layer.hidden_size))}
    if layer.layer_norm is not None:
        for variable, suffix in (("gamma", "weight"), ("beta", "bias")):
            values[f"layer_norm/{variable}"] = source.shaped(f"LayerNorm.{suffix}", (layer.hidden_size,))
    table = ("rel_embeddings", "LayerNorm")
    unused = [name for name in source.unused() if name[len(prefix) :].split(".")[0] in table]
    if unused:
        raise ValueError(
            f"`weights` has {', '.join(f'`{name}`' for name in unused)}, which the layer does not use: "
            'a LayerNorm of the table needs norm_rel_ebd="layer_norm". '
            f"Received: norm_rel_ebd={layer.norm_rel_ebd!r}"
        )
    if not layer.built:
        layer.build()
    _assign(layer, values)


def _load_deberta(layer, module, weights, prefix):
    """A DeBERTa-v2 / SEW-D `DisentangledSelfAttention` under `prefix` (which must end in
    `self.`), and the output projection `output.dense` beside it (the `DebertaV2SelfOutput`
    whose LayerNorm of the residual follows the layer)."""
    source, output = _self_and_output(
        weights,
        prefix,
        module,
        "DeBERTa's `DisentangledSelfAttention`",
        "deberta.encoder.layer.0.attention.self.",
    )
    _check_shared_table(layer, weights, prefix)
    projections = [("query_proj", "query"), ("key_proj", "key"), ("value_proj", "value")]
    if module.bias_arguments and not module.share_att_key:
        projections += [
            (proj, dense)
            for term, proj, dense in (
                ("c2p", "pos_key_proj", "pos_key"),
                ("p2c", "pos_query_proj", "pos_query"),
            )
            if term in module.pos_att_type
        ]
    values = {**_projections(source, projections, module), **_output_projection(output, "", module)}
    why = "`share_att_key` and `pos_att_type` say which position projections a layer has"
    _finish(layer, module, source, why, values)


def _load_plain(layer, module, weights, prefix):
    """An attention without positions inside it: BERT's layout under `prefix` ending in `self.`
    (`query`, `key`, `value`, and the output projection `output.dense` beside it, whose LayerNorm
    of the residual follows the layer), or DistilBERT's under its `attention.` (`q_lin`, `k_lin`,
    `v_lin`, `out_lin`)."""
    if module.layout == "bert":
        source, output = _self_and_output(
            weights, prefix, module, f"the {module.model_type!r} layer's self-attention",
            "encoder.layer.0.attention.self.",
        )  # fmt: skip
        names, out_name = ("query", "key", "value"), ""
    else:
        source = output = _Weights(
            weights, prefix, f"the attention module of model_type={module.model_type!r}"
        )
        names, out_name = ("q_lin", "k_lin", "v_lin"), "out_lin."
    pairs = zip(names, ("query", "key", "value"), strict=True)
    values = {**_projections(source, pairs, module), **_output_projection(output, out_name, module)}
    why = "its module has no weight beside its projections"
    if output is not source and output.unused():
        _finish(layer, module, output, why, {})  # raises, naming them
    _finish(layer, module, source, why, values)


def _load_latent(layer, module, weights, prefix):
    """Latent attention under transformers' names: `q_a_proj`, `q_a_layernorm` and `q_b_proj`
    (or `q_proj`, or A.X K2's `q_gate_proj`), `kv_a_proj_with_mqa`, `kv_a_layernorm`,
    `kv_b_proj`, `o_proj`, and where the module has them its gate, `sinks`, the rotary key's norm
    and the indexer's `wq_b`, `wk`, `k_norm` and `weights_proj`."""
    source = _Weights(weights, prefix, f"the attention module of model_type={module.model_type!r}")
    hidden, heads = module.hidden_size, module.heads
    qk_head = module.qk_nope_head_dim + module.qk_rope_head_dim
    values = {}

    def dense(name, rows, columns, bias=False):
        values[f"{name.replace('.', '_')}/kernel"] = source.shaped(f"{name}.weight", (rows, columns)).T
        if bias:
            values[f"{name.replace('.', '_')}/bias"] = source.shaped(f"{name}.bias", (rows,))

    def norm(name, width):
        values[name] = source.shaped(f"{name}.weight", (width,))

    if module.q_lora_rank is None:
        dense("q_proj", heads * qk_head, hidden, module.bias)
    else:
        dense("q_a_proj", module.q_lora_rank, hidden, module.bias)
        norm("q_a_layernorm", module.q_lora_rank)
        if module.gate == "query":
            dense("q_gate_proj", heads * (qk_head + module.v_head_dim), 2 * module.q_lora_rank)
        else:
            dense("q_b_proj", heads * qk_head, module.q_lora_rank)
    dense("kv_a_proj_with_mqa", module.kv_lora_rank + module.qk_rope_head_dim, hidden, module.bias)
    norm("kv_a_layernorm", module.kv_lora_rank)
    if module.key_rope_norm:
        norm("k_rope_only_layernorm", module.qk_rope_head_dim)
    dense("kv_b_proj", heads * (module.qk_nope_head_dim + module.v_head_dim), module.kv_lora_rank)
    dense("o_proj", hidden, heads * module.v_head_dim, module.bias)
    if module.gate == "head":
        dense("g_proj", heads, hidden)
    elif module.gate == "feature":
        dense("gate_proj", heads * module.v_head_dim, hidden)
    if module.sinks:
        values["sinks"] = source.shaped("sinks", (heads,))
    indexer = module.indexer
    if indexer is not None:
        dense("indexer.wq_b", indexer.n_heads * indexer.head_dim, module.q_lora_rank)
        dense("indexer.wk", indexer.head_dim, hidden)
        values["indexer_k_norm/gamma"] = source.shaped("indexer.k_norm.weight", (indexer.head_dim,))
        values["indexer_k_norm/beta"] = source.shaped("indexer.k_norm.bias", (indexer.head_dim,))
        dense("indexer.weights_proj", indexer.n_heads, hidden)
    _finish(layer, module, source, "its module has a mechanism the layer lacks", values)


def _check_shared_table(layer, weights, prefix):
    """The relative table the encoder of `prefix` holds, where `weights` has it, must be the
    layer's: a layer given another bias (or one never loaded) would take its own weights and
    score positions with a table the checkpoint does not have."""
    encoder = re.fullmatch(r"(.*)layer\.\d+\.attention\.self\.", prefix)
    name = encoder and f"{encoder.group(1)}rel_embeddings.weight"
    if not name or name not in weights:
        return
    bias = layer.position_bias
    table = np.asarray(weights[name], dtype="float64")
    held = None if bias is None or not bias.built else np.asarray(bias.rel_embeddings)
    if held is None or held.shape != table.shape or not np.array_equal(held, table.astype(held.dtype)):
        raise ValueError(
            f"`weights` holds the encoder's relative table `{name}`, and the layer's `position_bias` "
            "is not loaded from it: load it first with `tf_posenc.load_hf_attention_weights(bias, "
            f'weights, "{encoder.group(1)}")` and give that bias to every layer. '
            f"{_validation.received('position_bias', bias)}"
        )


def _load_conformer(layer, module, weights, prefix):
    """A Conformer self-attention module under `prefix`: its projections, and with
    Transformer-XL's positions `linear_pos` (`relative_k_proj`) and the biases u and v, into the
    layer's `TransformerXLPositionBias`."""
    source = _Weights(weights, prefix, f"the attention module of model_type={module.model_type!r}")
    hidden, heads, head_dim, roles = module.hidden_size, module.heads, module.head_dim, module.names
    pairs = [(roles[role], dense) for role, dense in (("q", "query"), ("k", "key"), ("v", "value"))]
    values = {
        **_projections(source, pairs, module, bias=module.biases),
        **_output_projection(source, f"{roles['o']}.", module, bias=module.biases),
    }
    bias_values = None
    if module.relative:
        pos = source.shaped(f"{roles['pos']}.weight", (heads * head_dim, hidden))
        bias_values = {"linear_pos/kernel": pos.T.reshape(hidden, heads, head_dim)}
        for role, variable in (("u", "pos_bias_u"), ("v_bias", "pos_bias_v")):
            bias_values[variable] = source.shaped(roles[role], (heads, head_dim))
    why = (
        "its module has a mechanism the layer lacks (a `linear_pos` bias, or positions its "
        "`position_embeddings_type` does not give)"
    )
    _finish(layer, module, source, why, values, bias_values)


def _load_decomposed(layer, module, weights, prefix):
    """A SAM-style or ViTDet attention under `prefix`: its fused `qkv` (rows `[q; k; v]`, each head
    by head), `proj`, and `rel_pos_h` / `rel_pos_w` into the layer's `DecomposedPositionBias`."""
    source = _Weights(weights, prefix, f"the attention of model_type={module.model_type!r}")
    hidden, heads, head_dim = module.hidden_size, module.heads, module.head_dim
    fused = source.shaped("qkv.weight", (3 * hidden, hidden))
    biases = source.shaped("qkv.bias", (3 * hidden,)) if module.biases else np.zeros(3 * hidden)
    values = {}
    for index, dense in enumerate(("query", "key", "value")):
        rows = slice(index * hidden, (index + 1) * hidden)
        values[f"{dense}/kernel"] = fused[rows].T.reshape(hidden, heads, head_dim)
        values[f"{dense}/bias"] = biases[rows].reshape(heads, head_dim)
    values["attention_output/kernel"] = source.shaped("proj.weight", (hidden, hidden)).T.reshape(
        heads, head_dim, hidden
    )
    values["attention_output/bias"] = source.shaped("proj.bias", (hidden,))
    tables = None
    if module.relative:
        tables = {
            name: source.shaped(name, (2 * side - 1, head_dim))
            for name, side in zip(("rel_pos_h", "rel_pos_w"), module.input_size, strict=True)
        }
    why = (
        "`use_rel_pos` and `use_relative_position_embeddings` say whether it has relative tables, "
        "`qkv_bias` whether `qkv` has a bias"
    )
    _finish(layer, module, source, why, values, tables)


def _finish(layer, module, source, why, values, bias_values=None):
    """The end of every loading: each weight under the prefix used (else a `ValueError` saying
    `why` one may not be), then the layer's variables and, where given, its own position bias's."""
    unused = source.unused()
    if unused:
        raise ValueError(
            f"`weights` has {', '.join(f'`{name}`' for name in unused)} under `{source.prefix}`, which the "
            f"layer built for model_type={module.model_type!r} does not use: {why}; or the prefix covers "
            "more than the attention module."
        )
    if not layer.built:
        layer.build((None, None, module.hidden_size), (None, None, module.hidden_size))
    _assign(layer, values)
    if bias_values is not None:
        _assign(layer.position_bias, bias_values)


def _norm_values(module, norm_layer, name, count, take, prefix):
    """The variables of one query or key norm, by their paths below the attention layer."""
    norm = module.norm
    values = {}
    head_dim = module.head_dim
    shape = (count, head_dim) if (norm.per_head or norm.axis != -1) else (head_dim,)
    parts = [("scale", "weight")] if norm.scale else []
    if norm.center:
        parts.append(("bias", "bias"))
    for variable, suffix in parts:
        if norm.split:  # StableLM's one norm per head
            value = np.stack(
                [
                    _shaped(
                        take(f"{name}.norms.{head}.{suffix}"),
                        (head_dim,),
                        f"{prefix}{name}.norms.{head}.{suffix}",
                    )
                    for head in range(count)
                ]
            )
        else:
            value = take(f"{name}.{suffix}")
        value = _shaped(value, shape, f"{prefix}{name}.{suffix}")
        if variable == "scale":
            value = value + norm.offset
        values[f"{norm_layer.name}/{variable}"] = value
    return values


def _shaped(value, shape, name):
    """`value` reshaped to `shape` when it holds as many entries (a `(heads * d,)` norm as
    `(heads, d)`), else a `ValueError` naming the weight."""
    if shape is None:
        return value
    if value.size != int(np.prod(shape)) or (value.ndim > 1 and value.shape != tuple(shape)):
        raise ValueError(
            f"`{name}` must have shape {tuple(shape)} for this layer. Received: shape {value.shape}"
        )
    return value.reshape(shape)
