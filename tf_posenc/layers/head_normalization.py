"""The query and key norms of transformers' attention modules, over each head or over all heads."""

import keras
from keras import ops

from tf_posenc import _validation

_METHODS = ("rms", "layer")


@keras.saving.register_keras_serializable(package="tf_posenc")
class HeadNormalization(keras.layers.Layer):
    """RMS or layer normalization of per-head features `(batch, len, heads, head_dim)`.

    The norms transformers' attention modules apply to their queries and keys, in every form
    they take: over each head's features (`axis=-1`: Qwen3, Gemma 3, dots1, EXAONE 4) or over
    all heads' features together (`axis=(-2, -1)`: OLMo 2 and 3, OLMoE, MiniMax-M2, whose norm
    runs on the whole projection), RMS (`method="rms"`) or layer normalization (`"layer"`:
    Cohere, StableLM, Persimmon, Phi, Chameleon), with one scale for every head or one per head
    (`per_head=True`: Cohere, StableLM, Chameleon), with a bias (`center=True`: Persimmon,
    Phi) or without a scale at all (`scale=False`: Llama 4's L2 norm, Gemma 3n's value norm).
    Gemma's `1 + weight` is the scale `1 + weight`: `tf_posenc.load_hf_attention_weights`
    loads it so. The statistics are computed in float32 at least, as transformers computes
    them, and the result is cast back to the compute dtype.

    Args:
        method: `"rms"` or `"layer"`. Defaults to `"rms"`.
        epsilon: Non-negative number added to the variance. Defaults to `1e-6`.
        axis: `-1` (each head on its own) or `(-2, -1)` (all heads together). Defaults to `-1`.
        per_head: Boolean: a scale (and bias) for each head, `(heads, head_dim)`, rather than one
            `(head_dim,)` for all. Implied by `axis=(-2, -1)`. Defaults to `False`.
        scale: Boolean: multiply by a learned scale. Defaults to `True`.
        center: Boolean: add a learned bias (layer normalization only). Defaults to `False`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Tensor `(batch, len, heads, head_dim)`.

    Example:

        >>> norm = HeadNormalization(axis=(-2, -1), epsilon=1e-6)  # OLMo 2's q_norm
        >>> tuple(norm(keras.ops.ones((1, 3, 4, 8))).shape)
        (1, 3, 4, 8)
        >>> tuple(norm.gamma.shape)
        (4, 8)
    """

    def __init__(
        self, method="rms", epsilon=1e-6, axis=-1, per_head=False, scale=True, center=False, **kwargs
    ):
        # The scale is read in float32 at least, not rounded to a mixed policy's compute dtype.
        kwargs["autocast"] = False
        super().__init__(**kwargs)
        if method not in _METHODS:
            raise ValueError(f"`method` must be one of {_METHODS}. {_validation.received('method', method)}")
        self.method = method
        self.epsilon = _validation.number_at_least("epsilon", epsilon, 0)
        if isinstance(axis, list):
            axis = tuple(axis)
        if axis not in (-1, (-2, -1)):
            raise ValueError(
                "`axis` must be -1 (each head) or (-2, -1) (all heads together). "
                f"{_validation.received('axis', axis)}"
            )
        self.axis = axis
        self.per_head = _validation.boolean("per_head", per_head)
        self.scale = _validation.boolean("scale", scale)
        self.center = _validation.boolean("center", center)
        if center and method != "layer":
            raise ValueError(
                "`center` adds a bias after layer normalization: it needs method='layer'. "
                f"Received: method={method!r}, center=True"
            )

    def build(self, input_shape):
        if len(input_shape) != 4 or None in tuple(input_shape)[2:]:
            raise ValueError(
                "`HeadNormalization` takes per-head features (batch, len, heads, head_dim) with known "
                f"heads and head_dim. Received: input_shape={tuple(input_shape)}"
            )
        heads, head_dim = input_shape[2], input_shape[3]
        shape = (heads, head_dim) if (self.per_head or self.axis != -1) else (head_dim,)
        self.gamma = self.add_weight(name="scale", shape=shape, initializer="ones") if self.scale else None
        self.beta = self.add_weight(name="bias", shape=shape, initializer="zeros") if self.center else None

    def call(self, inputs):
        dtype = keras.backend.result_type(inputs.dtype, "float32")
        x = ops.cast(inputs, dtype)
        axes = (-1,) if self.axis == -1 else (-2, -1)
        if self.method == "layer":
            x = x - ops.mean(x, axis=axes, keepdims=True)
        variance = ops.mean(ops.square(x), axis=axes, keepdims=True)
        x = x * ops.rsqrt(variance + ops.convert_to_tensor(self.epsilon, dtype))
        if self.gamma is not None:
            x = x * ops.cast(self.gamma, dtype)
        if self.beta is not None:
            x = x + ops.cast(self.beta, dtype)
        return ops.cast(x, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "method": self.method,
                "epsilon": self.epsilon,
                "axis": list(self.axis) if isinstance(self.axis, tuple) else self.axis,
                "per_head": self.per_head,
                "scale": self.scale,
                "center": self.center,
            }
        )
        return config
