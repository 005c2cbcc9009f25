import math

import keras
import numpy as np
from keras import ops

from tf_posenc import _validation
from tf_posenc.layers.base import PositionLayer
from tf_posenc.layers.score_bias import ScoreBiasMixin


def _distance_buckets(num_buckets, max_distance):
    """T5's bucket of each distance `0 .. max_distance` within one direction's `num_buckets`
    (farther distances take the last bucket): `num_buckets // 2` exact ones, then log-spaced ones,
    with T5's (Mesh TensorFlow's and transformers') float32 arithmetic, whose rounding puts some
    distances one bucket away from the float64 formula (20 buckets over 160: distances 10, 20
    and 80)."""
    exact = num_buckets // 2
    distance = np.arange(max_distance + 1)
    with np.errstate(divide="ignore"):  # log(0): a small distance, which takes its own bucket
        scaled = (
            np.log(distance.astype(np.float32) / np.float32(exact))
            / np.float32(math.log(max_distance / exact))
            * np.float32(num_buckets - exact)
        )
    large = exact + np.trunc(np.where(distance < exact, 0, scaled)).astype(np.int64)
    return np.where(distance < exact, distance, np.minimum(large, num_buckets - 1)).astype("int32")


class RelativePositionBiasMixin(ScoreBiasMixin):
    """The body of `RelativePositionBias`, shared by its Keras 3 and tf_keras classes."""

    def __init__(
        self,
        num_heads,
        num_buckets=32,
        max_distance=128,
        bidirectional=True,
        embeddings_initializer="random_normal",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = _validation.positive_int("num_heads", num_heads)
        self.num_buckets = _validation.positive_int("num_buckets", num_buckets)
        self.bidirectional = _validation.boolean("bidirectional", bidirectional)
        per_direction = num_buckets // 2 if bidirectional else num_buckets
        if per_direction < 2:
            raise ValueError(
                "`num_buckets` must leave at least 2 buckets per direction (half of them when "
                "bidirectional): one exact, one log-spaced. "
                f"Received: num_buckets={num_buckets}, bidirectional={bidirectional}"
            )
        exact = per_direction // 2
        self.max_distance = _validation.positive_int("max_distance", max_distance)
        if max_distance <= exact:
            raise ValueError(
                f"`max_distance` must be greater than the {exact} exact buckets of each direction "
                f"(num_buckets={num_buckets}, bidirectional={bidirectional}). "
                f"{_validation.received('max_distance', max_distance)}"
            )
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self._per_direction = per_direction
        self._distance_buckets = _distance_buckets(per_direction, self.max_distance)

    def build(self, input_shape=None):
        self.relative_attention_bias = self.add_weight(
            name="relative_attention_bias",
            shape=(self.num_buckets, self.num_heads),
            initializer=self.embeddings_initializer,
            autocast=False,
        )
        self.built = True

    def buckets(self, relative_positions):
        """T5's bucket of each relative position (key minus query; any integer shape), int32:
        `transformers`' `T5Attention._relative_position_bucket` for every distance."""
        relative = ops.cast(ops.convert_to_tensor(relative_positions), "int32")
        if self.bidirectional:
            offset = ops.cast(ops.greater(relative, 0), "int32") * self._per_direction
            distance = ops.abs(relative)
        else:  # only keys before the query count; later ones share bucket 0
            offset, distance = 0, ops.maximum(-relative, 0)
        table = ops.convert_to_tensor(self._distance_buckets)
        return offset + ops.take(table, ops.minimum(distance, self.max_distance), axis=0)

    def _bias(self, queries, keys, heads):
        if not self.built:  # `bias` may come before any call
            self.build()
        relative = ops.expand_dims(keys, 1) - ops.expand_dims(queries, 2)  # (batch or 1, q_len, k_len)
        values = ops.take(ops.cast(self.relative_attention_bias, "float32"), self.buckets(relative), axis=0)
        return ops.transpose(values, (0, 3, 1, 2))

    def _default_positions(self, q_len, k_len):
        # T5's `compute_bias(query_length, key_length)`: both count from 0.
        return (
            ops.expand_dims(ops.arange(q_len, dtype="int32"), 0),
            ops.expand_dims(ops.arange(k_len, dtype="int32"), 0),
        )

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "num_buckets": self.num_buckets,
            "max_distance": self.max_distance,
            "bidirectional": self.bidirectional,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        }


@keras.saving.register_keras_serializable(package="tf_posenc")
class RelativePositionBias(RelativePositionBiasMixin, PositionLayer):
    """T5's bucketed relative position bias: a learned bias per head for each bucket of
    distances between query and key.

    The relative position `k - q` (T5's sign) falls into one of `num_buckets` buckets (half per
    direction when `bidirectional`, as in T5's encoder; the decoder's causal self-attention uses
    `bidirectional=False`): the first half of a direction's buckets hold one distance each, the
    rest are log-spaced up to `max_distance`, past which every distance shares the last one. The
    buckets are transformers' for every distance: T5's float32 arithmetic, not the float64
    formula, which puts some distances of some configurations one bucket lower. A table
    `(num_buckets, num_heads)` holds each bucket's bias; T5 computes it in its first layer and
    shares it with the others: share one layer. Used by T5, Flan-T5, mT5 and UL2.

    Args:
        num_heads: Integer. The number of attention heads.
        num_buckets: Integer. Defaults to `32`.
        max_distance: Integer. Distances from here on share the last bucket. Defaults to `128`.
        bidirectional: Boolean. Whether keys after the query have buckets of their own (T5's
            encoder) or share bucket 0 (its decoder). Defaults to `True`.
        embeddings_initializer: Initializer of the table. Defaults to `"random_normal"`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        attention_scores: Float tensor `(batch, num_heads, q_len, k_len)`.
        query_positions: Optional integer tensor `(q_len,)` or `(batch, q_len)`, with
            `key_positions`; without them queries and keys count from 0 (T5's `compute_bias`).
        key_positions: Optional integer tensor `(k_len,)` or `(batch, k_len)`.

    Example:

        >>> layer = RelativePositionBias(num_heads=8)
        >>> keras.ops.convert_to_numpy(layer.buckets([-200, -20, -3, 0, 3, 20, 200])).tolist()
        [15, 10, 3, 0, 19, 26, 31]
        >>> layer(keras.ops.zeros((2, 8, 5, 5))).shape
        TensorShape([2, 8, 5, 5])

    References:
        [Raffel et al., 2019](https://arxiv.org/abs/1910.10683)
    """
