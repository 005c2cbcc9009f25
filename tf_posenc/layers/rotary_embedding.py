import math

import keras
import numpy as np
from keras import ops

from tf_posenc import _positions, _rows, _validation, encoding
from tf_posenc.layers.base import SinusoidLayer

ROTARY_LAYOUTS = ("half", "interleave")


class RotaryEmbeddingMixin:
    """The body of `RotaryEmbedding`, shared by its Keras 3 and tf_keras (Keras 2) classes."""

    inputs_hint = "queries or keys"

    def __init__(
        self,
        max_wavelength=10000,
        scaling_factor=1.0,
        rope_type="linear",
        beta_fast=32.0,
        beta_slow=1.0,
        original_max_position_embeddings=4096,
        truncate=True,
        sequence_axis=1,
        feature_axis=-1,
        denominator_dim=None,
        layout="half",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.max_wavelength = _validation.wavelength("max_wavelength", max_wavelength)
        self.scaling_factor = _validation.number_at_least("scaling_factor", scaling_factor, 1)
        self.rope_type = _validation.one_of("rope_type", rope_type, encoding.ROPE_TYPES)
        self.beta_fast = _validation.number_at_least("beta_fast", beta_fast, 0, strict=True)
        self.beta_slow = _validation.number_at_least("beta_slow", beta_slow, 0, strict=True)
        self.original_max_position_embeddings = _validation.positive_int(
            "original_max_position_embeddings", original_max_position_embeddings
        )
        if not isinstance(truncate, bool):
            raise ValueError(f"`truncate` must be a boolean. {_validation.received('truncate', truncate)}")
        self.truncate = truncate
        self.sequence_axis = _validation.integer("sequence_axis", sequence_axis)
        self.feature_axis = _validation.integer("feature_axis", feature_axis)
        self.denominator_dim = (
            None if denominator_dim is None else _validation.positive_int("denominator_dim", denominator_dim)
        )
        self.layout = _validation.one_of("layout", layout, ROTARY_LAYOUTS)
        # YaRN's attention temperature, applied to the cosines and sines as keras-hub does.
        self._table_scale = 0.1 * math.log(self.scaling_factor) + 1 if self.rope_type == "yarn" else 1.0
        self._last_constants = None

    def call(self, inputs, start_index=0, positions=None):
        sequence_axis, feature_axis = self._axes(tuple(inputs.shape))
        self._check_input_dtype(inputs.dtype)
        where = _positions.resolve(inputs, sequence_axis, _positions.LARGEST, start_index, positions)
        return self._run(inputs, where, kept_axes=(feature_axis,))

    def get_config(self):
        return {
            **super().get_config(),
            "max_wavelength": self.max_wavelength,
            "scaling_factor": self.scaling_factor,
            "rope_type": self.rope_type,
            "beta_fast": self.beta_fast,
            "beta_slow": self.beta_slow,
            "original_max_position_embeddings": self.original_max_position_embeddings,
            "truncate": self.truncate,
            "sequence_axis": self.sequence_axis,
            "feature_axis": self.feature_axis,
            "denominator_dim": self.denominator_dim,
            "layout": self.layout,
        }

    def frequencies(self, dim):
        """The float64 angular frequency of each of the `dim // 2` feature pairs."""
        return encoding.rotary_frequencies(
            dim,
            self.max_wavelength,
            self.scaling_factor,
            self.rope_type,
            self.beta_fast,
            self.beta_slow,
            self.original_max_position_embeddings,
            self.truncate,
            self.denominator_dim,
        )

    def _constants(self, dim):
        """The route's constants for features of width `dim`, built once (again only when a
        call brings another width)."""
        constants = self._last_constants
        if constants is None or constants.width != dim:
            constants = _rows.column_constants(*encoding.rotary_columns(self.frequencies(dim)))
            self._last_constants = constants
        return constants

    def _output_shape(self, shape):
        self._axes(shape)
        return shape

    def _order(self, rank):
        """The axes of `inputs` in the order (batch, sequence, ..., features)."""
        sequence_axis, feature_axis = self.sequence_axis % rank, self.feature_axis % rank
        middle = [axis for axis in range(1, rank) if axis not in (sequence_axis, feature_axis)]
        return [0, sequence_axis, *middle, feature_axis]

    def _rows_for(self, inputs, positions):
        """The sines of every pair, then their cosines, in float32 (float64 under a float64
        policy), for the positions along the sequence axis."""
        order = self._order(len(inputs.shape))
        sequence_axis, feature_axis = order[1], order[-1]
        wide = "float64" if self.compute_dtype == "float64" else "float32"
        return _rows.rows(
            positions,
            _positions.sequence_length(inputs, sequence_axis),
            self._constants(inputs.shape[feature_axis]),
            wide,
        )

    def _combine(self, inputs, rows):
        rank = len(inputs.shape)
        order = self._order(rank)
        if self._table_scale != 1.0:
            rows = rows * np.asarray(self._table_scale, keras.backend.standardize_dtype(rows.dtype))
        # Per feature: its pair's cosine, and its pair's sine with the sign the rotation gives
        # it; arranged on the small table, so the inputs see one multiply-add.
        sine, cosine = ops.split(rows, 2, axis=-1)
        if self.layout == "half":
            cosine = ops.concatenate([cosine, cosine], axis=-1)
            signed_sine = ops.concatenate([-sine, sine], axis=-1)
        else:
            cosine = ops.reshape(ops.stack([cosine, cosine], axis=-1), ops.shape(rows))
            signed_sine = ops.reshape(ops.stack([-sine, sine], axis=-1), ops.shape(rows))
        for _ in range(rank - 3):  # between the sequence and the features
            # expand_dims, not [..., None, :]: TensorFlow Lite has no builtin for that slice.
            cosine, signed_sine = ops.expand_dims(cosine, -2), ops.expand_dims(signed_sine, -2)
        x = ops.cast(ops.cast(inputs, self.compute_dtype), rows.dtype)
        if order != list(range(rank)):
            x = ops.transpose(x, order)
        pairs = x.shape[-1] // 2
        if self.layout == "half":
            partner = ops.concatenate([x[..., pairs:], x[..., :pairs]], axis=-1)
        else:
            paired = ops.reshape(x, (*ops.shape(x)[:-1], pairs, 2))
            partner = ops.reshape(ops.flip(paired, axis=-1), ops.shape(x))
        rotated = ops.cast(x * cosine + partner * signed_sine, self.compute_dtype)
        if order == list(range(rank)):
            return rotated
        return ops.transpose(rotated, np.argsort(order).tolist())

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
    relative-position property at a million positions. Arguments mean what they mean in
    keras-hub's `RotaryEmbedding`, in the same order, so a keras-hub model can switch layers
    and keep its weights.

    Args:
        max_wavelength: Number greater than 1. The base of the wavelengths. Defaults to
            `10000`.
        scaling_factor: Number, at least 1. Stretches the wavelengths to serve longer
            contexts. Defaults to `1.0`.
        rope_type: `"linear"`, `"dynamic"` (keras-hub's rule, not transformers' dynamic NTK)
            or `"yarn"`: how `scaling_factor` applies (see
            `tf_posenc.encoding.rotary_frequencies`). Defaults to `"linear"`.
        beta_fast: Number. YaRN's fast boundary. Defaults to `32.0`.
        beta_slow: Number. YaRN's slow boundary. Defaults to `1.0`.
        original_max_position_embeddings: Integer. YaRN's training context. Defaults to
            `4096`.
        truncate: Boolean. Whether YaRN's correction range is rounded to whole dimensions.
            Defaults to `True`.
        sequence_axis: Integer. The sequence axis of the inputs. Defaults to `1`.
        feature_axis: Integer. The feature axis of the inputs. Defaults to `-1`.
        denominator_dim: Optional integer. The width in the frequency exponent, if not the
            feature width. Defaults to `None`.
        layout: `"half"` (feature `j` pairs with `j + dim/2`: GPT-NeoX, LLaMA, keras-hub) or
            `"interleave"` (`2j` with `2j + 1`: RoFormer, GPT-J, the documents' `T(k)`).
            Defaults to `"half"`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A floating-point tensor with a sequence axis and an even feature axis, such
            as `(batch, seq_len, dim)` or `(batch, seq_len, heads, dim)`.
        start_index: Integer or scalar integer tensor. The position of the first step, for
            decoding one step at a time. Defaults to `0`.
        positions: Optional tensor of shape `(seq_len,)` or `(batch, seq_len)`: the position
            of each step, for example from `positions_from_mask`. Integers, or floats that
            hold whole numbers (fractional positions are refused).

    Example:

    >>> queries = keras.Input((None, 8, 64))
    >>> rotated = RotaryEmbedding()(queries)
    >>> rotated.shape
    (None, None, 8, 64)

    References:
        [Su et al., 2021](https://arxiv.org/abs/2104.09864)
    """
