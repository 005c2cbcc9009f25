import math

import keras
import numpy as np
from keras import ops

from tf_posenc import _validation
from tf_posenc.layers.base import PositionLayer
from tf_posenc.layers.score_bias import ScoreBiasMixin


def alibi_slopes(num_heads, alibi_bias_max=8):
    """ALiBi's per-head slopes, float64: `2 ** (-alibi_bias_max * h / n)` for heads `h = 1 .. n`
    when `n` is a power of two; otherwise those of the largest power of two below `n`, then every
    other slope of twice that many (the paper's code, BLOOM's and MPT's, keras-hub's)."""
    if num_heads & (num_heads - 1) == 0:
        return np.array([2.0 ** (-alibi_bias_max * head / num_heads) for head in range(1, num_heads + 1)])
    below = 2 ** math.floor(math.log2(num_heads))
    return np.concatenate(
        [
            alibi_slopes(below, alibi_bias_max),
            alibi_slopes(2 * below, alibi_bias_max)[0::2][: num_heads - below],
        ]
    )


class AlibiBiasMixin(ScoreBiasMixin):
    """The body of `AlibiBias`, shared by its Keras 3 and tf_keras classes."""

    def __init__(self, alibi_bias_max=8, num_heads=None, bidirectional=False, **kwargs):
        super().__init__(**kwargs)
        _validation.number_at_least("alibi_bias_max", alibi_bias_max, 0, strict=True)
        self.alibi_bias_max = alibi_bias_max
        self.num_heads = None if num_heads is None else _validation.positive_int("num_heads", num_heads)
        self.bidirectional = _validation.boolean("bidirectional", bidirectional)

    def _bias(self, queries, keys, heads):
        slopes = alibi_slopes(heads, self.alibi_bias_max).astype("float32")[None, :, None, None]
        # k - q: an integer, exact in float32 below 2**24; one rounding of the product.
        distance = ops.expand_dims(keys, 1) - ops.expand_dims(queries, 2)  # (batch or 1, q_len, k_len)
        if self.bidirectional:
            distance = -ops.abs(distance)
        return ops.expand_dims(ops.cast(distance, "float32"), 1) * slopes

    def _default_positions(self, q_len, k_len):
        keys = ops.expand_dims(ops.arange(k_len, dtype="int32"), 0)
        if self.bidirectional:  # the queries are the last positions: all of them in an encoder
            return ops.expand_dims(ops.arange(q_len, dtype="int32") + (k_len - q_len), 0), keys
        # keras-hub's: every query at the last key's position, `m (k - (K - 1))`.
        return ops.expand_dims(ops.zeros((q_len,), "int32") + (k_len - 1), 0), keys

    def get_config(self):
        return {
            **super().get_config(),
            "alibi_bias_max": self.alibi_bias_max,
            "num_heads": self.num_heads,
            "bidirectional": self.bidirectional,
        }


@keras.saving.register_keras_serializable(package="tf_posenc")
class AlibiBias(AlibiBiasMixin, PositionLayer):
    """ALiBi: attention scores biased linearly by the distance from query to key.

    Each head `h` adds `-m_h (q - k)` to the score of a query at position `q` and a key at `k`.
    BLOOM adds `m_h k` instead, and keras-hub `m_h (k - (K - 1))`: the same after the softmax,
    which ignores what a query's row shares. The slopes `m_h` are the paper's and BLOOM's, MPT's
    (`alibi_bias_max`) and keras-hub's, for any number of heads (`alibi_slopes`). The arguments
    are keras-hub's `AlibiBias`, then `num_heads`. Used by BLOOM, MPT, Baichuan-13B and Falcon-RW.

    Without positions a call gives keras-hub 0.32's `AlibiBias` values, `m_h (k - (K - 1))` for
    keys `k < K`; with them (from a cache's slots, `start_index`, `positions_from_mask` or
    `positions_from_segment_ids`), `-m_h (q - k)`, so a prompt and then single-token steps give
    the full pass's bias rows bit for bit. The bias is computed in float32 (the rounded slope
    times the exact integer distance: within two units of the exact product) and rounded once
    to the scores' dtype.

    That bias is a decoder's: under a causal mask every key is at or before its query, and the
    farther one is penalised more. Without the mask it only prefers later keys. Encoders use
    `bidirectional=True`, the symmetric `-m_h |q - k|` of MosaicBERT and Jina BERT v2 (their
    `rebuild_alibi_tensor`): a call without positions then places the queries at the last
    positions of the keys (all of them when the lengths are equal).

    Args:
        alibi_bias_max: Number. The slopes are `2 ** (-alibi_bias_max * h / n)` for `n` heads, a
            power of two (MPT's `alibi_bias_max`). Defaults to `8`.
        num_heads: Optional integer. The number of heads; `None` reads it from the scores (a call
            needs none, `bias` does). Defaults to `None`.
        bidirectional: Boolean. `-m_h |q - k|`, the encoders' symmetric form, instead of
            `-m_h (q - k)`. Defaults to `False`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        attention_scores: Float tensor `(batch, num_heads, q_len, k_len)`.
        query_positions: Optional integer tensor `(q_len,)` or `(batch, q_len)`, with
            `key_positions`.
        key_positions: Optional integer tensor `(k_len,)` or `(batch, k_len)`.

    Example:

        >>> layer = AlibiBias()
        >>> scores = keras.ops.zeros((1, 8, 1, 3))
        >>> [float(value) for value in keras.ops.convert_to_numpy(layer(scores))[0, 1, 0]]
        [-0.5, -0.25, 0.0]
        >>> AlibiBias(num_heads=8).bias([2], [0, 1, 2]).shape  # a decoding step at position 2
        TensorShape([1, 8, 1, 3])
        >>> encoder = AlibiBias(num_heads=8, bidirectional=True)
        >>> [float(value) for value in keras.ops.convert_to_numpy(encoder.bias([1], [0, 1, 2]))[0, 1, 0]]
        [-0.25, 0.0, -0.25]

    References:
        [Press et al., 2021](https://arxiv.org/abs/2108.12409)
    """
