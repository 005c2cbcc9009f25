import keras
from keras import ops

from tf_posenc import _hf_config, _hf_defaults, _rows, _validation, attention
from tf_posenc.layers.base import PositionLayer
from tf_posenc.layers.score_bias import ScoreBiasMixin

# transformers' `Inkling2RelativePositionBias`: a head's states are scaled, then shortened to
# this norm when longer (the `+ 1e-6` is its guard against a zero norm, kept for its bits).
_NORM_GUARD = 1e-6


class InklingRelativeBiasMixin(ScoreBiasMixin):
    """The body of `InklingRelativeBias`, shared by its Keras 3 and tf_keras classes."""

    def __init__(
        self,
        num_heads,
        rel_extent,
        d_rel=16,
        rel_l2_clip_threshold=8.0,
        log_scaling=False,
        log_scaling_alpha=0.1,
        log_scaling_n_floor=128000,
        kernel_initializer="random_normal",
        proj_initializer="random_normal",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = _validation.positive_int("num_heads", num_heads)
        self.rel_extent = _validation.positive_int("rel_extent", rel_extent)
        self.d_rel = _validation.positive_int("d_rel", d_rel)
        _validation.positive_number("rel_l2_clip_threshold", rel_l2_clip_threshold)
        self.rel_l2_clip_threshold = rel_l2_clip_threshold
        self.log_scaling = _validation.boolean("log_scaling", log_scaling)
        _validation.number_at_least("log_scaling_alpha", log_scaling_alpha, float("-inf"))
        _validation.positive_number("log_scaling_n_floor", log_scaling_n_floor)
        self.log_scaling_alpha, self.log_scaling_n_floor = log_scaling_alpha, log_scaling_n_floor
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.proj_initializer = keras.initializers.get(proj_initializer)

    def build(self, attention_scores_shape=None, hidden_states_shape=None):
        # Keras 3 passes both shapes; tf_keras only the scores', so its call makes the weights.
        if hidden_states_shape is not None:
            self._make_weights(tuple(hidden_states_shape))
        self.built = True

    def _make_weights(self, hidden_states_shape):
        hidden_size = hidden_states_shape[-1]
        if hidden_size is None:
            raise ValueError(
                "`InklingRelativeBias` makes its weights from its `hidden_states`, whose last axis "
                f"must be known. Received: hidden_states with shape {hidden_states_shape}"
            )
        # transformers' `linear.weight` transposed, `norm.scale` and `proj`.
        self.kernel = self.add_weight(
            name="kernel",
            shape=(hidden_size, self.num_heads * self.d_rel),
            initializer=self.kernel_initializer,
            autocast=False,
        )
        self.scale = self.add_weight(
            name="scale", shape=(self.num_heads, self.d_rel), initializer="ones", autocast=False
        )
        self.proj = self.add_weight(
            name="proj",
            shape=(self.d_rel, self.rel_extent),
            initializer=self.proj_initializer,
            autocast=False,
        )

    def call(self, attention_scores, hidden_states, query_positions=None, key_positions=None):
        _, queries, keys = self._scores_positions(attention_scores, query_positions, key_positions)
        self._check_hidden_states(hidden_states, attention_scores.shape)
        bias = ops.cast(self._conditioned_bias(hidden_states, queries, keys), self.compute_dtype)
        return _rows.cast(attention_scores, self.compute_dtype) + bias

    def bias(self, hidden_states, query_positions, key_positions):
        """The bias alone, `(batch, num_heads, q_len, k_len)`, float32.

        Args:
            hidden_states: Float tensor `(batch, q_len, hidden_size)`: the queries' hidden
                states (the input of the attention's query projection).
            query_positions: Integer tensor `(q_len,)` or `(batch, q_len)`: each query's
                position (for a cache, `start_index + arange(steps)`).
            key_positions: Integer tensor `(k_len,)` or `(batch, k_len)`: each key's position.
        """
        self._check_hidden_states(hidden_states, None)
        queries, keys = self._checked_positions(query_positions, key_positions, None)
        return self._conditioned_bias(hidden_states, queries, keys)

    def _check_hidden_states(self, hidden_states, scores_shape):
        """Checks `hidden_states` (against the scores' batch and queries where their shape is
        given), and makes the weights where they are not made yet (a tf_keras layer's)."""
        _validation.dense_inputs(hidden_states)
        shape = tuple(hidden_states.shape)
        known = getattr(self, "kernel", None)
        width = None if known is None else known.shape[0]
        batch, q_len = (None, None) if scores_shape is None else (scores_shape[0], scores_shape[2])
        if (
            len(shape) != 3
            or None not in (q_len, shape[1])
            and shape[1] != q_len
            or None not in (batch, shape[0])
            and shape[0] != batch
        ):
            raise ValueError(
                "`hidden_states` must have shape (batch, q_len, hidden_size), one state per query "
                f"of the scores. Received: hidden_states.shape={shape}"
                + ("" if scores_shape is None else f" for attention_scores.shape={tuple(scores_shape)}")
            )
        if width is not None and shape[-1] != width:
            raise ValueError(
                f"`hidden_states` must have hidden_size {width}, as the layer was built with. "
                f"Received: hidden_states.shape={shape}"
            )
        dtype = keras.backend.standardize_dtype(hidden_states.dtype)
        if "float" not in dtype:
            raise TypeError(f"`hidden_states` must be floating-point. Received: hidden_states.dtype={dtype}")
        if width is None:
            self._make_weights(shape)
            self.built = True

    def _conditioned_bias(self, hidden_states, queries, keys):
        """transformers' `Inkling2RelativePositionBias.forward`, in float32: each query's states
        per head, mixed by `proj` into one bias per backward distance `q - k`, zero outside
        `0 <= q - k < rel_extent`."""
        states = ops.matmul(ops.cast(hidden_states, "float32"), ops.cast(self.kernel, "float32"))
        batch, q_len = ops.shape(hidden_states)[0], ops.shape(hidden_states)[1]
        states = ops.reshape(states, (batch, q_len, self.num_heads, self.d_rel))
        states = states * ops.cast(self.scale, "float32")
        norm = ops.sqrt(ops.sum(ops.square(states), axis=-1, keepdims=True))
        states = states * ops.minimum(self.rel_l2_clip_threshold / (norm + _NORM_GUARD), 1.0)
        if self.log_scaling:
            scale = attention.attention_log_scale(queries, self.log_scaling_alpha, self.log_scaling_n_floor)
            states = states * ops.expand_dims(ops.expand_dims(scale, -1), -1)
        # (batch, q_len, heads, d_rel) @ (d_rel, rel_extent), heads before queries.
        logits = ops.transpose(ops.matmul(states, ops.cast(self.proj, "float32")), (0, 2, 1, 3))
        distance = ops.expand_dims(queries, 2) - ops.expand_dims(keys, 1)  # (batch or 1, q_len, k_len)
        in_band = ops.logical_and(ops.greater_equal(distance, 0), ops.less(distance, self.rel_extent))
        index = ops.expand_dims(ops.clip(distance, 0, self.rel_extent - 1), 1)
        k_len = ops.shape(distance)[2]
        index = ops.broadcast_to(index, (batch, self.num_heads, q_len, k_len))
        gathered = ops.take_along_axis(logits, index, axis=-1)
        return ops.where(ops.expand_dims(in_band, 1), gathered, ops.zeros_like(gathered))

    def _default_positions(self, q_len, k_len):
        # transformers' `get_relative_distance`: the queries are the last `q_len` of `k_len`.
        return (
            ops.expand_dims(ops.arange(q_len, dtype="int32") + (k_len - q_len), 0),
            ops.expand_dims(ops.arange(k_len, dtype="int32"), 0),
        )

    def compute_output_spec(self, attention_scores, hidden_states, query_positions=None, key_positions=None):
        self._checked_scores(attention_scores)
        self._check_hidden_states(hidden_states, attention_scores.shape)
        return keras.KerasTensor(attention_scores.shape, dtype=self.compute_dtype)

    @classmethod
    def from_hf_config(cls, config, layer_index, **kwargs):
        """The bias of one decoder layer of an Inkling 2 model, from its transformers config.

        Its sliding layers (`layer_types` entry `"hybrid_sliding"`) take
        `swa_num_attention_heads` heads and a band of `sliding_window_size`, without log scaling;
        its full layers `num_attention_heads` heads, a band of `rel_extent` and log scaling, as
        transformers 5.25's `Inkling2SlidingAttention` and `Inkling2FullAttention` build theirs.
        A key the config omits takes `Inkling2TextConfig`'s default.

        Args:
            config: The model's config (`inkling2` or `inkling2_text`), as
                `RotaryEmbedding.from_hf_config` takes it.
            layer_index: Integer: the decoder layer.
            **kwargs: Other constructor arguments (`name`, `dtype`, ...).
        """
        config = _hf_config.inkling_config(config)
        types = config["layer_types"]
        if (
            isinstance(layer_index, bool)
            or not isinstance(layer_index, int)
            or not 0 <= layer_index < len(types)
        ):
            raise ValueError(
                f"`layer_index` must be a decoder layer of the config, 0 to {len(types) - 1}. "
                f"{_validation.received('layer_index', layer_index)}"
            )
        sliding = types[layer_index] == "hybrid_sliding"
        arguments = {
            "num_heads": config["swa_num_attention_heads" if sliding else "num_attention_heads"],
            "rel_extent": config["sliding_window_size" if sliding else "rel_extent"],
            "log_scaling": not sliding,
            **{name: config[name] for name in _hf_defaults.INKLING2_BIAS_KEYS},
        }
        return cls(**{**arguments, **kwargs})

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "rel_extent": self.rel_extent,
            "d_rel": self.d_rel,
            "rel_l2_clip_threshold": self.rel_l2_clip_threshold,
            "log_scaling": self.log_scaling,
            "log_scaling_alpha": self.log_scaling_alpha,
            "log_scaling_n_floor": self.log_scaling_n_floor,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "proj_initializer": keras.initializers.serialize(self.proj_initializer),
        }


@keras.saving.register_keras_serializable(package="tf_posenc")
class InklingRelativeBias(InklingRelativeBiasMixin, PositionLayer):
    """Inkling 2's learned relative-position bias, conditioned on each query's hidden state.

    Each query's hidden state gives per-head states of `d_rel` features (a projection, a learned
    scale per feature, then the vector shortened to norm `rel_l2_clip_threshold` when longer;
    with `log_scaling`, also multiplied by `attention_log_scale` of the query's position). They
    mix a learned bank `proj` of `rel_extent` profiles into one bias per backward distance
    `q - k`, added to the scores for `0 <= q - k < rel_extent` and zero elsewhere (a later key,
    or one past the band). Inkling's sliding layers use a band of their window
    (`sliding_window_size`) without log scaling, its full layers `rel_extent` with it
    (`from_hf_config` reads both). Its queries and keys do not rotate: these are its positions.
    The arguments and weights are transformers 5.25's `Inkling2RelativePositionBias`
    (`kernel` is its `linear.weight` transposed, `scale` its `norm.scale`, `proj` its `proj`),
    computed in float32 as there; positions stay int32 (the distance is exact) and the log scale
    takes them unrounded.

    Args:
        num_heads: Integer. The number of attention (query) heads.
        rel_extent: Integer. The band: distances `0 .. rel_extent - 1` get a bias.
        d_rel: Integer. The features of each head's states. Defaults to `16`.
        rel_l2_clip_threshold: Positive number: the largest norm of a head's states.
            Defaults to `8.0`.
        log_scaling: Boolean. Whether the states are scaled by `attention_log_scale` of the
            query's position (Inkling's full layers). Defaults to `False`.
        log_scaling_alpha: Number. Defaults to `0.1`.
        log_scaling_n_floor: Positive number. Defaults to `128000`.
        kernel_initializer: Initializer of the projection `(hidden_size, num_heads * d_rel)`.
            Defaults to `"random_normal"`.
        proj_initializer: Initializer of `proj` `(d_rel, rel_extent)`. Defaults to
            `"random_normal"`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        attention_scores: Float tensor `(batch, num_heads, q_len, k_len)`.
        hidden_states: Float tensor `(batch, q_len, hidden_size)`: the queries' hidden states
            (the input of the query projection).
        query_positions: Optional integer tensor `(q_len,)` or `(batch, q_len)`, with
            `key_positions`; without them the queries are the last `q_len` of `k_len` keys
            counted from 0 (transformers' `get_relative_distance` over a cache).
        key_positions: Optional integer tensor `(k_len,)` or `(batch, k_len)`.

    Example:

        >>> layer = InklingRelativeBias(num_heads=4, rel_extent=8, log_scaling=True)
        >>> hidden = keras.random.normal((2, 5, 32), seed=0)
        >>> bias = layer.bias(hidden, keras.ops.arange(5), keras.ops.arange(5))
        >>> bias.shape, float(keras.ops.max(keras.ops.abs(keras.ops.triu(bias, 1))))
        (TensorShape([2, 4, 5, 5]), 0.0)
        >>> layer(keras.ops.zeros((2, 4, 5, 5)), hidden).shape
        TensorShape([2, 4, 5, 5])
    """
