import math

import keras

from tf_posenc import _validation
from tf_posenc.layers.positional_encoding import PositionalEncoding


@keras.saving.register_keras_serializable(package="tf_posenc")
class PositionalEmbedding(keras.layers.Layer):
    """Token embedding scaled by `sqrt(d_model)`, plus the sinusoidal encoding.

    The input stage of the Transformer in "Attention Is All You Need": token ids go
    through a `keras.layers.Embedding`, the embeddings are multiplied by
    `sqrt(d_model)` (section 3.4 of the paper) so that they are not drowned by the
    encoding, and `PositionalEncoding` adds the position rows. The embedding matrix
    is the only weight, and it is trainable.

    Args:
        vocab_size: Integer. Number of token ids.
        d_model: Integer. Width of the embeddings and of the encoding.
        position: Integer. The number of positions served; inputs may be at
            most this long.
        mask_zero: Boolean. Whether token id 0 is padding, masked out for the
            layers that follow. Defaults to `False`.
        max_wavelength: Number. The base of the wavelengths. Defaults to
            `10000`.
        layout: `"interleave"` or `"concat"`. Defaults to `"interleave"`.
        embeddings_initializer: The initializer of the embedding matrix.
            Defaults to `"uniform"`, as `keras.layers.Embedding`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Integer tensor of token ids, shape `(batch, seq_len)`.
        start_index: Integer or scalar integer tensor. Position of the first
            token, for decoding one step at a time. Defaults to `0`.

    Example:

    >>> tokens = keras.Input((None,), dtype="int32")
    >>> embedded = PositionalEmbedding(8000, 512, position=1024, mask_zero=True)(tokens)
    >>> embedded.shape
    (None, None, 512)
    """

    def __init__(self, vocab_size, d_model, position, mask_zero=False, max_wavelength=10000,
                 layout="interleave", embeddings_initializer="uniform", **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = _validation.positive_int("vocab_size", vocab_size)
        self.d_model = _validation.positive_int("d_model", d_model)
        self.position = _validation.positive_int("position", position)
        if not isinstance(mask_zero, bool):
            raise ValueError(
                "`mask_zero` must be a boolean. "
                f"Received: mask_zero={mask_zero!r} (of type {type(mask_zero).__name__})"
            )
        self.mask_zero = mask_zero
        self.max_wavelength = max_wavelength
        self.layout = layout
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.token_embedding = keras.layers.Embedding(
            vocab_size, d_model, mask_zero=mask_zero,
            embeddings_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy, name="token_embedding",
        )
        self.position_encoding = PositionalEncoding(
            position, d_model, max_wavelength=max_wavelength, layout=layout,
            dtype=self.dtype_policy, name="position_encoding",
        )
        self.supports_masking = mask_zero

    def build(self, input_shape):
        input_shape = _validation.input_shape(input_shape, 2, "(batch, seq_len) token ids")
        self.token_embedding.build(input_shape)
        self.position_encoding.build(input_shape + (self.d_model,))

    def call(self, inputs, start_index=0):
        embedded = self.token_embedding(inputs) * math.sqrt(self.d_model)
        return self.position_encoding(embedded, start_index=start_index)

    def compute_mask(self, inputs, mask=None):
        return self.token_embedding.compute_mask(inputs, mask)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.d_model,)

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "d_model": self.d_model,
            "position": self.position,
            "mask_zero": self.mask_zero,
            "max_wavelength": self.max_wavelength,
            "layout": self.layout,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        }
