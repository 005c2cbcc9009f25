"""What tf_posenc keeps between calls (`tf_posenc/_kept.py`): named keys, bounds, threads, and
the changes that must not find a stale value."""

import dataclasses
import threading

import numpy as np
import pytest
import tensorflow as tf
from helpers import in_threads

from tf_posenc import PositionalEncoding, RotaryEmbedding, TimestepEmbedding, _kept, _rows, encoding
from tf_posenc._positions import Positions


@dataclasses.dataclass(frozen=True)
class Key:
    name: str


def nbytes(value):
    return value.nbytes


def test_a_store_keeps_the_most_recently_used_within_its_entries_and_bytes():
    store = _kept.Store(entries=3, max_bytes=100, size=nbytes)
    for name in "abc":
        store.get(Key(name), lambda: np.zeros(10, np.int8))
    store.get(Key("a"), lambda: pytest.fail("kept"))  # used again: now the most recent
    store.get(Key("d"), lambda: np.zeros(10, np.int8))
    assert [Key(name) in store for name in "abcd"] == [True, False, True, True]
    store.get(Key("e"), lambda: np.zeros(90, np.int8))  # within 100 bytes: only "d" and "e" fit
    assert [Key(name) in store for name in "acde"] == [False, False, True, True] and store.kept_bytes == 100
    too_large = store.get(Key("f"), lambda: np.zeros(101, np.int8))
    assert too_large.shape == (101,) and Key("f") not in store and len(store) == 2


def test_a_store_refuses_a_key_that_is_not_a_named_record():
    store = _kept.Store(entries=3, max_bytes=100, size=nbytes)
    with pytest.raises(TypeError, match="frozen dataclass"):
        store.get(("tuple", 1), lambda: np.zeros(1))


def test_threads_computing_one_key_at_once_all_get_the_one_kept_value():
    store = _kept.Store(entries=3, max_bytes=100, size=nbytes)
    arrived = threading.Barrier(4)

    def computed(_):
        def compute():
            arrived.wait()  # every thread computes before any keeps
            return np.zeros(4, np.int8)

        return store.get(Key("shared"), compute)

    results, errors = in_threads(computed, [[thread] for thread in range(4)])
    assert errors == [] and len({id(value) for value in results.values()}) == 1
    assert results[0] is store.get(Key("shared"), lambda: pytest.fail("kept"))


def test_one_provider_per_configuration_and_a_new_one_for_any_change():
    frequencies, cosine = encoding.columns(16)
    same = _rows.provider(frequencies, cosine)
    assert _rows.provider(frequencies.copy(), list(cosine)) is same
    changed_frequency = frequencies.copy()
    changed_frequency[3] = np.nextafter(changed_frequency[3], 1.0)  # one ulp: another phase
    changed = [
        _rows.provider(changed_frequency, cosine),
        _rows.provider(frequencies, ~np.asarray(cosine)),
        _rows.provider(frequencies, cosine, fractions=True),
    ]
    assert all(provider is not same for provider in changed)
    assert not np.array_equal(changed[0].limbs, same.limbs) and same.fraction_products is None
    assert changed[2].fraction_products is not None
    # What the backends page says a provider holds: 108 bytes a column, 392 more for fractions.
    assert (same.nbytes, changed[2].nbytes) == (108 * 16, (108 + 392) * 16)
    # Layers of one configuration ask one provider.
    assert PositionalEncoding(64, 16)._provider is PositionalEncoding(2048, 16)._provider


def test_providers_are_kept_within_their_count_and_bytes():
    for scale in range(70):
        _rows.provider(np.full(1024, 1.0 + scale), np.zeros(1024, bool))
    assert len(_kept.PROVIDERS) == 64 and _kept.PROVIDERS.kept_bytes <= _kept.PROVIDER_BYTES
    # A configuration let go is built again, the same constants.
    again = _rows.provider(np.full(1024, 1.0), np.zeros(1024, bool))
    np.testing.assert_array_equal(again.limbs, _rows.provider(np.full(1024, 1.0), np.zeros(1024, bool)).limbs)


def test_kept_constants_are_read_only():
    provider = _rows.provider(*encoding.columns(16), fractions=True)
    arrays = ("limbs", "offsets", "products", "both_offsets", "fraction_products")
    for array in [getattr(provider, name) for name in arrays] + [_rows.SINE_TABLE]:
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1


def test_rows_shared_in_a_graph_follow_the_device_scope():
    provider = _rows.provider(*encoding.columns(8))
    shared = {}

    @tf.function
    def step(start):
        positions = Positions(start=start)
        shared["first"] = provider.rows(positions, 4)
        shared["again"] = provider.rows(positions, 4)
        shared["other length"] = provider.rows(positions, 5)
        shared["scaled"] = provider.rows(positions, 4, scale=0.5)
        with tf.device("/CPU:0"):
            shared["cpu scope"] = provider.rows(positions, 4)
        return shared["first"]

    step(tf.constant(3))
    assert shared["again"] is shared["first"]
    others = ("other length", "scaled", "cpu scope")
    assert all(shared[name] is not shared["first"] for name in others)
    assert "CPU:0" in shared["cpu scope"].device and "CPU:0" not in shared["first"].device


def test_a_changed_policy_of_the_bias_layer_is_not_served_its_old_bias():
    key = _kept.SharedBiasKey("bias", "float32", (1, 4), "")
    assert key != dataclasses.replace(key, policy="mixed_bfloat16")
    assert key != dataclasses.replace(key, device="/device:CPU:0")


@pytest.mark.slow
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: PositionalEncoding(2**20, 32), id="encoding"),
        pytest.param(
            lambda: RotaryEmbedding(rope_type="dynamic_ntk", scaling_factor=2.0, max_position_embeddings=512),
            id="dynamic-ntk",
        ),
        pytest.param(lambda: TimestepEmbedding(32), id="timesteps"),
    ],
)
def test_threads_on_layers_of_one_configuration_get_a_fresh_layers_bits(make):
    # Dynamic NTK's frequencies follow each call's extent: a provider per extent, asked for by
    # every call (it runs op by op), the store filled and emptied as the threads go.
    _kept.PROVIDERS.clear()
    layer_of_thread = [make() for _ in range(4)]
    fresh = make()
    x = tf.random.stateless_normal(
        (1, 3, 2, 32) if isinstance(fresh, RotaryEmbedding) else (1, 3, 32), (5, 6)
    )

    def called(layer, start):
        if isinstance(layer, TimestepEmbedding):
            return layer(tf.constant([start + 0.25, -start, start], tf.float32)).numpy()
        return layer(x, start_index=start).numpy()

    starts = [[(thread, start) for start in range(thread, 4000, 797)] for thread in range(4)]
    results, errors = in_threads(lambda item: called(layer_of_thread[item[0]], item[1]), starts)
    assert errors == []
    for (_, start), got in results.items():
        np.testing.assert_array_equal(got, called(fresh, start))
