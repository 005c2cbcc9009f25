"""`deberta_relative_positions` against transformers 5.25's `build_relative_position` and
`make_log_bucket_position` (DeBERTa-v2/v3, SEW-D), from the values
`print_transformers.py deberta` recorded, and against a float64 restatement of them."""

import json
import pathlib

import numpy as np
import pytest

import tf_posenc

PRINTED = json.loads((pathlib.Path(__file__).parent / "transformers_deberta_5_25.json").read_text())
OFFSETS = np.arange(-20000, 20001)


def printed_buckets(pair):
    """The bucket transformers gives each offset of `OFFSETS`, from the recorded runs."""
    starts, buckets = np.array(PRINTED["runs"][pair]).T
    return buckets[np.searchsorted(starts, OFFSETS, side="right") - 1]


def every_offset(bucket_size, max_position):
    """Ours at every offset of `OFFSETS`: a key row for the negative ones, a query column for the
    positive ones (DeBERTa's offset is query - key)."""
    before = tf_posenc.deberta_relative_positions(1, 20001, bucket_size, max_position)[0, 0, ::-1]
    after = tf_posenc.deberta_relative_positions(20001, 1, bucket_size, max_position)[0, 1:, 0]
    return np.concatenate([before, after])


def restated_in_float64(offsets, bucket_size, max_position):
    """transformers' `make_log_bucket_position`, restated in float64; and the value it ceils."""
    mid = bucket_size // 2
    distance = np.where(np.abs(offsets) < mid, mid - 1, np.abs(offsets))
    ceiled = np.log(distance / mid) / np.log((max_position - 1) / mid) * (mid - 1)
    buckets = np.where(distance <= mid, offsets, (np.ceil(ceiled) + mid) * np.sign(offsets))
    return buckets.astype(np.int64), ceiled


@pytest.mark.parametrize("pair", sorted(PRINTED["runs"]))
def test_buckets_are_transformers_at_every_offset_to_20000(pair):
    bucket_size, max_position = map(int, pair.split(","))
    ours = every_offset(bucket_size, max_position)
    np.testing.assert_array_equal(ours, printed_buckets(pair))
    # In float64 the buckets are the same but where the value ceiled sits on an integer, within
    # float32's rounding of it: there float32 and float64 may round to either side.
    restated, ceiled = restated_in_float64(OFFSETS, bucket_size, max_position)
    differ = restated != ours
    assert np.all(np.abs(ceiled[differ] - np.round(ceiled[differ])) < 1e-4), OFFSETS[differ]
    if pair == "256,256":
        assert OFFSETS[differ].tolist() == [-18357, -1292, 1292, 18357]  # why the float32


def test_whole_outputs_are_build_relative_positions():
    np.testing.assert_array_equal(tf_posenc.deberta_relative_positions(5, 9), PRINTED["whole"]["plain"])
    bucketed = tf_posenc.deberta_relative_positions(5, 9, bucket_size=4, max_position=8)
    np.testing.assert_array_equal(bucketed, PRINTED["whole"]["bucketed"])
    assert bucketed.dtype == np.int64 and bucketed.shape == (1, 5, 9)
    # A bucket size or a maximum below 1 leaves the offsets plain, as in transformers.
    np.testing.assert_array_equal(
        tf_posenc.deberta_relative_positions(5, 9, 4, -1), PRINTED["whole"]["plain"]
    )


@pytest.mark.parametrize(
    "arguments, message",
    [
        ((0, 4), "`query_length` must be a positive integer. Received: query_length=0 (of type int)"),
        ((3, 2.0), "`key_length` must be a positive integer. Received: key_length=2.0 (of type float)"),
        ((3, 4, 256.0, 512), "`bucket_size` must be an integer. Received: bucket_size=256.0"),
        ((3, 4, 1, 512), "Received: bucket_size=1, max_position=512"),
        ((3, 4, 256, 129), "Received: bucket_size=256, max_position=129"),
    ],
    ids=["query_length", "key_length", "bucket_size_type", "bucket_size_1", "max_position"],
)
def test_bad_arguments_are_named(arguments, message):
    with pytest.raises(ValueError, match=None) as error:
        tf_posenc.deberta_relative_positions(*arguments)
    assert message in str(error.value)
