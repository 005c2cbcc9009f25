"""docs/porting.md's "Porting a Hugging Face decoder", run: its code block builds and loads the
attention of tiny Llama, Gemma 3 and Phi-3 decoders (configs and weights in `port_weights`), and
this module the rest of them (norms, MLPs, embeddings), as transformers 5.24's modeling code has them."""

import pathlib
import re

import numpy as np
from keras import ops

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
        if module.fused == "qkv":
            parts = [named.pop(f"{prefix}{name}_proj.weight") for name in "qkv"]
            named[f"{prefix}{module.projections['qkv']}.weight"] = np.concatenate(parts, axis=0)
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


class Port:
    """A decoder of `config` with `weights` (transformers' names), called on `(tokens, cache,
    cache_index)`: logits and the new cache."""

    def __init__(self, config, weights, port=None):
        port = port or page_port()
        self.config = config
        self.gemma = config["model_type"].startswith("gemma")
        self.plan = tf_posenc.hf_attention_layers(config)
        hidden = config["hidden_size"]
        self.weights = {name: ops.convert_to_tensor(value) for name, value in weights.items()}
        self.attention = port["attention_layers"](config, checkpoint(config, weights))
        self.embed_scale = np.float32(hidden**0.5) if self.gemma else None

    def norm(self, x, name):
        weight = self.weights[name]
        normed = x * ops.rsqrt(ops.mean(x * x, axis=-1, keepdims=True) + self.config["rms_norm_eps"])
        return normed * (1.0 + weight) if self.gemma else normed * weight

    def mlp(self, x, index):
        def linear(name, x):
            return ops.matmul(x, ops.transpose(self.weights[f"model.layers.{index}.mlp.{name}.weight"]))

        gate = linear("gate_proj", x)
        gate = ops.gelu(gate, approximate=True) if self.gemma else ops.silu(gate)
        return linear("down_proj", gate * linear("up_proj", x))

    def empty_cache(self, slots, batch=1):
        shape = (batch, 2, slots, self.config["num_key_value_heads"], self.config["head_dim"])
        return [ops.zeros(shape) for _ in self.plan]

    def __call__(self, tokens, cache, cache_index):
        x = ops.take(self.weights["model.embed_tokens.weight"], tokens, axis=0)
        if self.gemma:
            x = x * self.embed_scale
        new_cache = []
        for index, attention in enumerate(self.attention):
            prefix = f"model.layers.{index}."
            normed = self.norm(x, prefix + "input_layernorm.weight")
            mixed, layer_cache = attention(
                normed, normed, cache=cache[index], cache_update_index=cache_index, use_causal_mask=True
            )
            new_cache.append(layer_cache)
            if self.gemma:
                x = x + self.norm(mixed, prefix + "post_attention_layernorm.weight")
                fed = self.mlp(self.norm(x, prefix + "pre_feedforward_layernorm.weight"), index)
                x = x + self.norm(fed, prefix + "post_feedforward_layernorm.weight")
            else:
                x = x + mixed
                x = x + self.mlp(self.norm(x, prefix + "post_attention_layernorm.weight"), index)
        x = self.norm(x, "model.norm.weight")
        head = self.weights[
            "model.embed_tokens.weight" if self.config["tie_word_embeddings"] else "lm_head.weight"
        ]
        return ops.matmul(x, ops.transpose(head)), new_cache
