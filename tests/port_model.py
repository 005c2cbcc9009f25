"""docs/porting.md's "A whole decoder", run: its code block builds tiny Llama, Gemma 3 and Phi-3
decoders (configs and weights in `port_weights`) from their state dicts, as their checkpoints
name them."""

import pathlib
import re

import numpy as np

import tf_posenc

PAGE = pathlib.Path(__file__).parent.parent / "docs" / "porting.md"


def page_port():
    """The names the page's port block defines."""
    text = PAGE.read_text(encoding="utf-8")
    block = re.search(r"<!-- port -->\n```python\n(.*?)```", text, re.S).group(1)
    namespace = {}
    exec(compile(block, "docs/porting.md (port)", "exec"), namespace)
    return namespace


def checkpoint(config, weights):
    """The attention weights as the model's checkpoint names them: Phi-3's query, key and value
    in one `qkv_proj`, rows [q; k; v]; and the biases and sinks of the families whose modules have
    them (Qwen2's, gpt-oss's), zeros, where `port_weights` makes a Llama or Gemma 3 body's."""
    named = dict(weights)
    for index in range(config["num_hidden_layers"]):
        prefix = f"model.layers.{index}.self_attn."
        module = tf_posenc.GroupQueryAttention.from_hf_config(config, index)._hf_module
        if module.fused == "qkv":  # Phi-3's: [q; k; v], and its MLP's [gate; up]
            parts = [named.pop(f"{prefix}{name}_proj.weight") for name in "qkv"]
            named[f"{prefix}{module.projections['qkv']}.weight"] = np.concatenate(parts, axis=0)
            mlp = f"model.layers.{index}.mlp."
            parts = [named.pop(f"{mlp}{name}_proj.weight") for name in ("gate", "up")]
            named[f"{mlp}gate_up_proj.weight"] = np.concatenate(parts, axis=0)
        widths = {"q": module.heads, "k": module.kv_heads, "v": module.kv_heads}
        for role in module.biases:
            width = widths[role] * module.head_dim if role in widths else module.hidden_size
            named.setdefault(f"{prefix}{module.projections[role]}.bias", np.zeros(width, "float32"))
        if module.norm is None:  # `port_weights` gives every Gemma the norms of Gemma 3's
            for name in ("q_norm", "k_norm"):
                named.pop(f"{prefix}{name}.weight", None)
        if module.sinks:
            named.setdefault(f"{prefix}sinks", np.zeros(module.heads, "float32"))
    return named


def Port(config, weights, port=None):  # noqa: N802 (it builds the page's `Decoder`)
    """The page's `Decoder` of `config`, given `weights` (`port_weights`' names) as the model's
    checkpoint names them."""
    port = port or page_port()
    return port["Decoder"](config, checkpoint(config, weights))
