import keras
import numpy as np
from keras import ops

from tf_posenc import _columns, _hf_config, _positions, _rope_types, _rotation, _rows, _validation
from tf_posenc.layers.base import SinusoidLayer, config_entries


class RotaryEmbeddingMixin:
    """The body of `RotaryEmbedding`, shared by its Keras 3 and tf_keras (Keras 2) classes."""

    inputs_hint = "queries or keys"

    def __init__(
        self,
        max_wavelength=10000,
        scaling_factor=None,
        rope_type="linear",
        beta_fast=32.0,
        beta_slow=1.0,
        original_max_position_embeddings=4096,
        truncate=True,
        sequence_axis=1,
        feature_axis=-1,
        denominator_dim=None,
        layout="half",
        *,
        attention_factor=None,
        mscale=None,
        mscale_all_dim=None,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        short_factor=None,
        long_factor=None,
        max_position_embeddings=None,
        partial_rotary_factor=1.0,
        mrope_section=None,
        mrope_interleaved=False,
        **kwargs,
    ):
        # Every argument but `kwargs`, by the names of the registry's `ARGUMENTS` (which a test
        # holds equal to this signature), checked there alone and kept as attributes.
        arguments = {name: value for name, value in locals().items() if name in _rope_types.ARGUMENTS}
        super().__init__(**kwargs)
        checked = _rope_types.checked_arguments(arguments)
        for name, value in checked.items():
            setattr(self, name, value)
        self._options = _rope_types.Options(
            **{**checked, "scaling_factor": _rope_types.effective_factor(checked)}
        )
        # Applied to the cosines and sines, as keras-hub and transformers do (before their one
        # rounding).
        self._attention_scaling = _rope_types.rotary_attention_factor(
            self.rope_type,
            self._options.scaling_factor,
            self.original_max_position_embeddings,
            self.attention_factor,
            self.mscale,
            self.mscale_all_dim,
        )

    @property
    def _rope(self):
        """The record of the layer's rope type (not an attribute: Keras would track it)."""
        return _rope_types.REGISTRY[self.rope_type]

    @property
    def attention_scaling(self):
        """The number the cosines and sines are multiplied by (transformers' name for it)."""
        return self._attention_scaling

    def call(self, inputs, start_index=0, positions=None, rows=None):
        if rows is not None:
            return self._rotate_with_rows(inputs, rows, start_index, positions)
        sequence_axis, feature_axis = self._axes(tuple(inputs.shape))
        return self._run(
            inputs, self._positions_of(inputs, start_index, positions), kept_axes=(feature_axis,)
        )

    def rows(self, inputs, start_index=0, positions=None):
        """The rotation's `(cos, sin)` for `inputs`, to compute once and apply to many tensors.

        Takes what a call takes and returns what that call rotates with, per rotating feature
        in the layer's layout: transformers' position embeddings (`cos`, `sin` of each feature's
        pair, the rope type's `attention_scaling` already in). `layer(x, rows=rows)` then
        rotates any `x` whose sequence axis covers the same steps (queries and keys of any head
        count, in every layer that shares this layer's configuration) with the bits a call
        with the same positions gives, and computes no row of its own.

        Args:
            inputs: A tensor like the ones to rotate (its shape and dtype are read, not its
                values): a sequence axis and a feature axis as the layer's.
            start_index: Integer or scalar integer tensor, as for a call. Defaults to `0`.
            positions: Optional positions, as for a call (M-RoPE's `(sections, batch, seq_len)`
                included). Defaults to `None`.

        Returns:
            A tuple `(cos, sin)`, each `(batch or 1, seq_len, rotated width)`: batch 1 for a
            `start_index` or `(seq_len,)` positions. Float32 (float64 under a float64 policy):
            under mixed precision they stay float32, the rotation's own dtype, so that the
            rotated features are rounded once, to the compute dtype.

        Example:

            >>> rope = RotaryEmbedding()
            >>> queries, keys = keras.ops.ones((1, 3, 8, 64)), keras.ops.ones((1, 3, 2, 64))
            >>> cos, sin = rope.rows(queries, start_index=5)
            >>> tuple(cos.shape), tuple(rope(keys, rows=(cos, sin)).shape)
            ((1, 3, 64), (1, 3, 2, 64))
        """
        _validation.dense_inputs(inputs)
        if isinstance(inputs, keras.KerasTensor):
            raise TypeError(
                "`rows()` computes rows of tensors: call it inside a layer's or a model's `call` "
                "(subclassed), where its inputs are tensors, not on the symbolic inputs of a functional "
                "model. Received: inputs of type keras.KerasTensor"
            )
        sequence_axis, feature_axis = self._axes(tuple(inputs.shape))
        where = self._positions_of(inputs, start_index, positions)
        return self._run(inputs, where, kept_axes=(feature_axis,), combine="_position_embeddings")

    def _positions_of(self, inputs, start_index, positions):
        """The checked positions a call or `rows` covers (M-RoPE's per-section ids included)."""
        sequence_axis, _ = self._axes(tuple(inputs.shape))
        self._check_input_dtype(inputs.dtype)
        rank = None if positions is None else len(getattr(positions, "shape", np.shape(positions)))
        if self.mrope_section is None or rank != 3:
            return _positions.resolve(inputs, sequence_axis, _positions.LARGEST, start_index, positions)
        # M-RoPE: one row of ids per section (t, h, w), each checked as positions are.
        positions = ops.convert_to_tensor(positions)
        if positions.shape[0] != len(self.mrope_section):
            raise ValueError(
                f"`positions` for M-RoPE must have shape ({len(self.mrope_section)}, batch, seq_len): "
                "one row of ids per entry of `mrope_section`. "
                f"Received: positions with shape {positions.shape}"
            )
        axes = [
            _positions.resolve(inputs, sequence_axis, _positions.LARGEST, start_index, positions[axis]).values
            for axis in range(len(self.mrope_section))
        ]
        return _positions.Positions(values=ops.stack(axes))

    def _position_embeddings(self, inputs, rows):
        """Route rows (per-pair sines, then cosines) as `rows` returns them."""
        if len(rows.shape) == 2:
            rows = ops.expand_dims(rows, 0)
        return _rotation.per_feature(rows, self.layout)

    def _rotate_with_rows(self, inputs, rows, start_index, positions):
        if positions is not None or not (_positions.is_python_int(start_index) and start_index == 0):
            raise ValueError(
                "Pass `rows` alone: they already hold the positions they were computed for. Received: "
                f"rows with start_index={start_index!r}, positions={'None' if positions is None else 'given'}"
            )
        sequence_axis, feature_axis = self._axes(tuple(inputs.shape))
        self._check_input_dtype(inputs.dtype)
        width = self._rotated_width(inputs.shape[feature_axis])
        if not isinstance(rows, (tuple, list)) or len(rows) != 2:
            raise ValueError(
                "`rows` must be the `(cos, sin)` pair that `rows()` returns. "
                f"{_validation.received('rows', rows)}"
            )
        what = f"`rows` must be `(cos, sin)`, each (batch or 1, seq_len, {width}) for inputs.shape="
        what += str(tuple(inputs.shape))
        checked = []
        for name, table in zip(("cos", "sin"), rows, strict=True):
            table = ops.convert_to_tensor(table)
            dtype = keras.backend.standardize_dtype(table.dtype)
            if "float" not in dtype:
                raise TypeError(f"{what}. Received: {name}.dtype={dtype}")
            shape = tuple(table.shape)
            batch, length = inputs.shape[0], inputs.shape[sequence_axis]
            if (
                len(shape) != 3
                or shape[-1] != width
                or None not in (shape[1], length)
                and shape[1] != length
                or None not in (shape[0], batch)
                and shape[0] not in (1, batch)
            ):
                raise ValueError(f"{what}. Received: {name} with shape {shape}")
            table = _positions.same_size(table, 1, inputs, sequence_axis, f"{what}: seq_len differs.")
            checked.append(ops.cast(table, _rotation.rotation_dtype(self.compute_dtype)))
        cosine, sine = checked
        order = self._order(len(inputs.shape))
        return _rotation.rotate_with(inputs, cosine, sine, self.layout, self.compute_dtype, order)

    def get_config(self):
        return {
            **super().get_config(),
            **config_entries(self, *_rope_types.ARGUMENTS),
        }

    @classmethod
    def from_hf_config(cls, config, layer_type=None, **kwargs):
        """The layer a Hugging Face transformers model config describes.

        Args:
            config: A `config.json` as a dict, a path to one (or to the checkpoint folder
                holding it), or an object with the same attributes (a transformers
                `PretrainedConfig`). Read: `rope_parameters`
                (transformers 5) or `rope_scaling` with `rope_theta` (4.x, old key `"type"`
                included), `partial_rotary_factor` (GPT-NeoX: `rotary_pct`, `rotary_emb_base`),
                `max_position_embeddings`, a top-level `original_max_position_embeddings`
                (Phi-3), `rope_interleave` (DeepSeek-V3: the interleave layout), GPT-J's and
                CodeGen's `rotary_dim`, `mrope_section`, and a multimodal model's
                `text_config`; with `model_type`, the keys it omits come from its transformers
                5.25 config class, and the pair layout is its code's (interleaved for Cohere,
                GLM, ERNIE 4.5, Helium, GPT-J, Llama 4, DeepSeek's latent attention, ...). A
                model type whose positions need a mechanism tf_posenc does not have, or whose
                config turns positions off, is a `ValueError` that says which.
            layer_type: For models whose layers rotate differently (Gemma 3 and 4):
                `"full_attention"` or `"sliding_attention"`, a key of its `rope_parameters`.
                Any other layer type of the config (from `layer_types`) is taken too, so that
                a loop over a model's layers needs no special case (see
                `tf_posenc.hf_attention_layers`).
            **kwargs: Further constructor arguments (`dtype`, `name`, `sequence_axis`,
                `feature_axis`, or `layout` to override the config's).

        Returns:
            The layer, to be applied to queries and keys whose feature axis is the config's
            rotary head size (`head_dim`; DeepSeek's `qk_rope_head_dim`; Gemma 4's
            `global_head_dim` for full attention).

        transformers' `"dynamic"` becomes `"dynamic_ntk"`, and `"default"` the unscaled
        `"linear"`. A missing or contradictory key is a `ValueError` that names it.

        Example:

            >>> llama = {"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
            ...          "max_position_embeddings": 131072,
            ...          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            ...                           "high_freq_factor": 4.0,
            ...                           "original_max_position_embeddings": 8192}}
            >>> layer = RotaryEmbedding.from_hf_config(llama)
            >>> layer.rope_type, layer.max_wavelength, layer.scaling_factor
            ('llama3', 500000.0, 8.0)
        """
        return cls(**{**_hf_config.rotary_arguments(config, layer_type), **kwargs})

    @classmethod
    def from_keras_hub(cls, layer, **kwargs):
        """The layer that computes what a keras-hub rotary layer computes, with exact angles.

        Reads keras-hub 0.32's `keras_hub.layers.RotaryEmbedding` (its rope types `"linear"`,
        `"dynamic"` and `"yarn"`, `denominator_dim`, `truncate`, the axes and the dtype policy)
        and its Llama and Phi-3 subclasses as they behave: Llama's `LlamaRotaryEmbedding`
        ignores `position_scaling_factor` (so does this layer) and with its four Llama 3.1
        arguments is `rope_type="llama3"`; Phi-3's `Phi3SuScaledRotaryEmbedding` is
        `"longrope"` with its `embedding_scaling_factor`; keras-hub's YaRN scales the cosines
        and sines by `0.1 ln s + 1` for every `s` (`attention_factor`). A layer computing
        something else (Moonshine's, ESM's, SmolLM3's `(cos, sin)` layer) is a `ValueError`
        naming it. To swap every rotary layer of a keras-hub model, use
        `tf_posenc.keras_hub.exact_rotary`.

        Args:
            layer: A keras-hub rotary layer.
            **kwargs: Further constructor arguments (`name`, or another `dtype`).

        Example:

            >>> import keras_hub
            >>> theirs = keras_hub.layers.RotaryEmbedding(max_wavelength=500000, scaling_factor=8.0)
            >>> ours = RotaryEmbedding.from_keras_hub(theirs)
            >>> ours.max_wavelength, ours.scaling_factor, ours.rope_type
            (500000, 8.0, 'linear')
        """
        from tf_posenc import _keras_hub_layers  # keras-hub is needed only here

        return cls(**{**_keras_hub_layers.rotary_arguments(layer), "name": layer.name, **kwargs})

    def frequencies(self, dim, seq_len=None):
        """The float64 angular frequency of each feature pair that rotates, for features of
        width `dim`; `seq_len` (a call's largest position + 1) matters to `"longrope"` and
        `"dynamic_ntk"` only."""
        return self._rope.frequencies(self._rotated_width(dim), self._options, seq_len)

    def _provider(self, dim, seq_len=None):
        """The row provider of features of width `dim` (and a call's `seq_len`)."""
        seq_len = self._rope.extent(self._options, seq_len) if self._rope.extent else None
        return _rows.provider(*_columns.rotary_columns(self.frequencies(dim, seq_len)))

    def _call_rows(self, dim, positions, length, dtype):
        """The rows of a call. A type whose frequencies follow the call's extent takes them for
        that extent; where a graph only knows it when it runs, a type with a switch point
        (LongRoPE's short and long factors) computes both sets' rows, whose per-column constants
        graphs fold, and selects; any other needs the extent when the call is traced."""

        def rows(provider):
            return provider.rows(positions, length, dtype, scale=self.attention_scaling)

        if not self._rope.extent:
            return rows(self._provider(dim))
        extent = _positions.extent(positions, length)
        if isinstance(extent, int):
            return rows(self._provider(dim, extent))
        if not self._rope.switch:
            raise ValueError(
                f"`rope_type={self.rope_type!r}` computes its frequencies from a call's largest position, "
                "which must be known when the call is traced: call the layer eagerly, or with a "
                "Python int `start_index` and a fixed sequence length (inputs of known length). "
                "Received: a start_index, positions or sequence length known only at run time"
            )
        switch = self._rope.switch(self._options)
        return ops.where(extent > switch, rows(self._provider(dim, switch + 1)), rows(self._provider(dim)))

    def _compiled_in_eager_calls(self):
        # A type whose constants follow each call's extent, without a switch, runs op by op.
        return not self._rope.extent or bool(self._rope.switch)

    def _rotated_width(self, dim):
        return _rope_types.rotated_width(self.rope_type, dim, self.partial_rotary_factor)

    def _output_shape(self, shape):
        self._axes(shape)
        return shape

    def _order(self, rank):
        """The axes of `inputs` in the order (batch, sequence, ..., features)."""
        sequence_axis, feature_axis = self.sequence_axis % rank, self.feature_axis % rank
        middle = [axis for axis in range(1, rank) if axis not in (sequence_axis, feature_axis)]
        return [0, sequence_axis, *middle, feature_axis]

    def _rows_follow_positions(self):
        return not self._rope.extent

    def _sequence_axis(self, rank):
        return self._order(rank)[1]

    def _rows_for(self, inputs, positions):
        """The sines of every rotating pair, then their cosines, in float32 (float64 under a
        float64 policy), for the positions along the sequence axis."""
        order = self._order(len(inputs.shape))
        sequence_axis, feature_axis = order[1], order[-1]
        wide = _rotation.rotation_dtype(self.compute_dtype)
        length = _positions.sequence_length(inputs, sequence_axis)
        dim = inputs.shape[feature_axis]
        if positions.values is not None and len(positions.values.shape) == 3:
            return self._mrope_rows(dim, positions.values, wide)
        return self._call_rows(dim, positions, length, wide)

    def mrope_axes(self, pairs):
        """Which id row (t, h, w) turns each of `pairs` feature pairs under M-RoPE: contiguous
        sections (Qwen2-VL, Qwen2.5-VL), or Qwen3-VL's interleaved assignment (pair `j` takes h
        where `j % 3 == 1` and `j < 3 * mrope_section[1]`, w where `j % 3 == 2` and
        `j < 3 * mrope_section[2]`, t elsewhere; with two sections, NeoMME's h and w, the same
        rule modulo 2)."""
        if not self.mrope_interleaved:
            return np.repeat(np.arange(len(self.mrope_section)), self.mrope_section)
        pair = np.arange(pairs)
        axes = np.zeros(pairs, int)
        count = len(self.mrope_section)
        for axis in range(1, count):
            axes[(pair % count == axis) & (pair < count * self.mrope_section[axis])] = axis
        return axes

    def _mrope_rows(self, dim, values, dtype):
        """Rows of M-RoPE ids `values` (`(sections, batch, seq_len)`): each pair's sine and cosine
        at the id of its section, every section's columns computed once from its own ids."""
        frequencies = self.frequencies(dim)
        axes = self.mrope_axes(len(frequencies))
        sections = [(axis, np.flatnonzero(axes == axis)) for axis in range(len(self.mrope_section))]
        sections = [(axis, columns) for axis, columns in sections if len(columns)]
        groups = [
            (values[axis], _rows.provider(*_columns.rotary_columns(frequencies[columns])))
            for axis, columns in sections
        ]
        rows = _rotation.grouped_rows(groups, dtype, self.attention_scaling)
        back = np.argsort(np.concatenate([columns for _, columns in sections]))
        return ops.take(rows, np.concatenate([back, back + len(frequencies)]).tolist(), axis=-1)

    def _combine(self, inputs, rows):
        return self._combine_tables(inputs, self._tables(rows, len(inputs.shape)))

    def _tables(self, rows, rank):
        return _rotation.rotation_tables(rows, self.layout, rank)

    def _combine_tables(self, inputs, tables):
        return _rotation.turn(inputs, tables, self.layout, self.compute_dtype, self._order(len(inputs.shape)))

    def _axes(self, shape):
        """The sequence and feature axes as non-negative numbers, after checking them."""
        shape = tuple(shape)
        rank = len(shape)
        if rank < 3:
            raise ValueError(
                "`inputs` must have rank 3 or more, with a batch, a sequence and a feature "
                f"axis. Received: inputs.shape={shape}"
            )
        axes = []
        for name, axis in (("sequence_axis", self.sequence_axis), ("feature_axis", self.feature_axis)):
            if not -rank < axis < rank or axis % rank == 0:
                raise ValueError(
                    f"`{name}` must name an axis of `inputs` other than the batch axis 0. "
                    f"Received: {name}={axis} for inputs.shape={shape}"
                )
            axes.append(axis % rank)
        if axes[0] == axes[1]:
            raise ValueError(
                "`sequence_axis` and `feature_axis` must differ. "
                f"Received: sequence_axis={self.sequence_axis}, feature_axis={self.feature_axis}"
            )
        dim = shape[axes[1]]
        if dim is None or dim % 2:
            raise ValueError(
                "The feature axis of `inputs` must have a known, even size: the features "
                f"rotate in pairs. Received: inputs.shape={shape} with feature_axis={self.feature_axis}"
            )
        _rope_types.checked_head(vars(self._options), dim, f"for inputs.shape={shape}")
        return tuple(axes)


@keras.saving.register_keras_serializable(package="tf_posenc")
class RotaryEmbedding(RotaryEmbeddingMixin, SinusoidLayer):
    """Rotary position embedding (RoPE): each feature pair rotated by its position's angle.

    The documents' shift `T(k)` moves an encoding `k` positions along by rotating each
    (sine, cosine) pair; RoPE applies the rotation `R(p)` of position `p` to queries and keys,
    so that `R(m) q . R(n) k` depends only on `n - m`. With `layout="interleave"`, `R(p)` is
    `shift_matrix(-p, dim)`, the transpose of `T(p)`.

    The angles are never formed: the cosines and sines come from the exact integer-phase
    route of `PositionalEncoding`, and the rotation runs in float32 (float64 under a float64
    policy) with a single rounding to the compute dtype, so a bfloat16 model keeps the
    relative-position property at a million positions. The positional arguments mean what
    they mean in keras-hub's `RotaryEmbedding` (0.32; keras-hub's main has since made
    `truncate=False` its default), in the same order, so a keras-hub model can switch layers
    and keep its weights; the keyword-only ones are Hugging Face transformers' rope
    parameters, with their names and meaning, and `from_hf_config` reads them from a model's
    config. Every rope type is a set of per-pair frequencies and one scale of the
    cosines and sines, so every type runs on the exact route.

    Rope types, and the models that use them:

    * `"linear"`: RoFormer, GPT-NeoX, Llama 2, Qwen, Gemma; frequencies divided by
      `scaling_factor` (1 for none).
    * `"llama3"`: Llama 3.1-3.3; long wavelengths divided by `scaling_factor`, a blend
      between them and the short ones.
    * `"yarn"`: Qwen2.5/3 long context, DeepSeek-V3, gpt-oss; YaRN's ramp, with the scale
      from `attention_factor` or `mscale` / `mscale_all_dim`.
    * `"longrope"`: Phi-3, Phi-3.5, Phi-4-mini; divided by `short_factor` or `long_factor`.
    * `"dynamic_ntk"`: transformers' `"dynamic"`; the base grows with a call's extent past
      `max_position_embeddings`.
    * `"proportional"`: Gemma 4's full attention; the first pairs rotate, the rest have
      frequency 0.
    * `"ntk"`: static NTK-aware scaling; the base times `scaling_factor ** (d / (d - 2))`.
    * `"dynamic"`: keras-hub's rule; every frequency divided by
      `scaling_factor ** (d / (d - 2))`.

    `"longrope"` takes the long factors when a call's largest position + 1 exceeds
    `original_max_position_embeddings`, as transformers does, inside the graph where that is
    only known when it runs (SavedModel and TensorFlow Lite switch at run time). Decoding with
    a cache, steps before the switch were rotated with the short factors and stay so (as in
    transformers); a full pass past it rotates every position with the long ones.
    `"dynamic_ntk"` needs a call's largest position when the call is traced (eager calls, a
    Python `start_index` with a known length); it recomputes for each call, where transformers
    keeps the largest length it has seen until a call falls back within
    `max_position_embeddings`.

    Args:
        max_wavelength: Number greater than 1. The base of the wavelengths (transformers'
            `rope_theta`). Defaults to `10000`.
        scaling_factor: Optional number, at least 1 (transformers' `factor`). Stretches the
            wavelengths to serve longer contexts. `None` means 1, except for `"yarn"` and
            `"longrope"` given `max_position_embeddings`, which infer it as
            `max_position_embeddings / original_max_position_embeddings` (as transformers
            does). Defaults to `None`.
        rope_type: One of the types above: how `scaling_factor` applies (see
            `tf_posenc.encoding.rotary_frequencies`). Defaults to `"linear"`.
        beta_fast: Number. YaRN's fast boundary. Defaults to `32.0`.
        beta_slow: Number. YaRN's slow boundary. Defaults to `1.0`.
        original_max_position_embeddings: Integer. The pretraining context of `"yarn"`,
            `"llama3"` and `"longrope"`. Defaults to `4096`.
        truncate: Boolean. Whether YaRN's correction range is rounded to whole dimensions.
            Defaults to `True`.
        sequence_axis: Integer. The sequence axis of the inputs. Defaults to `1`.
        feature_axis: Integer. The feature axis of the inputs. Defaults to `-1`.
        denominator_dim: Optional integer. The width in the frequency exponent, if not the
            feature width (`"linear"` and `"dynamic"`). Defaults to `None`.
        layout: `"half"` (feature `j` pairs with `j + dim/2`: GPT-NeoX, Hugging Face's LLaMA,
            keras-hub) or `"interleave"` (`2j` with `2j + 1`: RoFormer, GPT-J, Meta's LLaMA,
            DeepSeek-V3, the documents' `T(k)`). Defaults to `"half"`.
        attention_factor: Optional positive number multiplying the cosines and sines; `None`
            takes the type's own (YaRN `0.1 ln s + 1`, LongRoPE
            `sqrt(1 + ln s / ln original)`, else 1); `1.0` turns it off (for checkpoints that
            scale the attention logits instead). Defaults to `None`.
        mscale: Optional number. DeepSeek's YaRN numerator weight (with `mscale_all_dim`).
            Defaults to `None`.
        mscale_all_dim: Optional number. DeepSeek's YaRN denominator weight. Defaults to
            `None`.
        low_freq_factor: Number. Llama 3's low-frequency boundary. Defaults to `1.0`.
        high_freq_factor: Number. Llama 3's high-frequency boundary. Defaults to `4.0`.
        short_factor: LongRoPE's per-pair divisors within the pretraining context (a list,
            one per rotating pair). Defaults to `None`.
        long_factor: LongRoPE's per-pair divisors past it. Defaults to `None`.
        max_position_embeddings: Optional integer. The model's context (for `"dynamic_ntk"`,
            and for inferring YaRN's and LongRoPE's `scaling_factor`). Defaults to `None`.
        mrope_section: Optional list of integers adding up to the rotating pairs (with
            `mrope_interleaved`, any three sizes: t takes the pairs h and w leave): multimodal
            RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL), where `positions` of shape
            `(len(mrope_section), batch, seq_len)` give each token one id per axis (t, h, w)
            and section `a` of the pairs turns by the ids of row `a` (see `mrope_axes` and
            `tf_posenc.mrope_positions`). Positions of shape `(seq_len,)` or
            `(batch, seq_len)`, or `start_index`, give every axis the same ids: plain RoPE, as
            for text. Defaults to `None`.
        mrope_interleaved: Boolean. Qwen3-VL's interleaved assignment of the pairs to the
            sections instead of contiguous sections (NeoMME's with two sections, h and w).
            Defaults to `False`.
        partial_rotary_factor: Number in (0, 1]. The leading fraction of each head's features
            that rotates; the rest pass through (GPT-NeoX's `rotary_pct`, Phi, StableLM), in
            either layout. For `"proportional"`, the fraction of pairs with a non-zero
            frequency, over the whole head (Gemma 4). Defaults to `1.0`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A floating-point tensor with a sequence axis and an even feature axis, such
            as `(batch, seq_len, dim)` or `(batch, seq_len, heads, dim)`.
        start_index: Integer or scalar integer tensor. The position of the first step, for
            decoding one step at a time. Defaults to `0`.
        positions: Optional tensor of shape `(seq_len,)` or `(batch, seq_len)`: the position
            of each step, for example from `positions_from_mask`. Integers, or floats that
            hold whole numbers (fractional positions are refused).
        rows: Optional `(cos, sin)` from `rows()`, computed once for a step and applied to
            every tensor it covers (queries and keys, every layer of this configuration):
            the rotation those positions give, without computing it again. Passed alone,
            without `start_index` or `positions`.

    Example:

        >>> queries = keras.Input((None, 8, 64))
        >>> rotated = RotaryEmbedding()(queries)
        >>> rotated.shape
        (None, None, 8, 64)

    References:
        [Su et al., 2021](https://arxiv.org/abs/2104.09864)
    """
