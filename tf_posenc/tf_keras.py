"""tf_posenc's layers for tf_keras (Keras 2) models: `tf.keras` under `TF_USE_LEGACY_KERAS=1`.

Importable whenever the `tf-keras` package is installed. Each class is made from the Keras 3
layer of the same name in `tf_posenc.layers`: the same body (its numbers, checks and error
messages) on tf_keras's base class, registered with tf_keras, so a tf_keras model holding these
layers saves to `.keras`, `.h5` and SavedModel and reloads with `tf.keras.models.load_model`
after `import tf_posenc.tf_keras` (or `import tf_posenc` with `TF_USE_LEGACY_KERAS=1`, which
makes these the top-level names).

Example:

    >>> queries = tf_keras.Input((None, 8, 64))
    >>> RotaryEmbedding()(queries).shape
    TensorShape([None, None, 8, 64])
    >>> tokens = tf_keras.Input((None,), dtype="int32")
    >>> PositionalEmbedding(8000, 512, position=1024, mask_zero=True)(tokens).shape
    TensorShape([None, None, 512])
"""

import keras

try:
    import tf_keras
except ImportError as error:
    raise ImportError(
        "`tf_posenc.tf_keras` (and `tf_posenc` under TF_USE_LEGACY_KERAS=1) needs the `tf-keras` "
        "package, the Keras 2 that `tf.keras` then stands for: `pip install tf-keras`."
    ) from error

from tf_posenc import attention, layers
from tf_posenc.layers import base

__all__ = [*layers.__all__, "hf_attention_layers"]  # the same names as the Keras 3 layers

_serializable = tf_keras.saving.register_keras_serializable(package="tf_posenc")


class PositionLayer(base.InputPolicyMixin, tf_keras.layers.Layer):
    """The tf_keras base of tf_posenc's layers that bias attention scores."""

    keras_family = tf_keras


class SinusoidLayer(base.SinusoidLayerMixin, tf_keras.layers.Layer):
    """The tf_keras base of tf_posenc's layers that add or rotate rows."""

    keras_family = tf_keras


def _tf_keras_class(keras_class, made):
    """The tf_keras class of the Keras 3 layer `keras_class`: its body (the mixin) on the tf_keras
    bases, with every class-level reference to another Keras 3 layer (`made`: those made so far)
    pointing at that layer's tf_keras class."""
    family = {
        base.SinusoidLayer: SinusoidLayer,
        base.PositionLayer: PositionLayer,
        keras.layers.Layer: tf_keras.layers.Layer,
        **made,
    }
    name = keras_class.__name__
    namespace = {
        key: family.get(value, value) if isinstance(value, type) else value
        for key, value in vars(keras_class).items()
        if key not in ("__dict__", "__weakref__", "__doc__")
    }
    namespace.update(
        __module__=__name__,
        __qualname__=name,
        __doc__=f"`tf_posenc.layers.{name}` for tf_keras models: the same arguments, checks and numbers.",
    )
    return _serializable(
        type(name, tuple(family.get(base, base) for base in keras_class.__bases__), namespace)
    )


def _make_classes():
    made = {}
    # A layer that holds another (PositionalEmbedding holds a PositionalEncoding) comes after it.
    order = sorted(layers.__all__, key=lambda name: "encoding_layer" in vars(getattr(layers, name)))
    for name in order:
        keras_class = getattr(layers, name)
        made[keras_class] = _tf_keras_class(keras_class, made)
    return {keras_class.__name__: tf_keras_class for keras_class, tf_keras_class in made.items()}


globals().update(_make_classes())


def hf_attention_layers(config, **kwargs):
    """`tf_posenc.hf_attention_layers` with tf_keras `RotaryEmbedding` layers.

    Example:

        >>> plan = hf_attention_layers({"num_hidden_layers": 2, "head_dim": 16})
        >>> type(plan[0].rope).__module__, plan[0].rope is plan[1].rope
        ('tf_posenc.tf_keras', True)
    """
    return attention.attention_layers_with(RotaryEmbedding, config, **kwargs)  # noqa: F821 (made above)
