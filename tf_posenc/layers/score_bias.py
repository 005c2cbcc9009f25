"""Internal: what every attention-score bias layer does, in either Keras family."""

import keras
from keras import ops

from tf_posenc import _positions, _rows


def paired_positions(query_positions, key_positions, query_length, key_length):
    """The int32 `(batch or 1, len)` positions of a bias's queries and keys: both given, or
    neither (`0 .. len - 1` each); one without the other is a `ValueError`."""
    if (query_positions is None) != (key_positions is None):
        raise ValueError(
            "Pass `query_positions` and `key_positions` together, or neither. Received: "
            f"query_positions={'None' if query_positions is None else 'given'}, "
            f"key_positions={'None' if key_positions is None else 'given'}"
        )
    if query_positions is None:
        query_positions = ops.arange(query_length, dtype="int32")
        key_positions = ops.arange(key_length, dtype="int32")
    return (
        _positions.batched_positions("query_positions", query_positions),
        _positions.batched_positions("key_positions", key_positions),
    )


class ScoreBiasMixin:
    """A bias of attention scores that depends on the query's and the key's positions.

    A subclass gives `_bias(queries, keys, heads)`: the float32 bias `(batch or 1, heads,
    q_len, k_len)` of int32 query positions `(batch or 1, q_len)` and key positions
    `(batch or 1, k_len)`, and `_default_positions(q_len, k_len)`: the positions its peer's
    layer assumes when a call gives none. A call adds the bias to the scores, rounded once to
    their dtype; `bias` returns it alone, for `keras.ops.dot_product_attention(bias=...)`.
    """

    def call(self, attention_scores, query_positions=None, key_positions=None):
        heads, queries, keys = self._scores_positions(attention_scores, query_positions, key_positions)
        # Only the scores take the compute dtype (Keras's autocast would round float positions too).
        bias = ops.cast(self._bias(queries, keys, heads), self.compute_dtype)
        return _rows.cast(attention_scores, self.compute_dtype) + bias

    def _checked_scores(self, attention_scores):
        """The number of heads of `attention_scores`, after checking its rank, heads and dtype."""
        shape = tuple(attention_scores.shape)
        if len(shape) != 4:
            raise ValueError(
                "`attention_scores` must have shape (batch, num_heads, q_len, k_len). "
                f"Received: attention_scores.shape={shape}"
            )
        heads = self._heads_of(shape)
        dtype = keras.backend.standardize_dtype(attention_scores.dtype)
        if "float" not in dtype:
            raise TypeError(
                f"`attention_scores` must be floating-point. Received: attention_scores.dtype={dtype}"
            )
        return heads

    def _scores_positions(self, attention_scores, query_positions, key_positions):
        """The heads of `attention_scores` and the checked int32 positions of its queries and
        keys (`_default_positions` where the call gives none), after checking the scores."""
        heads = self._checked_scores(attention_scores)
        shape = tuple(attention_scores.shape)
        if (query_positions is None) != (key_positions is None):
            paired_positions(query_positions, key_positions, None, None)  # its error
        if query_positions is None:
            lengths = ops.shape(attention_scores)[2], ops.shape(attention_scores)[3]
            return (heads, *self._default_positions(*lengths))
        return (heads, *self._checked_positions(query_positions, key_positions, shape))

    def bias(self, query_positions, key_positions):
        """The bias alone, `(batch or 1, num_heads, q_len, k_len)`, float32.

        Args:
            query_positions: Integer tensor `(q_len,)` or `(batch, q_len)`: each query's
                position (for a cache, `start_index + arange(steps)`).
            key_positions: Integer tensor `(k_len,)` or `(batch, k_len)`: each key's position.
        """
        heads = self._heads_of(None)
        queries, keys = self._checked_positions(query_positions, key_positions, None)
        return self._bias(queries, keys, heads)

    def _checked_positions(self, query_positions, key_positions, scores_shape):
        queries = _positions.batched_positions("query_positions", query_positions)
        keys = _positions.batched_positions("key_positions", key_positions)
        if scores_shape is not None:
            for name, positions in (("query_positions", queries), ("key_positions", keys)):
                given, batch = positions.shape[0], scores_shape[0]
                if None not in (given, batch) and given not in (1, batch):
                    raise ValueError(
                        f"`{name}` must have one row per example of `attention_scores` ({batch}), or "
                        f"one row for all. Received: {name} with shape {tuple(positions.shape)}"
                    )
            for name, positions, axis in (("query_positions", queries, 2), ("key_positions", keys, 3)):
                given, wanted = positions.shape[1], scores_shape[axis]
                if None not in (given, wanted) and given != wanted:
                    raise ValueError(
                        f"`{name}` must have one entry per {'query' if axis == 2 else 'key'} of "
                        f"`attention_scores` ({wanted}). Received: {name} with shape "
                        f"{tuple(positions.shape)} for attention_scores.shape={scores_shape}"
                    )
        return queries, keys

    def _heads_of(self, scores_shape):
        """The number of heads: the layer's, checked against the scores' where both are given."""
        given = None if scores_shape is None else scores_shape[1]
        if given == 0:
            raise ValueError(
                "`attention_scores` must have at least one head (axis 1), as `num_heads` must be a "
                f"positive integer. Received: attention_scores.shape={tuple(scores_shape)}"
            )
        if self.num_heads is None:
            if given is None:
                raise ValueError(
                    f"`{type(self).__name__}` needs `num_heads` to compute a bias alone, or scores "
                    "with a known heads axis. Received: num_heads=None"
                )
            return given
        if given is not None and given != self.num_heads:
            raise ValueError(
                f"`attention_scores` must have num_heads={self.num_heads} heads (axis 1). "
                f"Received: attention_scores.shape={scores_shape}"
            )
        return self.num_heads

    def compute_output_shape(self, input_shape):
        return input_shape
