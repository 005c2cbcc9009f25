"""`hf_position_ids` against the rows transformers 5.25's models read from their learned position
tables (recorded by `print_transformers.py position_ids` from tiny models of each type), and
against NumPy restatements of transformers' rules on random padded batches."""

import json
import pathlib

import keras
import numpy as np
import pytest

from tf_posenc import hf_position_ids
from tf_posenc import position_ids as module

PRINTED = json.loads((pathlib.Path(__file__).parent / "transformers_position_ids_5_25.json").read_text())
TYPES = PRINTED["types"]


def config_of(model_type):
    """The tiny model's config: its 64 positions and the pad token its batch was padded with."""
    printed = TYPES[model_type]
    return {
        "model_type": model_type,
        "pad_token_id": printed["input_ids"][0][-1],
        "max_position_embeddings": 64,
    }


def rows(*args, **kwargs):
    return keras.ops.convert_to_numpy(hf_position_ids(*args, **kwargs))


def test_every_model_type_read_was_printed_and_every_printed_type_is_read():
    assert set(TYPES) == set(module._RULES)
    assert not [model_type for model_type, printed in TYPES.items() if "error" in printed]


@pytest.mark.parametrize("model_type", sorted(TYPES))
def test_the_rows_are_the_ones_the_model_reads_in_a_padded_batch(model_type):
    # Row 0 right-padded, row 1 left-padded, the attention mask zero on the padding; each table
    # of the model (an encoder-decoder's two) read the same rows.
    printed = TYPES[model_type]
    ours = rows(config_of(model_type), printed["input_ids"], printed["attention_mask"])
    assert ours.shape == (2, 6) and ours.dtype == np.int32
    for table, read in printed["padded"].items():
        # Longformer and LED pad their inputs to a multiple of their window (8 positions): the
        # rows of the six given come first.
        read = np.asarray(read)[..., :6]
        np.testing.assert_array_equal(ours, np.broadcast_to(read, (2, 6)), err_msg=table)


CACHED = sorted(model_type for model_type, printed in TYPES.items() if "cache" in printed)


@pytest.mark.parametrize("model_type", CACHED)
def test_the_rows_follow_a_cache(model_type):
    # Three tokens cached, then the next three with the attention mask of all six.
    # (ProphetNet's decoder: five cached, then one.)
    printed = TYPES[model_type]
    past = printed.get("cache_past_length", 3)
    ids, mask = np.asarray(printed["input_ids"]), np.asarray(printed["attention_mask"])
    ours = rows(config_of(model_type), ids[:, past:], mask, past_length=past)
    decoder = {table: read for table, read in printed["cache"].items() if not table.startswith("encoder.")}
    (read,) = decoder.values()
    np.testing.assert_array_equal(ours, np.broadcast_to(read, (2, 6 - past)))


def roberta_rows(ids, pad, past):
    """transformers' `create_position_ids_from_input_ids`, restated in NumPy."""
    real = (ids != pad).astype(np.int64)
    return (np.cumsum(real, axis=1) + past) * real + pad


def opt_rows(mask, past):
    """OPT's `OPTLearnedPositionalEmbedding.forward` (its `offset` 2), restated in NumPy."""
    counted = np.cumsum(mask, axis=1) * mask - 1
    return counted[:, past:] + 2


@pytest.mark.parametrize("seed", range(3))
def test_rules_are_transformers_on_random_padded_batches(seed):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        batch, length, past = rng.integers(1, 5), rng.integers(1, 12), int(rng.integers(0, 6))
        ids = rng.integers(0, 6, size=(batch, length))  # pad 1 often, on either side and inside
        mask = rng.integers(0, 2, size=(batch, past + length))
        np.testing.assert_array_equal(
            rows({"model_type": "xlm-roberta", "pad_token_id": 1}, ids, past_length=past),
            roberta_rows(ids, 1, past),
        )
        np.testing.assert_array_equal(rows({"model_type": "opt"}, ids, mask, past), opt_rows(mask, past))
        arange = np.broadcast_to(np.arange(past, past + length), (batch, length))
        np.testing.assert_array_equal(rows({"model_type": "gpt2"}, ids, mask, past), arange)
        np.testing.assert_array_equal(rows({"model_type": "mbart"}, ids, past_length=past), arange + 2)


def test_without_input_ids_the_length_comes_from_the_mask():
    # RoBERTa's `create_position_ids_from_inputs_embeds`: no padding is seen, rows from pad + 1.
    np.testing.assert_array_equal(
        rows({"model_type": "roberta"}, attention_mask=np.ones((2, 4))), [[2, 3, 4, 5]] * 2
    )
    np.testing.assert_array_equal(rows({"model_type": "opt"}, attention_mask=[[0, 1, 1]]), [[1, 2, 3]])
    np.testing.assert_array_equal(
        rows({"model_type": "bert"}, attention_mask=np.ones((1, 5)), past_length=2), [[2, 3, 4]]
    )


def test_an_embedding_of_the_rows_is_the_models_position_embedding_in_a_keras_model():
    table = np.random.default_rng(0).normal(size=(514, 8)).astype("float32")  # RoBERTa's 514 rows
    config = {"model_type": "roberta", "pad_token_id": 1, "max_position_embeddings": 514}
    tokens = keras.Input((None,), dtype="int32")
    embedding = keras.layers.Embedding(514, 8, weights=[table])
    model = keras.Model(tokens, embedding(hf_position_ids(config, tokens)))
    ids = np.array([[0, 713, 16, 2, 1, 1], [1, 1, 0, 713, 16, 2]])
    expected = table[roberta_rows(ids, 1, 0)]
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model(ids)), expected)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(embedding(hf_position_ids(config, ids))), expected
    )
    # Rows that count positions, in a model whose inputs' length is known only when it runs,
    # compiled too.
    bert = keras.Model(tokens, hf_position_ids({"model_type": "bert"}, tokens, past_length=3))
    bert.compile(jit_compile=True)
    assert bert.predict(ids[:, :4], verbose=0).tolist() == [[3, 4, 5, 6]] * 2
    opt = keras.Model(tokens, hf_position_ids({"model_type": "opt"}, attention_mask=tokens))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(opt(np.array([[0, 1, 1]]))), [[1, 2, 3]])


def test_dual_encoders_read_their_text_towers_rule():
    ids = [[49406, 320, 49407, 1, 1]]
    assert rows({"model_type": "clip"}, ids).tolist() == [[0, 1, 2, 3, 4]]
    clap = {"model_type": "clap", "text_config": {"pad_token_id": 1}}  # RoBERTa's rule
    assert rows(clap, [[0, 713, 2, 1, 1]]).tolist() == [[2, 3, 4, 1, 1]]
    np.testing.assert_array_equal(
        rows(clap, [[0, 713, 2, 1]]), rows({"model_type": "clap_text_model"}, [[0, 713, 2, 1]])
    )


@pytest.mark.parametrize(
    "config, arguments, message",
    [
        ({"model_type": "tapas"}, {"input_ids": [[1]]}, "TAPAS's rows restart in each table cell"),
        ({"model_type": "grounding-dino"}, {"input_ids": [[1]]}, "rows restart in each phrase"),
        ({"model_type": "llama"}, {"input_ids": [[1]]}, "Received: model_type='llama'"),
        (
            {"model_type": "prophetnet"},
            {"input_ids": [[1, 2]], "past_length": 3},
            "one token at a time",
        ),
        (
            {"model_type": "deberta-v2", "position_biased_input": False},
            {"input_ids": [[1]]},
            "no learned table",
        ),
        ({"model_type": "esm", "position_embedding_type": "rotary"}, {"input_ids": [[1]]}, "it rotates"),
        ({"model_type": "distilbert"}, {"input_ids": [[1]], "past_length": 2}, "takes no cache"),
        ({"model_type": "esm"}, {"input_ids": [[1]]}, "Received: pad_token_id=None"),
        (
            {"model_type": "bert"},
            {"input_ids": np.ones((1, 513))},
            "row 512 of a 'bert' position table of 512",
        ),
        ({"model_type": "bart"}, {"input_ids": [[1]], "past_length": 1024}, "of 1026 rows"),
        (
            {"model_type": "opt"},
            {"input_ids": [[1, 2]], "attention_mask": [[1, 1]], "past_length": 1},
            "past_length",
        ),
        ({"model_type": "gpt2"}, {}, "`input_ids` or `attention_mask` must be given"),
        ({"model_type": "gpt2"}, {"input_ids": [1, 2]}, "`input_ids` must be 2-D"),
        (
            {"model_type": "gpt2"},
            {"input_ids": [[1]], "past_length": -1},
            "`past_length` must be a non-negative",
        ),
    ],
    ids=[
        "tapas",
        "grounding_dino",
        "rotary_decoder",
        "prophetnet_step",
        "deberta_v3",
        "esm_rotary",
        "no_cache",
        "no_pad",
        "bert_table",
        "bart_table",
        "mask_length",
        "no_input",
        "rank",
        "past",
    ],
)
def test_bad_configs_and_inputs_are_named(config, arguments, message):
    with pytest.raises(ValueError) as error:
        hf_position_ids(config, **arguments)
    assert message in str(error.value)


def test_multimodal_models_read_their_language_models_rule():
    # BLIP-2's OPT (its default language model) and Florence-2's BART: the parent config is enough.
    ids, mask = [[5, 6, 7, 1, 1]], [[1, 1, 1, 0, 0]]
    blip2 = rows({"model_type": "blip-2", "text_config": {"pad_token_id": 1}}, ids, mask)
    np.testing.assert_array_equal(blip2, rows({"model_type": "opt"}, ids, mask))
    np.testing.assert_array_equal(blip2, [[2, 3, 4, 1, 1]])
    florence = rows({"model_type": "florence2", "text_config": {"model_type": "bart"}}, ids, past_length=2)
    np.testing.assert_array_equal(florence, [[4, 5, 6, 7, 8]])
    with pytest.raises(ValueError, match="its sinusoidal table"):
        hf_position_ids({"model_type": "trocr", "use_learned_position_embeddings": False}, ids)
