"""Internal: encoders whose attention module is plain (BERT's, RoBERTa's, DistilBERT's, ...; their
positions are a learned table added at the input, `hf_position_ids`, or ESM-2's rotation of
queries and keys), read from a config as the module's sizes and state-dict layout. The facts come from
`_hf_plain_defaults` (printed from transformers 5.25): a module that reads a config key or takes
a forward argument that this file does not account for is refused, naming it."""

from typing import NamedTuple

from tf_posenc import _hf_config, _hf_plain_defaults, _validation

# Every config key the printed modules read, accounted for: read here, or why it does not change
# a module's output.
_READS = {
    "hidden_size": "read",
    "num_attention_heads": "read",
    "dim": "read (DistilBERT's `hidden_size`)",
    "n_heads": "read (DistilBERT's `num_attention_heads`)",
    "attention_probs_dropout_prob": "dropout, which is off at inference",
    "attention_dropout": "dropout, which is off at inference",
    "_attn_implementation": "transformers' choice of attention kernel, the same softmax",
    "is_decoder": "whether the model masks causally, which the mask of a call says",
    "position_embedding_type": "read: `rotary` rotates queries and keys (ESM-2); others add at the input",
}
# The forward arguments of a plain module: another is a mechanism the layer lacks.
_ARGUMENTS = {
    "hidden_states",
    "attention_mask",
    "cache",
    "kwargs",
    "output_attentions",
    "encoder_hidden_states",  # a cross-attention's, unused by self-attention
    "encoder_attention_mask",
    "position_embeddings",  # the rotation's rows, which `position_embedding_type="rotary"` asks for
}


class PlainAttention(NamedTuple):
    """An encoder layer's attention without positions: its sizes and its state-dict layout
    (`"bert"`: `self.query` / `key` / `value` and `output.dense`; `"distilbert"`: `q_lin`,
    `k_lin`, `v_lin` and `out_lin`)."""

    model_type: str
    hidden_size: int
    heads: int
    head_dim: int
    layout: str
    rotary: bool = False  # queries and keys rotate (ESM-2's `position_embedding_type="rotary"`)


TYPES = tuple(_hf_plain_defaults.TYPES)


def read(config, layer_index):
    """The `PlainAttention` of encoder layer `layer_index` of `config`, or a `ValueError`
    naming what its module does that a plain attention does not."""
    given = _hf_config.as_dict(config)
    model_type = given.get("model_type")
    facts = _hf_plain_defaults.TYPES[model_type]
    unread = [key for key in facts["reads"] if key not in _READS]
    arguments = [name for name in facts["arguments"] if name not in _ARGUMENTS]
    if unread or arguments:
        what = [f"config keys {', '.join(f'`{key}`' for key in unread)}"] if unread else []
        what += [f"forward arguments {', '.join(f'`{name}`' for name in arguments)}"] if arguments else []
        raise ValueError(
            f"The attention module of model_type={model_type!r} (`{facts['class']}`) needs a mechanism "
            f"`MultiHeadAttention` does not have: it reads {' and '.join(what)}, beyond a plain "
            "attention's."
        )
    read = {**facts["defaults"], **{key: value for key, value in given.items() if value is not None}}
    names = ("dim", "n_heads") if facts["layout"] == "distilbert" else ("hidden_size", "num_attention_heads")
    hidden = _validation.positive_int(names[0], read[names[0]])
    heads = _validation.positive_int(names[1], read[names[1]])
    layers = read.get("n_layers" if facts["layout"] == "distilbert" else "num_hidden_layers")
    _hf_config.encoder_layer_index(layer_index, layers)
    rotary = "position_embeddings" in facts["arguments"] and read.get("position_embedding_type") == "rotary"
    head_dim = _validation.head_size(names[0], hidden, names[1], heads)
    return PlainAttention(model_type, hidden, heads, head_dim, facts["layout"], rotary)
