import math

import keras
from keras import ops

from tf_posenc import _validation
from tf_posenc.layers.base import SinusoidLayer
from tf_posenc.layers.positional_encoding import PositionalEncoding


class PositionalEmbeddingMixin:
    """The body of `PositionalEmbedding`, shared by its Keras 3 and tf_keras (Keras 2) classes."""

    def __init__(
        self,
        vocab_size,
        d_model,
        position,
        mask_zero=False,
        max_wavelength=10000,
        layout=None,
        embeddings_initializer="uniform",
        convention="paper",
        min_timescale=1.0,
        padding_idx=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = _validation.positive_int("vocab_size", vocab_size)
        self.d_model = _validation.positive_int("d_model", d_model)
        self.position = _validation.positive_int("position", position, maximum=_validation.MAX_POSITION)
        self.mask_zero = _validation.boolean("mask_zero", mask_zero)
        self.max_wavelength, self.layout, self.convention, self.min_timescale = _validation.encoding_options(
            self.d_model, max_wavelength, layout, convention, min_timescale
        )
        self.padding_idx = (
            None if padding_idx is None else _validation.non_negative_int("padding_idx", padding_idx)
        )
        self.embeddings_initializer = self.keras_family.initializers.get(embeddings_initializer)
        self.token_embedding = self.keras_family.layers.Embedding(
            vocab_size,
            d_model,
            mask_zero=mask_zero,
            embeddings_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.position_encoding = self.encoding_layer(
            self.position,
            self.d_model,
            max_wavelength=self.max_wavelength,
            layout=self.layout,
            convention=self.convention,
            min_timescale=self.min_timescale,
            dtype=self.dtype_policy,
            name="position_encoding",
        )

    def build(self, input_shape):
        input_shape = _validation.input_shape(input_shape, 2, "(batch, seq_len) token ids")
        if not self.token_embedding.built:  # tf_keras's Embedding would add a second matrix
            self.token_embedding.build(input_shape)
        self.position_encoding.build(input_shape + (self.d_model,))
        self.built = True  # tf_keras leaves this to build

    def call(self, inputs, start_index=0, positions=None):
        self._checked_inputs(inputs)
        # An incoming mask is merged by `compute_mask`; a fresh tensor carries none into the
        # inner Embedding, which would warn that it drops it.
        embedded = self.token_embedding(ops.copy(inputs)) * math.sqrt(self.d_model)
        if self.padding_idx is None:
            return self.position_encoding(embedded, start_index=start_index, positions=positions)
        if positions is not None or not (isinstance(start_index, int) and start_index == 0):
            raise ValueError(
                "With `padding_idx`, positions come from the tokens (as in fairseq); pass neither "
                "`start_index` nor `positions`."
            )
        # fairseq's make_positions: real tokens count up from padding_idx + 1, padding tokens
        # sit at padding_idx, whose row is all zeros.
        real = ops.cast(ops.not_equal(inputs, self.padding_idx), "int32")
        positions = ops.cumsum(real, axis=1) * real + self.padding_idx
        zeros = ops.zeros_like(embedded)
        encoded = self.position_encoding(zeros, positions=positions)
        return embedded + encoded * ops.cast(real, encoded.dtype)[..., None]

    def compute_mask(self, inputs, mask=None):
        own = self.token_embedding.compute_mask(inputs)
        if mask is None or own is None:
            return own if mask is None else mask
        return ops.logical_and(ops.cast(mask, "bool"), own)

    def _output_shape(self, shape):
        return _validation.input_shape(shape, 2, "(batch, seq_len) token ids") + (self.d_model,)

    @staticmethod
    def _check_input_dtype(dtype):
        dtype = keras.backend.standardize_dtype(dtype)
        if "int" not in dtype:
            raise TypeError(f"`inputs` must hold integer token ids. Received: inputs.dtype={dtype}")

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "d_model": self.d_model,
            "position": self.position,
            "mask_zero": self.mask_zero,
            "max_wavelength": self.max_wavelength,
            "layout": self.layout,
            "embeddings_initializer": self.keras_family.initializers.serialize(self.embeddings_initializer),
            "convention": self.convention,
            "min_timescale": self.min_timescale,
            "padding_idx": self.padding_idx,
        }


@keras.saving.register_keras_serializable(package="tf_posenc")
class PositionalEmbedding(PositionalEmbeddingMixin, SinusoidLayer):
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
        layout: `"interleave"` or `"concat"`. Defaults to the convention's own.
        embeddings_initializer: The initializer of the embedding matrix.
            Defaults to `"uniform"`, as `keras.layers.Embedding`.
        convention: `"paper"`, `"tensor2tensor"`, `"tensor2tensor_documented"` or
            `"fairseq"`, as for `PositionalEncoding`. Defaults to `"paper"`.
        min_timescale: Number. tensor2tensor's `min_timescale`. Defaults to `1.0`.
        padding_idx: Optional integer. fairseq's padding id: real tokens take
            positions `padding_idx + 1, padding_idx + 2, ...` (counting real tokens
            only) and padding tokens get an all-zero encoding row. `position` must
            then exceed `seq_len + padding_idx`. Defaults to `None`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Integer tensor of token ids, shape `(batch, seq_len)`.
        start_index: Integer or scalar integer tensor. Position of the first
            token, for decoding one step at a time. Defaults to `0`.
        positions: Optional integer tensor of shape `(seq_len,)` or
            `(batch, seq_len)`: the position of each token, for example from
            `positions_from_mask`.

    Example:

        >>> tokens = keras.Input((None,), dtype="int32")
        >>> embedded = PositionalEmbedding(8000, 512, position=1024, mask_zero=True)(tokens)
        >>> embedded.shape
        (None, None, 512)
    """

    encoding_layer = PositionalEncoding
