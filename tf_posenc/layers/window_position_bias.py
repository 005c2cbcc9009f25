import keras
import numpy as np
from keras import ops

from tf_posenc import _rows, _validation, interpolation
from tf_posenc.layers.base import PositionLayer


def _window(name, window_size, allow_zero=False):
    """`window_size` (an integer or a pair) as a pair of positive (or, where allowed, zero)
    Python ints."""
    sizes = tuple(window_size) if isinstance(window_size, (tuple, list)) else (window_size, window_size)
    check = _validation.non_negative_int if allow_zero else _validation.positive_int
    if len(sizes) != 2:
        raise ValueError(
            f"`{name}` must be an integer or a (height, width) pair. "
            f"{_validation.received(name, window_size)}"
        )
    return tuple(check(name, size) for size in sizes)


def window_position_index(window_size, num_prefix_tokens=0):
    """Swin's and BEiT's `relative_position_index`: for every pair of tokens in a window, the row
    of the bias table that holds their relative position, `(N, N)` int32 with `N` the window's
    tokens (plus BEiT's class token, whose three entries come last in the table)."""
    height, width = window_size
    rows, columns = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    coords = np.stack([rows.ravel(), columns.ravel()])  # (2, N)
    relative = coords[:, :, None] - coords[:, None, :]  # query minus key, per axis
    index = (relative[0] + height - 1) * (2 * width - 1) + relative[1] + width - 1
    if num_prefix_tokens:
        distances = (2 * height - 1) * (2 * width - 1)
        index = np.pad(index, ((1, 0), (1, 0)))
        index[0, :] = distances  # class token to the tokens
        index[:, 0] = distances + 1  # tokens to the class token
        index[0, 0] = distances + 2  # class token to itself
    return index.astype("int32")


class _WindowBiasMixin:
    """A bias of each window's `(heads, N, N)` scores: `call(scores)` adds it, `bias()` gives it."""

    def call(self, attention_scores, window_size=None):
        shape = tuple(attention_scores.shape)
        window = self._window_of(window_size)
        tokens = window[0] * window[1] + getattr(self, "num_prefix_tokens", 0)
        if len(shape) != 4 or shape[1] not in (None, self.num_heads) or shape[2:] != (tokens, tokens):
            raise ValueError(
                "`attention_scores` must have shape "
                f"(batch * windows, {self.num_heads}, {tokens}, {tokens}): num_heads heads over the "
                f"{tokens} tokens of a {window[0]} x {window[1]} window. "
                f"Received: attention_scores.shape={shape}"
            )
        bias = self.bias() if window_size is None else self.bias(window_size)
        return _rows.cast(attention_scores, self.compute_dtype) + ops.cast(
            ops.expand_dims(bias, 0), self.compute_dtype
        )

    def bias(self):
        """The bias `(num_heads, N, N)`, float32."""
        if not self.built:
            self.build()
        table = ops.cast(self._table(), "float32")  # (distances, heads)
        values = ops.take(table, ops.convert_to_tensor(self.relative_position_index), axis=0)
        return self._scaled(ops.transpose(values, (2, 0, 1)))

    def _window_of(self, window_size):
        if window_size is None:
            return self.window_size
        raise ValueError(
            f"`window_size` must be None: `{type(self).__name__}` serves the window it was built for. "
            f"{_validation.received('window_size', window_size)}"
        )

    def _scaled(self, bias):
        return bias

    def compute_output_shape(self, input_shape):
        return input_shape


class WindowPositionBiasMixin(_WindowBiasMixin):
    """The body of `WindowPositionBias`, shared by its Keras 3 and tf_keras classes."""

    def __init__(self, window_size, num_heads, num_prefix_tokens=0, **kwargs):
        super().__init__(**kwargs)
        self.window_size = _window("window_size", window_size)
        self.num_heads = _validation.positive_int("num_heads", num_heads)
        if num_prefix_tokens not in (0, 1) or isinstance(num_prefix_tokens, bool):
            raise ValueError(
                "`num_prefix_tokens` must be 0 (Swin) or 1 (BEiT's class token, with its three table "
                f"entries). {_validation.received('num_prefix_tokens', num_prefix_tokens)}"
            )
        self.num_prefix_tokens = num_prefix_tokens
        self.relative_position_index = window_position_index(self.window_size, num_prefix_tokens)

    def build(self, input_shape=None):
        height, width = self.window_size
        distances = (2 * height - 1) * (2 * width - 1) + 3 * self.num_prefix_tokens
        self.relative_position_bias_table = self.add_weight(
            name="relative_position_bias_table",
            shape=(distances, self.num_heads),
            initializer="zeros",
            autocast=False,
        )
        self.built = True

    def bias(self, window_size=None):
        """The bias `(num_heads, N, N)`, float32, of the layer's window, or of `window_size`.

        For another window the table of relative positions is resized first, as transformers'
        BEiT does at another image size (`BeitRelativePositionBias.forward`, transformers 5.24):
        its `(2 Wh - 1, 2 Ww - 1)` grid of distances is resized with torch's bilinear
        interpolation (`align_corners=False`) to the new window's, and the class token's three
        entries are kept. transformers reshapes the old grid as `(2 Ww - 1, 2 Wh - 1)`, which is
        the same for square pretraining windows (every released BEiT, Data2Vec-Vision and DPT
        checkpoint); for a non-square one this layer keeps the table's own `(height, width)`
        order.

        Args:
            window_size: Optional integer or `(height, width)`: the window the bias is for.
                Defaults to the layer's `window_size`.
        """
        window = self._window_of(window_size)
        if window == self.window_size:
            return super().bias()
        if not self.built:
            self.build()
        table = ops.cast(self.relative_position_bias_table, "float32")
        height, width = self.window_size
        distances = (2 * height - 1) * (2 * width - 1)
        grid = ops.reshape(table[:distances], (2 * height - 1, 2 * width - 1, self.num_heads))
        rows = interpolation.bilinear_weights(2 * height - 1, 2 * window[0] - 1)
        columns = interpolation.bilinear_weights(2 * width - 1, 2 * window[1] - 1)
        # One axis, then the other, as the table resize does.
        resized = ops.einsum("Ww,Hwk->HWk", columns, ops.einsum("Hh,hwk->Hwk", rows, grid))
        resized = ops.concatenate([ops.reshape(resized, (-1, self.num_heads)), table[distances:]], axis=0)
        index = window_position_index(window, self.num_prefix_tokens)
        return ops.transpose(ops.take(resized, ops.convert_to_tensor(index), axis=0), (2, 0, 1))

    def _window_of(self, window_size):
        return self.window_size if window_size is None else _window("window_size", window_size)

    def _table(self):
        return self.relative_position_bias_table

    def get_config(self):
        return {
            **super().get_config(),
            "window_size": list(self.window_size),
            "num_heads": self.num_heads,
            "num_prefix_tokens": self.num_prefix_tokens,
        }


def continuous_coords_table(window_size, pretrained_window_size=(0, 0)):
    """Swin v2's log-spaced relative coordinates `(2 Wh - 1, 2 Ww - 1, 2)`, float32: each relative
    position over the (pretrained) window's extent, times 8, as `sign(x) log2(|x| + 1) / 3`;
    computed in float64 and rounded once."""
    height, width = window_size
    relative = np.stack(
        np.meshgrid(np.arange(1 - height, height), np.arange(1 - width, width), indexing="ij"), axis=-1
    ).astype("float64")
    extent = pretrained_window_size if pretrained_window_size[0] > 0 else window_size
    if extent[0] > 1 or pretrained_window_size[0] > 0:
        relative /= np.array([extent[0] - 1, extent[1] - 1], "float64")
    relative *= 8
    return (np.sign(relative) * np.log2(np.abs(relative) + 1.0) / 3.0).astype("float32")


class ContinuousPositionBiasMixin(_WindowBiasMixin):
    """The body of `ContinuousPositionBias`, shared by its Keras 3 and tf_keras classes."""

    def __init__(self, window_size, num_heads, pretrained_window_size=(0, 0), **kwargs):
        super().__init__(**kwargs)
        self.window_size = _window("window_size", window_size)
        self.num_heads = _validation.positive_int("num_heads", num_heads)
        self.pretrained_window_size = _window(
            "pretrained_window_size", pretrained_window_size, allow_zero=True
        )
        if 0 in self.pretrained_window_size and self.pretrained_window_size != (0, 0):
            raise ValueError(
                "`pretrained_window_size` must be (0, 0) (none) or two positive sizes. "
                f"{_validation.received('pretrained_window_size', pretrained_window_size)}"
            )
        if 1 in self.pretrained_window_size:
            raise ValueError(
                "`pretrained_window_size` must be larger than 1 on each side: the coordinates are divided "
                f"by its size - 1. {_validation.received('pretrained_window_size', pretrained_window_size)}"
            )
        self.relative_coords_table = continuous_coords_table(self.window_size, self.pretrained_window_size)
        self.relative_position_index = window_position_index(self.window_size)

    def build(self, input_shape=None):
        # Swin v2's `continuous_position_bias_mlp`: Linear(2, 512) with a bias, ReLU,
        # Linear(512, heads) without one (kernels are the transposes of torch's weights).
        self.hidden_kernel = self.add_weight(
            name="hidden_kernel",
            shape=(2, 512),
            initializer="glorot_uniform",
            autocast=False,
        )
        self.hidden_bias = self.add_weight(
            name="hidden_bias", shape=(512,), initializer="zeros", autocast=False
        )
        self.output_kernel = self.add_weight(
            name="output_kernel",
            shape=(512, self.num_heads),
            initializer="glorot_uniform",
            autocast=False,
        )
        self.built = True

    def _table(self):
        coords = ops.reshape(ops.convert_to_tensor(self.relative_coords_table), (-1, 2))
        hidden = ops.matmul(coords, ops.cast(self.hidden_kernel, "float32"))
        hidden = ops.relu(hidden + ops.cast(self.hidden_bias, "float32"))
        return ops.matmul(hidden, ops.cast(self.output_kernel, "float32"))

    def _scaled(self, bias):
        return 16.0 * ops.sigmoid(bias)

    def get_config(self):
        return {
            **super().get_config(),
            "window_size": list(self.window_size),
            "num_heads": self.num_heads,
            "pretrained_window_size": list(self.pretrained_window_size),
        }


@keras.saving.register_keras_serializable(package="tf_posenc")
class WindowPositionBias(WindowPositionBiasMixin, PositionLayer):
    """Swin's and BEiT's relative position bias inside a window: a learned bias per head for each
    relative position of two tokens of a window.

    The table has one row per relative position of a `(Wh, Ww)` window, `(2 Wh - 1)(2 Ww - 1)`,
    plus BEiT's three for its class token (to the tokens, from them, to itself) with
    `num_prefix_tokens=1`; `relative_position_index` (an attribute, transformers' name) gives
    each pair of tokens its row, the same as transformers' Swin and BEiT. Load a checkpoint's
    `relative_position_bias_table` into the weight of that name.

    Args:
        window_size: Integer or `(height, width)`. The window, in patches.
        num_heads: Integer. The number of attention heads.
        num_prefix_tokens: `0` (Swin) or `1` (BEiT's class token). Defaults to `0`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        attention_scores: Float tensor `(batch * windows, num_heads, N, N)`, `N` the window's
            tokens (`Wh * Ww`, plus the class token).
        window_size: Optional integer or `(height, width)`: the window of the scores, when it is
            not the layer's (BEiT at another image size: the table resized, see `bias`).
            Defaults to the layer's `window_size`.

    Example:

        >>> layer = WindowPositionBias(window_size=7, num_heads=3)
        >>> layer.relative_position_index.shape, tuple(layer.bias().shape)
        ((49, 49), (3, 49, 49))

    References:
        [Liu et al., 2021](https://arxiv.org/abs/2103.14030),
        [Bao et al., 2021](https://arxiv.org/abs/2106.08254)
    """


@keras.saving.register_keras_serializable(package="tf_posenc")
class ContinuousPositionBias(ContinuousPositionBiasMixin, PositionLayer):
    """Swin v2's continuous relative position bias: a small MLP of log-spaced relative
    coordinates, so that a window of any size gets a bias.

    `relative_coords_table` (an attribute, transformers' name) holds each relative position of the
    window over the extent of `pretrained_window_size` (or of the window itself), times 8, as
    `sign(x) log2(|x| + 1) / log2(8)`; the MLP (`2 -> 512`, ReLU, `512 -> num_heads` without a
    bias, as transformers' `continuous_position_bias_mlp`) maps it to each head's bias, taken at
    `relative_position_index` and scaled as `16 * sigmoid(.)`.

    Args:
        window_size: Integer or `(height, width)`. The window, in patches.
        num_heads: Integer. The number of attention heads.
        pretrained_window_size: `(height, width)` of the window the model was pretrained with,
            or `(0, 0)` for the window itself. Defaults to `(0, 0)`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        attention_scores: Float tensor `(batch * windows, num_heads, Wh * Ww, Wh * Ww)`.

    Example:

        >>> layer = ContinuousPositionBias(window_size=(8, 8), num_heads=4)
        >>> layer.relative_coords_table.shape, tuple(layer.bias().shape)
        ((15, 15, 2), (4, 64, 64))

    References:
        [Liu et al., 2022](https://arxiv.org/abs/2111.09883)
    """
