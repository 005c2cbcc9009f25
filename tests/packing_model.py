"""A small Transformer over packed batches, in `keras.ops` (TensorFlow and JAX): token and
position embeddings, one rotary attention block with an explicit mask, a per-token output."""

import math

import keras
from keras import ops

import tf_posenc


class RotaryAttention(keras.layers.Layer):
    """Multi-head attention whose queries and keys are rotated at the given positions."""

    def __init__(self, heads, head_dim, **kwargs):
        super().__init__(**kwargs)
        self.heads, self.head_dim = heads, head_dim
        width = heads * head_dim
        self.query, self.key, self.value = (keras.layers.Dense(width) for _ in range(3))
        self.rope = tf_posenc.RotaryEmbedding()

    def build(self, input_shape, *args):
        for dense in (self.query, self.key, self.value):
            dense.build(input_shape)
        self.built = True

    def heads_of(self, x):
        return ops.reshape(x, (ops.shape(x)[0], ops.shape(x)[1], self.heads, self.head_dim))

    def call(self, x, positions, mask):
        queries = self.rope(self.heads_of(self.query(x)), positions=positions)
        keys = self.rope(self.heads_of(self.key(x)), positions=positions)
        return attend(queries, keys, self.heads_of(self.value(x)), mask)


def attend(queries, keys, values, mask):
    """Softmax attention of `(batch, seq, heads, dim)` tensors under a `(batch, q, k)` mask."""
    scores = ops.einsum("bqhd,bkhd->bhqk", queries, keys) / math.sqrt(queries.shape[-1])
    scores = ops.where(ops.expand_dims(mask, 1), scores, -1e9)
    mixed = ops.einsum("bhqk,bkhd->bqhd", ops.softmax(scores, axis=-1), values)
    return ops.reshape(mixed, (ops.shape(mixed)[0], ops.shape(mixed)[1], -1))


def build_model(vocab_size=40, d_model=16, heads=2, position=64):
    """Tokens and their segment ids in; positions and the causal segment mask made inside."""
    tokens = keras.Input((None,), dtype="int32", name="tokens")
    segment_ids = keras.Input((None,), dtype="int32", name="segment_ids")
    positions = tf_posenc.positions_from_segment_ids(segment_ids)
    mask = tf_posenc.segment_attention_mask(segment_ids, causal=True)
    embedding = tf_posenc.PositionalEmbedding(vocab_size, d_model, position=position, name="embedding")
    x = embedding(tokens, positions=positions)
    x = x + RotaryAttention(heads, d_model // heads, name="attention")(x, positions, mask)
    return keras.Model([tokens, segment_ids], keras.layers.Dense(1, name="head")(x))


def packed_batch(documents, seq_len):
    """Token rows and segment ids of `documents` (per row, a list of token lists) packed into
    rows of `seq_len`, padding at the end."""
    import numpy as np

    tokens = np.zeros((len(documents), seq_len), "int32")
    segments = np.zeros((len(documents), seq_len), "int32")
    for row, row_documents in enumerate(documents):
        at = 0
        for number, document in enumerate(row_documents, start=1):
            tokens[row, at : at + len(document)] = document
            segments[row, at : at + len(document)] = number
            at += len(document)
    return tokens, segments
