"""Encoders whose attention has no positions inside it (BERT's layout and DistilBERT's), read by
`MultiHeadAttention.from_hf_config` and loaded by `load_hf_attention_weights`, against transformers
5.25's modules run whole in float64 with `module_weights` under their own names on a padded batch
(`print_transformers.py plain_attention`, `tests/transformers_plain_attention_5_25.json`)."""

import json
import pathlib
import re

import keras
import numpy as np
import pytest
from fingerprints import module_weights
from test_deberta_attention import inputs  # the same padded batch as the DeBERTa printer's

import tf_posenc
from tf_posenc import _hf_plain_defaults

PRINTED = json.loads((pathlib.Path(__file__).parent / "transformers_plain_attention_5_25.json").read_text())
TYPES = PRINTED["types"]
# Refused by the mechanism their module's code shows (a forward argument or a config key beyond a
# plain attention's), with the words of the error.
REFUSED = {"layoutlmv3": "`position_bias`", "git": "`num_image_with_embedding`", "mra": "`approx_mode`"}
# LayoutLM's, MarkupLM's and Splinter's modules take their softmax in float32 whatever they run in
# (`softmax(..., dtype=torch.float32)`): 3.1e-7 of the largest output at most.
BOUNDS = dict.fromkeys(("layoutlm", "markuplm", "splinter"), 1e-6)


def built(model_type):
    entry = TYPES[model_type]
    config = {"model_type": model_type, **entry["config"], "num_hidden_layers": 1, "n_layers": 1}
    layer = tf_posenc.MultiHeadAttention.from_hf_config(config, 0, dtype="float64")
    weights = {entry["prefix"] + name: value for name, value in module_weights(entry["shapes"]).items()}
    prefix = entry["prefix"] + ("self." if entry["layout"] == "bert" else "")
    return layer, weights, prefix


@pytest.mark.parametrize("model_type", sorted(set(TYPES) - set(REFUSED)))
def test_the_attention_is_transformers_module_whole(model_type):
    layer, weights, prefix = built(model_type)
    tf_posenc.load_hf_attention_weights(layer, weights, prefix)
    hidden, mask = inputs()
    pairs = mask[:, :, None] & mask[:, None, :]
    ours = keras.ops.convert_to_numpy(layer(hidden, hidden, attention_mask=pairs))
    printed = np.asarray(TYPES[model_type]["output"]).reshape(ours.shape)
    # Every row, the padded queries' too (uniform over the keys in transformers, as here), except
    # where transformers' own module gives NaN there (LayoutLM's, MarkupLM's and Splinter's add
    # the dtype's minimum to scores that overflow it): a real token's row never is.
    rows = ~np.isnan(printed).any(-1)
    assert rows[mask].all()
    bound = BOUNDS.get(model_type, 1e-10)
    assert np.abs(ours[rows] - printed[rows]).max() <= bound * np.abs(printed[rows]).max()


def test_every_plain_type_printed_is_read_or_refused_by_its_mechanism():
    assert set(_hf_plain_defaults.TYPES) == set(TYPES)
    assert {"bert", "roberta", "xlm-roberta", "electra", "camembert", "distilbert", "esm"} <= set(TYPES)
    assert TYPES["esm"]["config"]["position_embedding_type"] == "rotary"  # ESM-2's, rotating
    sizes = {"model_type": "esm", "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1}
    for kind, rotates in (("rotary", True), ("absolute", False)):
        layer = tf_posenc.MultiHeadAttention.from_hf_config({**sizes, "position_embedding_type": kind}, 0)
        assert (layer.rope is not None) == rotates and layer.is_causal is (False if rotates else None)
    for model_type, words in REFUSED.items():
        with pytest.raises(ValueError, match=f"needs a mechanism.*{words}"):
            built(model_type)


def test_loading_names_every_weight_it_misses_or_leaves_and_survives_a_reload(tmp_path):
    layer, weights, prefix = built("bert")
    missing = {name: value for name, value in weights.items() if not name.endswith("output.dense.bias")}
    with pytest.raises(ValueError, match=r"has no `encoder\.layer\.0\.attention\.output\.dense\.bias`"):
        tf_posenc.load_hf_attention_weights(layer, missing, prefix)
    extra = {**weights, f"{prefix}distance_embedding.weight": np.zeros((3, 4))}
    with pytest.raises(ValueError, match="distance_embedding.weight` under"):
        tf_posenc.load_hf_attention_weights(layer, extra, prefix)
    with pytest.raises(ValueError, match="ending in `self.`"):
        tf_posenc.load_hf_attention_weights(layer, weights, prefix[: -len("self.")])
    hidden = keras.Input((None, 32), dtype="float64")
    keras.Model(hidden, layer(hidden, hidden)).save(tmp_path / "bert.keras")
    reloaded = keras.saving.load_model(tmp_path / "bert.keras").layers[1]
    tf_posenc.load_hf_attention_weights(reloaded, weights, prefix)
    tf_posenc.load_hf_attention_weights(layer, weights, prefix)
    x = inputs()[0]
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(reloaded(x, x)), keras.ops.convert_to_numpy(layer(x, x))
    )


# Printed by transformers 5.25.0 (torch 2.13.0): `print_transformers.py ports`, `BertModel` of
# `port_weights.BERT` with `bert_weights` in float64 and eager attention, on `BERT_TOKENS` with
# their padding mask and `BERT_SEGMENTS`: `last_hidden_state[:, :, :4]`.
TRANSFORMERS_BERT = np.array(
    [
        [
            [-0.07979383, -0.68386549, -0.97345851, -2.16125312],
            [1.22810158, 0.30885516, -0.7161862, -1.63523591],
            [-0.14404191, -0.68416416, -0.24560859, -1.93408043],
            [0.23714631, -0.6120683, -1.28088182, -2.00010753],
            [0.81424873, 0.54418878, -1.64749589, -2.24695296],
            [0.91480989, -1.64824654, -1.49750562, -0.27554377],
            [0.15805865, -0.4304779, -1.33207198, -0.76287002],
            [0.86680822, -0.45235068, -1.71712762, -1.44200354],
        ],
        [
            [0.18160592, -0.39216146, -0.75147951, -2.52019741],
            [0.67421197, -0.45362486, -1.5833165, -0.89263202],
            [0.60790988, -0.17760429, -0.68360559, -1.8072269],
            [0.22545462, -0.52420309, -0.87382436, -1.98035541],
            [1.23909971, 0.46507922, -0.91006439, -2.12600397],
            [0.83572882, -0.30046655, -1.48563037, -0.58062976],
            [1.1404332, -0.12912, -0.30282592, -0.82417181],
            [0.62301793, 0.04880502, -0.91424767, -1.44329696],
        ],
    ]
)


def test_the_encoders_page_bert_is_transformers_bert_model():
    from port_weights import BERT, BERT_SEGMENTS, BERT_TOKENS, bert_weights

    text = (pathlib.Path(__file__).parent.parent / "docs" / "encoders.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- bert-port -->\n```python\n(.*?)```", text, re.S).group(1)
    page = {}
    exec(compile(block, "docs/encoders.md (bert-port)", "exec"), page)
    encoder = page["Encoder"](BERT, bert_weights(BERT))
    hidden = keras.ops.convert_to_numpy(encoder(BERT_TOKENS, BERT_SEGMENTS, BERT_TOKENS != 0))
    # float32 against transformers' float64: every token's, the pads' too (they see the real keys).
    assert np.abs(hidden[:, :, :4] - TRANSFORMERS_BERT).max() <= 1e-5
