"""The rows of a learned position table that each token of a Hugging Face model reads, as
transformers 5.25 computes them for that model type: offsets, padding rows and caches included."""

import keras
from keras import ops

from tf_posenc import _hf_config, _hf_position_defaults, _positions, _validation

# How each model type picks a token's row (transformers 5.25's code), and the rows its table
# has beyond `max_position_embeddings`:
# - "arange": position `past_length + i` (BERT's `position_ids` buffer sliced at the cache's length,
#   GPT-2's `arange + past_seen_tokens`, Blenderbot's and BigBird-Pegasus' learned tables);
# - "arange, no cache": `i`, in encoders that take no cache;
# - "arange + 2": `past_length + i + 2` (BART's `offset = 2`; MRA's, Nystromformer's and YOSO's
#   buffers hold `arange + 2`);
# - "padding": RoBERTa's `create_position_ids_from_input_ids`, `(cumsum(ids != pad) + past_length)
#   * (ids != pad) + pad`: real tokens count from `pad + 1`, padding reads row `pad`;
# - "attention mask": OPT's, `(cumsum(mask) * mask - 1)[:, past_length:] + 2`;
# - "arange + pad + 1": ProphetNet's, `past_length + i + 1 + pad` (its encoder and decoder pass no
#   mask to its table; after a cache its decoder steps one token at a time);
# - "zeros": the Decision Transformer's, row 0 for every token (its steps are in its own table).
_RULES = {
    **dict.fromkeys(
        ["bert", "bert-generation", "big_bird", "electra", "ernie", "megatron-bert", "rembert", "roc_bert",
         "xlm", "flaubert", "gpt2", "gpt-sw3", "gpt_neo", "gpt_bigcode", "blenderbot", "blenderbot-small",
         "bigbird_pegasus", "led", "whisper", "clvp_decoder", "git", "imagegpt"],
        "arange",
    ),
    **dict.fromkeys(
        ["albert", "convbert", "distilbert", "fnet", "layoutlm", "mobilebert", "splinter", "squeezebert",
         "openai-gpt", "visual_bert", "deberta", "deberta-v2", "clip_text_model", "siglip_text_model",
         "siglip2_text_model", "owlvit_text_model", "owlv2_text_model", "groupvit_text_model",
         "clipseg_text_model", "aimv2_text_model", "metaclip_2_text_model", "chinese_clip_text_model",
         "align_text_model", "flava_text_model", "blip_text_model", "dpr", "canine", "xclip_text_model",
         "bros", "lxmert", "vilt", "perceiver"],
        "arange, no cache",
    ),
    **dict.fromkeys(["bart", "mbart", "plbart", "mvp", "biogpt", "trocr"], "arange + 2"),
    **dict.fromkeys(["mra", "nystromformer", "yoso", "pp_formulanet_text"], "arange + 2, no cache"),
    **dict.fromkeys(
        ["roberta", "roberta-prelayernorm", "camembert", "xlm-roberta", "xlm-roberta-xl", "data2vec-text",
         "xmod"],
        "padding",
    ),
    **dict.fromkeys(
        ["mpnet", "lilt", "markuplm", "esm", "luke", "layoutlmv3", "longformer", "altclip_text_model",
         "clap_text_model", "ibert", "bridgetower_text_model"],
        "padding, no cache",
    ),
    "opt": "attention mask",
    "prophetnet": "arange + pad + 1",
    "decision_transformer": "zeros",
}  # fmt: skip
# Model types whose learned table is read by a rule of another kind, refused by name.
_OTHER_RULES = {
    "tapas": "TAPAS's rows restart in each table cell, from the column and row of `token_type_ids`",
    "grounding-dino": "Grounding DINO's rows restart in each phrase of the text, delimited by its "
    "special tokens (`generate_masks_with_special_tokens_and_transfer_map`)",
    "mm-grounding-dino": "MM Grounding DINO's rows restart in each phrase of the text, delimited by its "
    "special tokens (`generate_masks_with_special_tokens_and_transfer_map`)",
    "bark": "Bark's config holds three GPT-like models (semantic, coarse and fine acoustics), each with a "
    "table of its own, read as GPT-2's (`past_length + i`)",
    "reformer": "Reformer's default positions are axial (`axial_pos_embds`: two tables combined), and its "
    "inputs are padded to a multiple of its chunks",
    "evolla": "Evolla's table belongs to its protein encoder (`protein_encoder_config`), which rotates "
    "unless `position_embedding_type='absolute'`",
    "pp_doclayout_v2": "PP-DocLayoutV2's reading-order model builds its token ids from the detector's boxes",
    "cohere_asr": "Cohere ASR's decoder table (`pos_emb`) is read inside its speech model, as GPT-2's "
    "(`past_length + i`); its config is the speech model's",
}
# The key of the table's size where it is not `max_position_embeddings` (GPT-2's `n_positions`).
_SIZE_KEYS = ("max_position_embeddings", "n_positions", "max_target_positions")
_EXTRA_ROWS = {"arange + 2": 2, "arange + 2, no cache": 2, "attention mask": 2}
# Dual encoders whose text tower holds the table: their configs' `text_config`.
_TEXT_TOWERS = {
    name: f"{name}_text_model"
    for name in ("clip", "siglip", "siglip2", "owlvit", "owlv2", "groupvit", "clipseg", "aimv2", "metaclip_2",
                 "altclip", "chinese_clip", "align", "clap", "flava", "blip", "xclip", "bridgetower")
}  # fmt: skip
# Settings under which a model type has no learned table of positions.
_NO_TABLE = {
    "deberta": ("position_biased_input", False, "its relative positions: `deberta_relative_positions`"),
    "deberta-v2": ("position_biased_input", False, "its relative positions: `deberta_relative_positions`"),
    "esm": ("position_embedding_type", "rotary", "it rotates: `RotaryEmbedding.from_hf_config`"),
    "trocr": ("use_learned_position_embeddings", False, "its sinusoidal table"),
}
# Multimodal models whose language model holds the table: its config, and its type by default.
_LANGUAGE_MODELS = {
    "blip-2": ("text_config", "opt"),
    "instructblip": ("text_config", "opt"),
    "instructblipvideo": ("text_config", "opt"),
    "florence2": ("text_config", "bart"),
    "pp_formulanet": ("text_config", "pp_formulanet_text"),
    "sam3": ("text_config", "clip_text_model"),
}
MODEL_TYPES = tuple(sorted({*_RULES, *_TEXT_TOWERS, *_LANGUAGE_MODELS}))


def hf_position_ids(config, input_ids=None, attention_mask=None, past_length=0):
    """The row of its learned position table that each token reads, as transformers 5.25
    computes it for the config's model type.

    With the checkpoint's table in a `keras.layers.Embedding`, `embedding(hf_position_ids(...))`
    is the model's position embedding. The rule depends on the model type:

    * BERT, GPT-2, ELECTRA, XLM, Blenderbot and the like: `past_length + i` (encoders that take
      no cache, such as ALBERT and DistilBERT: `i`);
    * BART, mBART, PLBart, MVP and BioGPT: `past_length + i + 2`; MRA, Nystromformer and YOSO:
      `i + 2`;
    * RoBERTa, XLM-R, CamemBERT, Data2VecText (and, without a cache, MPNet, LiLT, MarkupLM and
      ESM): real tokens count from `pad_token_id + 1` in `input_ids`, padding reads row
      `pad_token_id`, and `past_length` is added to the count;
    * OPT: `attention_mask` counts the real tokens from row 2 (padding reads row 1), over the
      cached tokens and the new ones;
    * Whisper's decoder and CLVP's: `past_length + i`; ProphetNet: `past_length + i + 1 +
      pad_token_id` (after a cache, one token a step); the Decision Transformer: row 0 for every
      token (its timesteps have a table of their own);
    * the text towers of CLIP, SigLIP, OWL-ViT, AltCLIP, CLAP, BLIP and the other dual encoders
      (given the whole config or its `text_config`): `i`, or RoBERTa's rule for AltCLIP's and
      CLAP's.

    The attention mask decides the rows of OPT only, as in transformers: the others' rows do not
    depend on it. Tables read by rules of another kind (TAPAS's cells, Grounding DINO's phrases)
    and those of other model types (sinusoids, patch grids) are refused by name.

    Args:
        config: A transformers config, its dict, a `config.json` path or a checkpoint folder.
        input_ids: Integers `(batch, seq_len)`: the tokens of this call (after `past_length`
            cached ones). Needed by the RoBERTa family, which finds padding in them.
        attention_mask: Integers or booleans `(batch, past_length + seq_len)`, 1 on real tokens:
            needed by OPT (all ones when `None`); gives the length when `input_ids` is `None`.
        past_length: Non-negative integer: tokens already cached. Defaults to `0`.

    Returns:
        An int32 tensor `(batch, seq_len)` of rows.

    Example:

        >>> ids = [[0, 31414, 232, 2, 1, 1], [1, 1, 0, 31414, 232, 2]]  # right and left padding
        >>> hf_position_ids({"model_type": "roberta", "pad_token_id": 1}, ids).numpy().tolist()
        [[2, 3, 4, 5, 1, 1], [1, 1, 2, 3, 4, 5]]
        >>> hf_position_ids({"model_type": "bart"}, [[0, 100, 2]], past_length=4).numpy().tolist()
        [[6, 7, 8]]
    """
    whole = _hf_config.as_dict(config)
    model_type = whole.get("model_type")
    if model_type in _TEXT_TOWERS:  # CLIP's and the other dual encoders' text tower
        whole = {
            **_hf_config.as_dict(whole.get("text_config") or {}),
            "model_type": _TEXT_TOWERS[model_type],
        }
        model_type = whole["model_type"]
    if model_type in _LANGUAGE_MODELS:  # BLIP-2's OPT, Florence-2's BART
        key, default = _LANGUAGE_MODELS[model_type]
        whole = {"model_type": default, **_hf_config.as_dict(whole.get(key) or {})}
        model_type = whole["model_type"]
    if model_type in _NO_TABLE:
        key, value, instead = _NO_TABLE[model_type]
        if whole.get(key, "absent") == value:
            raise ValueError(
                f"A {model_type!r} model with `{key}={value!r}` adds no learned table of positions "
                f"({instead}). Received: {key}={value!r}"
            )
    if model_type in _OTHER_RULES:
        raise ValueError(f"model_type={model_type!r} is not read: {_OTHER_RULES[model_type]}.")
    if model_type not in _RULES:
        raise ValueError(
            "`config` must be of a model type with a learned table of token positions whose rows "
            f"tf_posenc reads: one of {list(MODEL_TYPES)}. Received: model_type={model_type!r}"
        )
    rule = _RULES[model_type]
    defaults = _hf_position_defaults.DEFAULTS[model_type]
    past_length = _validation.non_negative_int("past_length", past_length)
    if past_length and rule.endswith("no cache"):
        raise ValueError(
            f"A {model_type!r} model takes no cache, so its rows do not follow cached tokens. "
            f"Received: past_length={past_length}"
        )
    ids = None if input_ids is None else ops.cast(ops.convert_to_tensor(input_ids), "int32")
    mask = None if attention_mask is None else ops.cast(ops.convert_to_tensor(attention_mask), "int32")
    for name, value in (("input_ids", ids), ("attention_mask", mask)):
        if value is not None and len(value.shape) != 2:
            raise ValueError(
                f"`{name}` must be 2-D, (batch, length). Received: {name} of shape {tuple(value.shape)}"
            )
    if ids is None and mask is None:
        raise ValueError("`input_ids` or `attention_mask` must be given. Received: neither")
    known = ids is not None and mask is not None and None not in (ids.shape[1], mask.shape[1])
    if known and mask.shape[1] != past_length + ids.shape[1]:
        raise ValueError(
            "`attention_mask` must cover the cached tokens and the new ones, past_length + seq_len = "
            f"{past_length + ids.shape[1]}. Received: attention_mask of shape {tuple(mask.shape)}"
        )
    # 1, 2, ..., seq_len in every row, from the tensors themselves: their lengths may be known
    # only when the graph runs (a Keras input of any length).
    tokens = ids if ids is not None else mask[:, past_length:]
    counting = ops.cumsum(ops.ones_like(tokens, dtype="int32"), axis=1)
    if rule == "arange + pad + 1":
        if past_length and tokens.shape[1] not in (None, 1):
            raise ValueError(
                "After a cache ProphetNet's decoder takes one token at a time (transformers gives every "
                f"token of a longer step one row). Received: past_length={past_length} with "
                f"{tokens.shape[1]} tokens"
            )
        rows = counting + (past_length + _pad_token_id(whole, defaults, model_type))
    elif rule == "zeros":
        rows = counting * 0
    elif rule.startswith("arange"):
        rows = counting + (past_length - 1 + (2 if rule.startswith("arange + 2") else 0))
    elif rule.startswith("padding"):
        pad = _pad_token_id(whole, defaults, model_type)
        if ids is None:  # transformers' `create_position_ids_from_inputs_embeds`
            rows = counting + pad
        else:
            real = ops.cast(ops.not_equal(ids, pad), "int32")
            rows = (ops.cumsum(real, axis=1) + past_length) * real + pad
    else:  # OPT
        if mask is None:
            mask = ops.ones_like(ops.pad(ids, [[0, 0], [past_length, 0]]), dtype="int32")
        counted = ops.cumsum(mask, axis=1) * mask - 1
        rows = counted[:, past_length:] + 2
    _check_table(rows, whole, defaults, model_type, _EXTRA_ROWS.get(rule, 0))
    return rows


def _pad_token_id(whole, defaults, model_type):
    pad = whole.get("pad_token_id", defaults["pad_token_id"])
    if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
        raise ValueError(
            f"A {model_type!r} model finds padding by `pad_token_id`, its padding row: the config "
            f"must give it. Received: pad_token_id={pad!r}"
        )
    return pad


def _check_table(rows, whole, defaults, model_type, extra_rows):
    size = next(
        (whole[key] for key in _SIZE_KEYS if whole.get(key) is not None), defaults["max_position_embeddings"]
    )
    # Checked where the rows are known; in a traced graph the table's own lookup is the check.
    known = None if keras.backend.is_keras_tensor(rows) else _positions._known_value(rows)
    if size is None or known is None or not known.size:
        return
    largest = int(known.max())
    if largest >= size + extra_rows:
        raise ValueError(
            f"The tokens read row {largest} of a {model_type!r} position table of {size + extra_rows} rows "
            f"(max_position_embeddings={size}). Received: a longer input or past_length"
        )
