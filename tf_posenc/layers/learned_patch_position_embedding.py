import keras
from keras import ops

from tf_posenc import _rows, _validation, interpolation
from tf_posenc.layers.base import PositionLayer, config_entries


class LearnedPatchPositionEmbeddingMixin:
    """The body of `LearnedPatchPositionEmbedding`, shared by its Keras 3 and tf_keras classes."""

    def __init__(
        self,
        grid_size,
        d_model,
        num_prefix_tokens=1,
        convention="vit",
        antialias=False,
        embeddings_initializer="truncated_normal",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.grid_size = _validation.positive_int("grid_size", grid_size)
        self.d_model = _validation.positive_int("d_model", d_model)
        self.num_prefix_tokens, self.convention, self.antialias = interpolation.checked_options(
            num_prefix_tokens, convention, antialias
        )
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, input_shape=None):
        # transformers' `position_embeddings`: the prefix tokens', then the grid's, row by row.
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(1, self.num_prefix_tokens + self.grid_size**2, self.d_model),
            initializer=self.embeddings_initializer,
            autocast=False,
        )
        self.built = True

    def call(self, inputs, grid=None):
        grid = self._checked_grid(tuple(inputs.shape), grid)
        inputs = _rows.cast(inputs, self.compute_dtype)
        if len(inputs.shape) == 4:
            return self._add_to_grid(inputs)
        table = interpolation.interpolate_position_embeddings(
            self.position_embeddings, grid, self.num_prefix_tokens, self.convention, self.antialias
        )
        return inputs + ops.cast(table, inputs.dtype)

    def compute_output_spec(self, inputs, grid=None):
        # A functional model's call: the checks a call makes, where the sizes are still `None`.
        self._checked_grid(tuple(inputs.shape), grid)
        return keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)

    def _checked_grid(self, shape, grid):
        """The grid of token inputs of shape `shape` (`grid`, or the square one they hold), after
        checking both; `None` for a patch grid."""
        if len(shape) == 4 and shape[-1] == self.d_model:
            if grid is not None:
                raise ValueError(
                    "`grid` is read from (batch, height, width, d_model) inputs; pass it only with "
                    f"(batch, tokens, d_model) inputs. {_validation.received('grid', grid)}"
                )
            return None
        if len(shape) != 3 or shape[-1] != self.d_model:
            raise ValueError(
                f"`inputs` must have shape (batch, num_prefix_tokens + height * width, {self.d_model}) "
                f"or (batch, height, width, {self.d_model}). Received: inputs.shape={shape}"
            )
        if grid is None:
            side = interpolation.square_side(None if shape[1] is None else shape[1] - self.num_prefix_tokens)
            if side is None:
                raise ValueError(
                    "`grid` must be given unless `inputs` holds a square grid of known size: its "
                    f"{self.num_prefix_tokens} prefix tokens, then height * width patches (or pass "
                    f"(batch, height, width, d_model) patches). Received: inputs.shape={shape}, grid=None"
                )
            return (side, side)
        if not isinstance(grid, (tuple, list)) or len(grid) != 2 or any(size is None for size in grid):
            # A functional model's unknown sizes are None here: the graph would fail far below.
            raise ValueError(
                "`grid` must be (height, width), integers or scalar integer tensors; for sizes known "
                "only when the model runs, pass (batch, height, width, d_model) patches instead. "
                f"{_validation.received('grid', grid)}"
            )
        if shape[1] is not None and all(isinstance(size, int) for size in grid):
            if shape[1] != self.num_prefix_tokens + grid[0] * grid[1]:
                raise ValueError(
                    f"`grid` must have the inputs' patches: {self.num_prefix_tokens} prefix tokens + "
                    f"height * width = {shape[1]}. Received: grid={tuple(grid)} for inputs.shape={shape}"
                )
        return grid

    def _add_to_grid(self, patches):
        """`patches` `(batch, height, width, d_model)` plus the grid's part of the resized table."""
        height, width = (
            size if size is not None else ops.shape(patches)[axis]
            for axis, size in ((1, patches.shape[1]), (2, patches.shape[2]))
        )
        table = interpolation.interpolate_position_embeddings(
            self.position_embeddings, (height, width), self.num_prefix_tokens, self.convention, self.antialias
        )
        table = ops.reshape(table[:, self.num_prefix_tokens :], (1, height, width, self.d_model))
        return patches + ops.cast(table, patches.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            **config_entries(self, "grid_size", "d_model", "num_prefix_tokens", "convention", "antialias"),
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        }


@keras.saving.register_keras_serializable(package="tf_posenc")
class LearnedPatchPositionEmbedding(LearnedPatchPositionEmbeddingMixin, PositionLayer):
    """A learned table of patch positions (ViT, DINOv2, SigLIP), resized to each input's grid.

    The layer owns the pretraining grid's table, `position_embeddings` `(1, num_prefix_tokens +
    grid_size**2, d_model)` (transformers' name and layout: load a checkpoint's into it), and adds
    it, resized to the input's grid with the model's own bicubic interpolation
    (`interpolate_position_embeddings`), to the inputs: the patch embeddings after their prefix
    tokens (class token, registers). The grid may be known only when the graph runs: pass the
    patches as a grid, `(batch, height, width, d_model)` (a functional model of
    `keras.Input((None, None, d_model))` serves every image size; the prefix tokens' own rows,
    `position_embeddings[:, :num_prefix_tokens]`, are then the caller's to add), or tokens with
    `grid` as tensors. Returns `inputs + table`, as `PositionalEncoding` does.

    Args:
        grid_size: Integer. The side of the pretraining grid, in patches (ViT-B/16 at 224: 14).
        d_model: Integer. The embedding width.
        num_prefix_tokens: Integer. Tokens before the grid (ViT and DINOv2: the class token;
            SigLIP: none). Defaults to `1`.
        convention: `"vit"`, `"dinov2"` or `"siglip"`, as for `interpolate_position_embeddings`.
            Defaults to `"vit"`.
        antialias: Boolean. torch's antialiased bicubic (DINOv2 with registers). Defaults to
            `False`.
        embeddings_initializer: Initializer of the table. Defaults to `"truncated_normal"`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Float tensor `(batch, num_prefix_tokens + height * width, d_model)` (tokens),
            or `(batch, height, width, d_model)` (a patch grid, as `PatchPositionalEncoding`
            takes it; the table's grid part is added).
        grid: Optional `(height, width)` of token inputs: integers or scalar integer tensors.
            Defaults to the square grid of the inputs' patches. Not taken with a patch grid.

    Example:

        >>> layer = LearnedPatchPositionEmbedding(grid_size=14, d_model=32)
        >>> tokens = keras.ops.zeros((2, 1 + 16 * 20, 32))  # a class token and a 16 x 20 grid
        >>> tuple(layer(tokens, grid=(16, 20)).shape)
        (2, 321, 32)
        >>> patches = keras.Input((None, None, 32))  # any image size
        >>> keras.Model(patches, layer(patches)).output_shape
        (None, None, None, 32)

    References:
        [Dosovitskiy et al., 2020](https://arxiv.org/abs/2010.11929)
    """
