"""Internal: a Conformer speech encoder's config (Wav2Vec2-Conformer, Wav2Vec2-BERT, SeamlessM4T,
Parakeet, Nemotron streaming ASR), read as its self-attention with Transformer-XL's relative
positions, with transformers 5.25's defaults for the keys a config omits."""

from typing import NamedTuple

from tf_posenc import _hf_config, _validation

# transformers' `nn.Linear` names of each family's attention module.
_WAV2VEC2 = {"q": "linear_q", "k": "linear_k", "v": "linear_v", "o": "linear_out", "pos": "linear_pos",
             "u": "pos_bias_u", "v_bias": "pos_bias_v"}  # fmt: skip
_PARAKEET = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "pos": "relative_k_proj",
             "u": "bias_u", "v_bias": "bias_v"}  # fmt: skip

# Each config class's defaults of the keys the attention reads (`to_dict()` of the class; the
# test compares them with the classes' own, as printed), and its module's names.
DEFAULTS = {
    "wav2vec2-conformer": {"hidden_size": 768, "num_attention_heads": 12,
                           "position_embeddings_type": "relative", "rotary_embedding_base": 10000},
    "wav2vec2-bert": {"hidden_size": 1024, "num_attention_heads": 16,
                      "position_embeddings_type": "relative_key", "rotary_embedding_base": 10000},
    "seamless_m4t": {"hidden_size": 1024, "speech_encoder_attention_heads": 16,
                     "position_embeddings_type": "relative", "rotary_embedding_base": 10000},
    "parakeet_encoder": {"hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 8,
                         "attention_bias": True},
    "nemotron_asr_streaming_encoder": {"hidden_size": 1024, "num_attention_heads": 8,
                                       "num_key_value_heads": 8, "attention_bias": True},
}  # fmt: skip
_HEADS_KEY = {"seamless_m4t": "speech_encoder_attention_heads"}
# Configs that hold a Conformer encoder as `encoder_config`.
_PARENTS = (
    "parakeet_ctc",
    "parakeet_tdt",
    "canary",
    "cohere_asr",
    "nemotron_asr_streaming",
    "nemotron3_5_asr",
)

# Relative attention of other kinds, refused by name.
_REFUSED = {
    "seamless_m4t_v2": "its speech encoder's positions are Shaw's `relative_key` (a learned distance table "
    "clipped to [-64, 8]) with chunked attention",
    "gemma3n_audio": "its audio encoder attends within chunks, and its relative sinusoid ([sin | cos] "
    "halves, its own timescales) has no per-head biases",
    "gemma4_audio": "its audio encoder attends within chunks, and its relative sinusoid ([sin | cos] "
    "halves, its own timescales) has no per-head biases",
    "xlnet": "XLNet's two-stream attention adds a segment term (`r_s_bias`, `seg_embed`) and a memory",
    "funnel": "Funnel's attention pools its queries and adds a segment term",
    "fastspeech2_conformer": "its encoder's and decoder's attention are read from `encoder_config` and "
    "`decoder_config`, which is not done yet",
}
_TYPES_REFUSED = {
    "relative_key": "Shaw's `relative_key` (a learned distance table clipped to "
    "[-left_max_position_embeddings, right_max_position_embeddings])",
}

TYPES = (*DEFAULTS, *_PARENTS, *_REFUSED)


class ConformerAttention(NamedTuple):
    """What a Conformer self-attention module is, for the layer and the weight loader."""

    model_type: str
    hidden_size: int
    heads: int
    head_dim: int
    relative: bool  # Transformer-XL's positions (`position_embeddings_type="relative"`)
    rotary_base: float | None  # the hidden states turned before the projections ("rotary")
    biases: bool  # the query, key, value and output projections have biases
    names: dict


def read(config):
    """The self-attention of a Conformer encoder config, or a `ValueError` naming what is not
    read."""
    given = _hf_config.as_dict(config)
    model_type = given.get("model_type")
    if model_type in _PARENTS:
        encoder = _hf_config.as_dict(given.get("encoder_config") or {})
        given, model_type = encoder, encoder.get("model_type")
    if model_type in _REFUSED:
        raise ValueError(f"model_type={model_type!r} is not read: {_REFUSED[model_type]}.")
    if model_type not in DEFAULTS:
        raise ValueError(
            f"`config` must be a Conformer encoder's config (one of {sorted(DEFAULTS)}, or a config holding "
            f"one as `encoder_config`: {sorted(_PARENTS)}). Received: model_type={model_type!r}"
        )
    read = {**DEFAULTS[model_type], **{k: v for k, v in given.items() if v is not None}}
    hidden = _validation.positive_int("hidden_size", read["hidden_size"])
    heads_key = _HEADS_KEY.get(model_type, "num_attention_heads")
    heads = _validation.positive_int(heads_key, read[heads_key])
    # Parakeet's have no switch; `None` given is no positions at all.
    kind = (
        given["position_embeddings_type"]
        if "position_embeddings_type" in given
        else read.get("position_embeddings_type", "relative")
    )
    if kind in _TYPES_REFUSED:
        raise ValueError(
            f"The {model_type!r} config's `position_embeddings_type` is {_TYPES_REFUSED[kind]}, which is not "
            f'built; "relative" (Transformer-XL\'s) is. Received: position_embeddings_type={kind!r}'
        )
    if kind not in ("relative", "rotary", None):
        raise ValueError(
            '`position_embeddings_type` must be "relative", "rotary", "relative_key" or None. '
            f"{_validation.received('position_embeddings_type', kind)}"
        )
    if kind == "rotary" and "rotary_embedding_base" not in read:
        raise ValueError(
            f"The {model_type!r} attention has no rotary path (`position_embeddings_type` 'rotary' is "
            "Wav2Vec2-Conformer's). Received: position_embeddings_type='rotary'"
        )
    parakeet = model_type in ("parakeet_encoder", "nemotron_asr_streaming_encoder")
    head_dim = read.get("head_dim") if parakeet else None
    if head_dim is None:
        head_dim = _validation.head_size("hidden_size", hidden, heads_key, heads)
    head_dim = _validation.positive_int("head_dim", head_dim)
    if parakeet and read["num_key_value_heads"] != heads:
        raise ValueError(
            f"A {model_type!r} attention with {read['num_key_value_heads']} key-value heads for {heads} "
            "query heads is grouped-query attention: build a `GroupQueryAttention` with a "
            "`TransformerXLPositionBias`. "
            f"Received: num_key_value_heads={read['num_key_value_heads']}"
        )
    biases = bool(read["attention_bias"]) if parakeet else True
    rotary_base = float(read["rotary_embedding_base"]) if kind == "rotary" else None
    return ConformerAttention(
        model_type,
        hidden,
        heads,
        head_dim,
        kind == "relative",
        rotary_base,
        biases,
        _PARAKEET if parakeet else _WAV2VEC2,
    )
