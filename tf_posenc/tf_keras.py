"""tf_posenc's layers for tf_keras (Keras 2) models: `tf.keras` under `TF_USE_LEGACY_KERAS=1`.

Importable whenever the `tf-keras` package is installed. Each class shares its body (its
numbers, checks and error messages) with the Keras 3 layer of the same name in
`tf_posenc.layers`; only the base class and the registry of serializable objects differ, so
a tf_keras model holding these layers saves to `.keras`, `.h5` and SavedModel and reloads with
`tf.keras.models.load_model` after `import tf_posenc.tf_keras` (or `import tf_posenc` with
`TF_USE_LEGACY_KERAS=1`, which makes these the top-level names).
"""

try:
    import tf_keras
except ImportError as error:
    raise ImportError(
        "`tf_posenc.tf_keras` (and `tf_posenc` under TF_USE_LEGACY_KERAS=1) needs the `tf-keras` "
        "package, the Keras 2 that `tf.keras` then stands for: `pip install tf-keras`."
    ) from error

from tf_posenc import attention, layers
from tf_posenc.layers.alibi_bias import AlibiBiasMixin
from tf_posenc.layers.axial_rotary_embedding import AxialRotaryEmbeddingMixin
from tf_posenc.layers.base import SinusoidLayerMixin
from tf_posenc.layers.learned_patch_position_embedding import LearnedPatchPositionEmbeddingMixin
from tf_posenc.layers.patch_positional_encoding import PatchPositionalEncodingMixin
from tf_posenc.layers.positional_embedding import PositionalEmbeddingMixin
from tf_posenc.layers.positional_encoding import PositionalEncodingMixin
from tf_posenc.layers.relative_position_bias import RelativePositionBiasMixin
from tf_posenc.layers.rotary_embedding import RotaryEmbeddingMixin
from tf_posenc.layers.timestep_embedding import TimestepEmbeddingMixin
from tf_posenc.layers.video_positional_encoding import VideoPositionalEncodingMixin
from tf_posenc.layers.window_position_bias import ContinuousPositionBiasMixin, WindowPositionBiasMixin

__all__ = [*layers.__all__, "hf_attention_layers"]  # the same names as the Keras 3 layers

_serializable = tf_keras.saving.register_keras_serializable(package="tf_posenc")


class SinusoidLayer(SinusoidLayerMixin, tf_keras.layers.Layer):
    """The tf_keras base of tf_posenc's layers."""

    keras_family = tf_keras


@_serializable
class PositionalEncoding(PositionalEncodingMixin, SinusoidLayer):
    """`tf_posenc.layers.PositionalEncoding` for tf_keras models: same arguments, same numbers.

    Example:

    >>> inputs = tf_keras.Input((None, 64))
    >>> outputs = PositionalEncoding(position=128, d_model=64)(inputs)
    >>> tf_keras.Model(inputs, outputs).output_shape
    (None, None, 64)
    """


@_serializable
class PositionalEmbedding(PositionalEmbeddingMixin, SinusoidLayer):
    """`tf_posenc.layers.PositionalEmbedding` for tf_keras models, with a tf_keras `Embedding`.

    Example:

    >>> tokens = tf_keras.Input((None,), dtype="int32")
    >>> PositionalEmbedding(8000, 512, position=1024, mask_zero=True)(tokens).shape
    TensorShape([None, None, 512])
    """

    encoding_layer = PositionalEncoding


@_serializable
class RotaryEmbedding(RotaryEmbeddingMixin, SinusoidLayer):
    """`tf_posenc.layers.RotaryEmbedding` for tf_keras models: same arguments, same numbers.

    Example:

    >>> queries = tf_keras.Input((None, 8, 64))
    >>> RotaryEmbedding()(queries).shape
    TensorShape([None, None, 8, 64])
    """


@_serializable
class PatchPositionalEncoding(PatchPositionalEncodingMixin, SinusoidLayer):
    """`tf_posenc.layers.PatchPositionalEncoding` for tf_keras models: same arguments, same numbers.

    Example:

    >>> patches = tf_keras.Input((14 * 14, 768))
    >>> PatchPositionalEncoding(grid_size=14, d_model=768)(patches).shape
    TensorShape([None, 196, 768])
    """


@_serializable
class TimestepEmbedding(TimestepEmbeddingMixin, SinusoidLayer):
    """`tf_posenc.layers.TimestepEmbedding` for tf_keras models: same arguments, same numbers.

    Example:

    >>> timesteps = tf_keras.Input((), dtype="int32")
    >>> TimestepEmbedding(320)(timesteps).shape
    TensorShape([None, 320])
    """


@_serializable
class AxialRotaryEmbedding(AxialRotaryEmbeddingMixin, SinusoidLayer):
    """`tf_posenc.layers.AxialRotaryEmbedding` for tf_keras models: same arguments, same numbers.

    Example:

    >>> from tf_posenc import grid_positions
    >>> queries = tf_keras.Input((6, 2, 32))
    >>> AxialRotaryEmbedding((16, 16))(queries, positions=grid_positions((2, 3))).shape
    TensorShape([None, 6, 2, 32])
    """


@_serializable
class VideoPositionalEncoding(VideoPositionalEncodingMixin, SinusoidLayer):
    """`tf_posenc.layers.VideoPositionalEncoding` for tf_keras models: same arguments, same numbers.

    Example:

    >>> video = tf_keras.Input((4, 3, 5, 32))
    >>> VideoPositionalEncoding((5, 3), 4, 32)(video).shape
    TensorShape([None, 4, 3, 5, 32])
    """


@_serializable
class AlibiBias(AlibiBiasMixin, tf_keras.layers.Layer):
    """`tf_posenc.layers.AlibiBias` for tf_keras models: same arguments, same numbers.

    Example:

    >>> scores = tf_keras.Input((8, 5, 5))
    >>> AlibiBias()(scores).shape
    TensorShape([None, 8, 5, 5])
    """


@_serializable
class RelativePositionBias(RelativePositionBiasMixin, tf_keras.layers.Layer):
    """`tf_posenc.layers.RelativePositionBias` for tf_keras models: same arguments, same numbers.

    Example:

    >>> scores = tf_keras.Input((8, 5, 5))
    >>> RelativePositionBias(num_heads=8)(scores).shape
    TensorShape([None, 8, 5, 5])
    """


@_serializable
class WindowPositionBias(WindowPositionBiasMixin, tf_keras.layers.Layer):
    """`tf_posenc.layers.WindowPositionBias` for tf_keras models: same arguments, same numbers.

    Example:

    >>> scores = tf_keras.Input((3, 12, 12))
    >>> WindowPositionBias((3, 4), num_heads=3)(scores).shape
    TensorShape([None, 3, 12, 12])
    """


@_serializable
class ContinuousPositionBias(ContinuousPositionBiasMixin, tf_keras.layers.Layer):
    """`tf_posenc.layers.ContinuousPositionBias` for tf_keras models: same arguments, same numbers.

    Example:

    >>> scores = tf_keras.Input((3, 12, 12))
    >>> ContinuousPositionBias((3, 4), num_heads=3)(scores).shape
    TensorShape([None, 3, 12, 12])
    """


@_serializable
class LearnedPatchPositionEmbedding(LearnedPatchPositionEmbeddingMixin, tf_keras.layers.Layer):
    """`tf_posenc.layers.LearnedPatchPositionEmbedding` for tf_keras models: same arguments, same numbers.

    Example:

    >>> tokens = tf_keras.Input((1 + 6 * 5, 8))
    >>> LearnedPatchPositionEmbedding(4, 8)(tokens, grid=(6, 5)).shape
    TensorShape([None, 31, 8])
    """


def hf_attention_layers(config, **kwargs):
    """`tf_posenc.hf_attention_layers` with tf_keras `RotaryEmbedding` layers.

    Example:

    >>> plan = hf_attention_layers({"num_hidden_layers": 2, "head_dim": 16})
    >>> type(plan[0].rope).__module__, plan[0].rope is plan[1].rope
    ('tf_posenc.tf_keras', True)
    """
    return attention._plan(RotaryEmbedding, config, kwargs)
