"""keras-hub's models with exact positions: `exact_rotary(model)`.

keras-hub 0.32's rotary layers form their angles in float32 (in a float64 policy too), so at
large positions their rotations drift from the exact ones; `exact_rotary` swaps each of them, in
place, for the tf_posenc layer that computes the same thing with exact angles
(`RotaryEmbedding.from_keras_hub`).

Saving: keras-hub's configs have no field for the rotary layer, so a model saved after the swap
holds keras-hub's arguments only, and `keras.saving.load_model` or `from_preset` give
keras-hub's layers back. Apply `exact_rotary` after loading:

    model = tf_posenc.keras_hub.exact_rotary(keras_hub.models.CausalLM.from_preset(...))

No keras-hub module is patched: only the model passed in changes.
"""

import warnings

import keras
from keras import ops

from tf_posenc import _keras_hub_layers
from tf_posenc.layers import RotaryEmbedding


@keras.saving.register_keras_serializable(package="tf_posenc")
class SmolLM3Rotary(keras.layers.Layer):
    """SmolLM3's `(cos, sin)` layer of keras-hub (`SmolLM3RotaryEmbedding`), with exact angles.

    Called as keras-hub's is, `layer(x, start_index=0)`, it returns the `(cos, sin)` of keras-hub's
    layer, `(batch, seq_len, rotary width)` in `x`'s dtype and the half layout, computed by
    `RotaryEmbedding.rows` (rounded once from the exact angles, times `attention_scaling`).

    Args:
        rope_theta: Number: SmolLM3's `rope_theta`.
        partial_rotary_factor: Number in (0, 1]: the rotating fraction of each head.
        head_dim: Positive integer: the head size.
        attention_scaling: Number: the factor of the cosines and sines (keras-hub's `rope_init`).
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        x: Queries or keys `(batch, seq_len, ...)`: their batch size, length and dtype are read.
        start_index: Integer or scalar integer tensor: the first position.

    Example:

        >>> layer = SmolLM3Rotary(
        ...     rope_theta=2e6, partial_rotary_factor=1.0, head_dim=8, attention_scaling=1.0
        ... )
        >>> cos, sin = layer(keras.ops.zeros((2, 5, 8)), start_index=3)
        >>> tuple(cos.shape)
        (2, 5, 8)
    """

    def __init__(self, rope_theta, partial_rotary_factor, head_dim, attention_scaling, **kwargs):
        super().__init__(**kwargs)
        self.rope_theta = rope_theta
        self.partial_rotary_factor = partial_rotary_factor
        self.head_dim = head_dim
        self.attention_scaling = attention_scaling
        self.rotary_width = int(head_dim * partial_rotary_factor)
        self._rope = RotaryEmbedding(
            max_wavelength=rope_theta,
            attention_factor=None if attention_scaling == 1.0 else attention_scaling,
            dtype=self.dtype_policy,
        )
        # keras-hub's weight, kept under its name so that checkpoints load either way; the
        # rows come from the exact route, not from it.
        self.inv_freq = self.add_weight(
            name="inv_freq",
            shape=(self.rotary_width // 2,),
            initializer=keras.initializers.Constant(self._rope.frequencies(self.rotary_width)),
            trainable=False,
        )
        self.built = True

    def call(self, x, start_index=0):
        shape_of_heads = ops.zeros((1, ops.shape(x)[1], self.rotary_width), self._rope.compute_dtype)
        cos, sin = self._rope.rows(shape_of_heads, start_index=start_index)
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        cos, sin = (ops.broadcast_to(table, (batch, length, self.rotary_width)) for table in (cos, sin))
        return ops.cast(cos, x.dtype), ops.cast(sin, x.dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "rope_theta": self.rope_theta,
            "partial_rotary_factor": self.partial_rotary_factor,
            "head_dim": self.head_dim,
            "attention_scaling": self.attention_scaling,
        }


def _sites(model):
    """Every `(parent, attribute, layer)` reachable from `model` whose layer is a keras-hub
    rotary layer, each parent once, found through the layers' attributes (and the lists,
    tuples and dicts of layers they hold)."""
    known = tuple(_keras_hub_layers.classes().values())
    seen, found = set(), []

    def visit(layer):
        if id(layer) in seen:
            return
        seen.add(id(layer))
        for attribute, value in _attributes(layer):
            if isinstance(value, known):
                found.append((layer, attribute, value))
            for child in _layers_in(value):
                visit(child)

    visit(model)
    return found


def _attributes(layer):
    """`layer`'s attributes: its own, and on Keras's PyTorch backend the sublayers that
    `torch.nn.Module` keeps apart from them (`named_children`)."""
    attributes = dict(vars(layer))
    if hasattr(layer, "named_children"):
        attributes.update(layer.named_children())
    return list(attributes.items())


def _layers_in(value):
    if isinstance(value, keras.layers.Layer):
        return [value]
    if isinstance(value, (list, tuple)):
        return [item for item in value if isinstance(item, keras.layers.Layer)]
    if isinstance(value, dict):
        return [item for item in value.values() if isinstance(item, keras.layers.Layer)]
    return []


def _replace(parent, attribute, layer, exact):
    """`parent.attribute`, which holds `layer`, set to `exact`, which Keras then tracks in its
    place (its weights, `model.layers`, saving; on PyTorch, torch's modules): the tracker of a
    built layer is unlocked for the change, as Keras's own `Dense.enable_lora` does."""
    tracker = parent._tracker
    locked = tracker.locked
    tracker.unlock()
    try:
        held_elsewhere = any(value is layer for name, value in _attributes(parent) if name != attribute)
        if tracker.is_in_store("layers", layer) and not held_elsewhere:
            tracker.replace_tracked_value("layers", layer, exact)
        setattr(parent, attribute, exact)
    finally:
        if locked:
            tracker.lock()


def _exact_layer(parent, layer):
    """The tf_posenc layer for the keras-hub rotary `layer` that `parent` calls."""
    known = _keras_hub_layers.classes()
    if type(layer) is known["SmolLM3RotaryEmbedding"]:
        _keras_hub_layers.checked_attributes(layer, "SmolLM3RotaryEmbedding")
        return SmolLM3Rotary(
            rope_theta=layer.rope_theta,
            partial_rotary_factor=layer.partial_rotary_factor,
            head_dim=layer.head_dim,
            attention_scaling=float(layer.attention_scaling),
            dtype=layer.dtype_policy,
            name=layer.name,
        )
    if getattr(parent, "mrope_section", None) is not None:
        missing = [name for name in _MROPE_ATTRIBUTES if not hasattr(parent, name)]
        if missing:
            raise _keras_hub_layers.NotConvertible(
                f"{type(parent).__name__} with `mrope_section` rotates in its own `_apply_partial_rope`, "
                f"and this keras-hub's has no {', '.join(missing)}."
            )
    return RotaryEmbedding.from_keras_hub(layer)


# What `_ExactMRoPE` reads of keras-hub 0.32's Qwen3.5 attention.
_MROPE_ATTRIBUTES = ("_apply_partial_rope", "rotary_dim", "head_dim", "mrope_section")


class _ExactMRoPE:
    """Qwen3.5's attention's `_apply_partial_rope` (keras-hub 0.32), with its M-RoPE path exact.

    keras-hub rotates M-RoPE inputs outside its rotary layer: `_apply_mrope` forms float32 angles
    from the layer's inverse frequencies (its `scaling_factor` unused) and the t, h and w rows of
    `position_ids` `(batch, 4, seq_len)`, interleaved as Qwen3-VL interleaves them, and rotates
    the first `rotary_dim` features in the half layout. Here the same rotation is
    `RotaryEmbedding(mrope_section=..., mrope_interleaved=True)` at those ids, exact; without
    `position_ids` the attention's own method runs, with the swapped rotary layer.
    """

    def __init__(self, attention, rotary):
        self.attention = attention
        self.rope = RotaryEmbedding(
            max_wavelength=rotary.max_wavelength,
            mrope_section=tuple(attention.mrope_section),
            mrope_interleaved=True,
            dtype=attention.dtype_policy,
        )

    def __call__(self, x, start_index, position_ids=None):
        attention = self.attention
        if position_ids is None:
            return type(attention)._apply_partial_rope(attention, x, start_index, None)
        width = attention.rotary_dim
        ids = ops.transpose(position_ids[:, 1:, :], (1, 0, 2))  # (3, batch, seq_len): t, h, w
        rotated = ops.cast(self.rope(x[..., :width], positions=ids), x.dtype)
        if width == attention.head_dim:
            return rotated
        return ops.concatenate([rotated, x[..., width:]], axis=-1)


def exact_rotary(model, strict=True):
    """Replaces every keras-hub rotary layer of `model`, in place, by tf_posenc's exact one.

    Each rotary layer that a keras-hub attention layer calls (Llama, Llama 3, Mistral, Mixtral,
    Gemma, Gemma 3 and 4, Gemma 3n, Qwen, Qwen-MoE, Qwen3, Qwen3-MoE, Qwen3.5, Phi-3 with either
    rope, GPT-NeoX, gpt-oss, SmolLM3, T5Gemma, T5Gemma2, ...) becomes the `RotaryEmbedding` of
    `RotaryEmbedding.from_keras_hub`; SmolLM3's `(cos, sin)` layer becomes a `SmolLM3Rotary`.
    Qwen3.5's attention rotates M-RoPE inputs (`position_ids`) itself, from the rotary layer's
    frequencies: that path of the model's attention layers becomes the exact
    `RotaryEmbedding(mrope_section=..., mrope_interleaved=True)` at the same ids. The new layer
    takes the keras-hub layer's place in the model, on every backend: the attribute the attention
    reads, `model.layers`, the weights (SmolLM3's `inv_freq` keeps its path) and torch's modules on
    PyTorch. The model's compiled functions (`generate_function`, `predict_function`, ...) are
    dropped so that the next call traces the new layers. Calling it again changes nothing.

    keras-hub's GPT-NeoX cached path rotates every decoded query at position 0 (a keras-hub
    bug); the swapped layer is called as keras-hub calls it, so it does the same.

    Saving: a model saved after the swap holds keras-hub's arguments only and reloads with
    keras-hub's layers: apply `exact_rotary` after `keras.saving.load_model` or `from_preset`.

    Args:
        model: A built keras-hub `Backbone` or task (`CausalLM`, ...), or any Keras model or
            layer holding them.
        strict: Boolean. With `True` (the default), a rotary site that no tf_posenc layer
            reproduces (Moonshine's angles, ESM's layer) is a `ValueError` naming
            it; with `False` it is left as it is and reported in a warning.

    Returns:
        `model`.

    Example:

        >>> import keras_hub
        >>> backbone = keras_hub.models.LlamaBackbone(vocabulary_size=16, num_layers=1,
        ...     num_query_heads=2, hidden_dim=16, intermediate_dim=16, num_key_value_heads=1)
        >>> backbone = exact_rotary(backbone)
        >>> type(backbone.transformer_layers[0]._self_attention_layer.rotary_embedding_layer).__name__
        'RotaryEmbedding'
    """
    if not isinstance(strict, bool):
        raise ValueError(f"`strict` must be a boolean. Received: strict={strict!r}")
    if not isinstance(model, keras.layers.Layer):
        raise ValueError(f"`model` must be a Keras model or layer. Received: {type(model).__name__}")
    left = []
    for parent, attribute, layer in _sites(model):
        site = f"{parent.name}.{attribute} ({type(layer).__name__})"
        try:
            exact = _exact_layer(parent, layer)
        except _keras_hub_layers.NotConvertible as error:
            if strict:
                raise ValueError(
                    f"Cannot make {site} exact: {error} Pass strict=False to leave it."
                ) from error
            left.append(f"{site}: {error}")
            continue
        _replace(parent, attribute, layer, exact)
        if getattr(parent, "mrope_section", None) is not None:
            # The instance's method, not keras-hub's class: only this model changes.
            vars(parent)["_apply_partial_rope"] = _ExactMRoPE(parent, layer)
    if left:
        warnings.warn(
            "exact_rotary left these keras-hub rotary sites as they are:\n" + "\n".join(left), stacklevel=2
        )
    for compiled in ("generate_function", "predict_function", "train_function", "test_function"):
        if getattr(model, compiled, None) is not None:
            setattr(model, compiled, None)
    return model
