import keras
import numpy as np

from tf_posenc import _columns, _hf_config, _hf_vision, _positions, _rotation, _rows, _validation, encoding
from tf_posenc.layers.base import SinusoidLayer

# How a call's grid of tokens becomes angles: integer ids, or DINOv3's patch centres in [-1, 1].
GRID_COORDINATES = ("ids", "normalized")
# The pair layouts over the whole head, and "half" within each band (Gemma 4's vision tower).
LAYOUTS = (*_rotation.ROTARY_LAYOUTS, "half_per_axis")


class AxialRotaryEmbeddingMixin:
    """The body of `AxialRotaryEmbedding`, shared by its Keras 3 and tf_keras classes."""

    inputs_hint = "queries or keys"

    def __init__(
        self,
        axes_dim,
        max_wavelength=10000,
        layout="interleave",
        position_scale=1.0,
        grid_coordinates="ids",
        position_axes=None,
        head_dim=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(axes_dim, (tuple, list)) or not axes_dim:
            raise ValueError(
                "`axes_dim` must be a list of even feature widths, one per position axis. "
                f"{_validation.received('axes_dim', axes_dim)}"
            )
        for width in axes_dim:
            if _validation.positive_int("axes_dim", width) % 2:
                raise ValueError(
                    "`axes_dim` must hold even widths: each axis rotates pairs. "
                    f"Received: axes_dim={axes_dim}"
                )
        self.axes_dim = tuple(int(width) for width in axes_dim)
        rotated = sum(self.axes_dim)
        if head_dim is not None and _validation.positive_int("head_dim", head_dim) < rotated:
            raise ValueError(
                f"`head_dim` must be at least sum(axes_dim) = {rotated}: the bands rotate the head's leading "
                f"features. {_validation.received('head_dim', head_dim)}"
            )
        self.head_dim = None if head_dim is None else int(head_dim)
        self.max_wavelength = _validation.wavelength("max_wavelength", max_wavelength)
        self.layout = _validation.one_of("layout", layout, LAYOUTS)
        scales = (
            position_scale if isinstance(position_scale, (tuple, list)) else [position_scale] * len(axes_dim)
        )
        if len(scales) != len(self.axes_dim):
            raise ValueError(
                "`position_scale` must be a number, or one per axis of `axes_dim`. "
                f"{_validation.received('position_scale', position_scale)}"
            )
        self._scales = tuple(
            _validation.number_at_least("position_scale", scale, 0, strict=True) for scale in scales
        )
        self.position_scale = (
            list(position_scale) if isinstance(position_scale, (tuple, list)) else position_scale
        )
        self.grid_coordinates = _validation.one_of("grid_coordinates", grid_coordinates, GRID_COORDINATES)
        if position_axes is not None and (
            not isinstance(position_axes, (tuple, list))
            or len(position_axes) != len(self.axes_dim)
            or not all(isinstance(column, int) and not isinstance(column, bool) for column in position_axes)
            or set(position_axes) != set(range(max(position_axes) + 1))
        ):
            raise ValueError(
                f"`position_axes` must be None or one column of `positions` per band of `axes_dim` "
                f"({len(self.axes_dim)}), using every column from 0 on. "
                f"{_validation.received('position_axes', position_axes)}"
            )
        self.position_axes = None if position_axes is None else list(position_axes)
        # The column of positions (or axis of a grid) each band turns by, and how many there are.
        self._columns = tuple(range(len(self.axes_dim)) if position_axes is None else position_axes)
        self._position_columns = max(self._columns) + 1
        # An id `n` at scale `s` is the integer position `n` at frequency `w * s`: exact.
        self._axis_providers = tuple(
            _rows.provider(*_columns.rotary_columns(frequencies)) for frequencies in self._axis_frequencies()
        )

    def _axis_frequencies(self):
        return [
            encoding.rotary_frequencies(width, self.max_wavelength) * scale
            for width, scale in zip(self.axes_dim, self._scales, strict=True)
        ]

    @classmethod
    def from_hf_config(cls, config, **kwargs):
        """A vision tower's rotary embedding from its Hugging Face transformers config.

        For the vision configs whose rope type is `"axial"` (transformers 5.25: the Qwen2-VL
        to Qwen3.5 towers, GLM-4V, ERNIE 4.5-VL, PaddleOCR-VL, Ovis2.5, VideoLLaMA3, LLaVA-
        OneVision 1.5, MLCD, Step3, Inkling 2, ...; docs/vision.md lists them): `AxialRotaryEmbedding
        ((d // 2, d // 2), max_wavelength=rope_theta, layout="half")` with `d` the tower's head
        size, called with `positions=vision_position_ids(grid_thw, spatial_merge_size)`; Step3's
        and Inkling 2's towers turn by width first (`position_axes=[1, 0]`), Inkling 2's in
        interleaved pairs; Pixtral's width band at frequencies `rope_theta ** (-2 / d)` times
        its height band's (`position_scale`); Kimi-K2.5's in bands of one pair, width and height
        alternating; Gemma 4's in halves within each band (`layout="half_per_axis"`). SAM's
        towers (SAM 2's, EdgeTAM's and SAM 3's tracker's memory attention, SAM 3's ViT) turn the
        first band by the column in interleaved pairs, and are called on their fixed grid: the
        memory attention's keys on the grid repeated per memory frame, SAM 3's global layers with
        `position_scale=window_size / (image_size // patch_size)` (docs/vision.md). MiniMax-M3's
        turns three bands of `2 * (d // 3 // 2)` features (frame, row, column; called with
        `vision_position_ids(..., include_temporal=True)`) in halves, and leaves the rest of its
        head (`head_dim=d`).

        For DINOv3's ViT (`dinov3_vit`, or a config without `model_type`):
        `AxialRotaryEmbedding((d // 2, d // 2), max_wavelength=rope_theta, layout="half",
        grid_coordinates="normalized")` with `d = hidden_size // num_attention_heads`: what
        `DINOv3ViTRopePositionEmbedding` computes in eval mode (its training-time
        `pos_embed_shift`, `jitter` and `rescale` are not applied), called with `grid_size`.

        Args:
            config: A `config.json` as a dict, a path to one (or to the checkpoint folder
                holding it), or a transformers config object: the vision config, or a
                multimodal config holding it as `vision_config`. The keys it omits take its
                transformers config class's defaults.
            **kwargs: Further constructor arguments (`dtype`, `name`).

        Example:

            >>> from tf_posenc import vision_position_ids
            >>> rope = AxialRotaryEmbedding.from_hf_config({"model_type": "qwen2_5_vl",
            ...     "vision_config": {"hidden_size": 1280, "num_heads": 16}})
            >>> rope.axes_dim, rope.layout
            ((40, 40), 'half')
            >>> ids = vision_position_ids([[1, 4, 6]], spatial_merge_size=2)
            >>> tuple(rope(keras.ops.ones((1, 24, 16, 80)), positions=ids).shape)
            (1, 24, 16, 80)
        """
        whole = _hf_config.as_dict(config)
        if whole.get("model_type") not in (None, "dinov3_vit") or "vision_config" in whole:
            return cls(**{**_hf_vision.axial_arguments(whole), **kwargs})
        config = _hf_config.read_vision(whole, "dinov3_vit")
        for key in ("hidden_size", "num_attention_heads"):
            if config.get(key) is None:
                raise ValueError(f"The config must give `{key}`. Received: none")
        head_dim = config["hidden_size"] // config["num_attention_heads"]
        if head_dim % 4:
            raise ValueError(
                "DINOv3's head size (hidden_size // num_attention_heads) must be a multiple of 4: two "
                f"axes of pairs. Received: head size {head_dim}"
            )
        arguments = {
            "axes_dim": (head_dim // 2, head_dim // 2),
            "max_wavelength": config.get("rope_theta", 100.0),  # DINOv3ViTConfig's default
            "layout": "half",
            "grid_coordinates": "normalized",
        }
        return cls(**{**arguments, **kwargs})

    def call(self, inputs, positions=None, grid_size=None):
        self._output_shape(tuple(inputs.shape))
        self._check_input_dtype(inputs.dtype)
        positions, grid = self._positions_or_grid(inputs, positions, grid_size)
        if grid is not None:
            rows = self._grid_rows(grid, _rotation.rotation_dtype(self.compute_dtype))
            return self._combine(inputs, rows)
        return self._run(inputs, _positions.Positions(values=positions))

    def rows(self, inputs, positions=None, grid_size=None):
        """The `(cos, sin)` of every feature's pair for these positions, as transformers'
        position embeddings: each `(batch or 1, seq_len, dim)`, in the layer's layout, float32
        (float64 under a float64 policy).

        Args:
            inputs: The queries or keys (only their shape and dtype are read).
            positions: As for a call.
            grid_size: As for a call.
        """
        self._output_shape(tuple(inputs.shape))
        positions, grid = self._positions_or_grid(inputs, positions, grid_size)
        dtype = _rotation.rotation_dtype(self.compute_dtype)
        if grid is not None:
            rows = self._grid_rows(grid, dtype)
        else:
            rows = self._rows_for(inputs, _positions.Positions(values=positions))
        if len(rows.shape) == 2:
            rows = keras.ops.expand_dims(rows, 0)
        if self.layout != "half_per_axis":
            return _rotation.per_feature(rows, self.layout)
        cosines, sines = zip(
            *(_rotation.per_feature(band, "half") for band in self._band_rows(rows)), strict=True
        )
        return keras.ops.concatenate(cosines, axis=-1), keras.ops.concatenate(sines, axis=-1)

    def _positions_or_grid(self, inputs, positions, grid_size):
        """The call's integer positions, or its grid where normalised coordinates need one."""
        if (positions is None) == (grid_size is None):
            raise ValueError(
                "Pass `positions` or `grid_size`, one of them. Received: "
                f"positions={'None' if positions is None else 'given'}, grid_size={grid_size!r}"
            )
        axes = self._position_columns
        if grid_size is not None:
            grid = _validation.grid_shape("grid_size", grid_size, axes)
            length = inputs.shape[1]
            if length is not None and length != int(np.prod(grid)):
                raise ValueError(
                    f"`grid_size` must have as many cells as `inputs` has steps ({length}): its tokens in "
                    f"row-major order. Received: grid_size={grid_size!r} ({int(np.prod(grid))} cells)"
                )
            if self.grid_coordinates == "normalized":
                return None, grid
            positions = encoding.grid_positions(grid)
        elif self.grid_coordinates == "normalized":
            raise ValueError(
                'A layer with grid_coordinates="normalized" rotates a patch grid: pass `grid_size`. '
                "Received: positions"
            )
        positions = _positions.checked_values("positions", positions)
        self._checked_positions_shape(inputs, positions)
        return positions, None

    def _grid_rows(self, grid, dtype):
        """The rows of a grid's cells at normalised coordinates: cell `i` of an axis of `n`
        cells is the patch centre `(2i + 1) / n - 1`, and pair `k` of the axis's band turns by
        `2 pi c w_k` (DINOv3). Computed in float64 and rounded once, as the grid is known."""
        centres = [(2.0 * np.arange(size) + 1.0 - size) / size for size in grid]  # exact numerators
        cells = np.stack(np.meshgrid(*centres, indexing="ij"), axis=-1).reshape(-1, len(grid))
        angles = np.concatenate(
            [
                2 * np.pi * cells[:, column, None] * frequencies[None, :]
                for column, frequencies in zip(self._columns, self._axis_frequencies(), strict=True)
            ],
            axis=-1,
        )
        return _rows.rows_of_angles(angles, dtype)

    def _checked_positions_shape(self, inputs, positions):
        shape = tuple(positions.shape)
        axes, length = self._position_columns, inputs.shape[1]
        if len(shape) not in (2, 3) or shape[-1] != axes or shape[-2] not in (None, length) and length:
            raise ValueError(
                f"`positions` must have shape (seq_len, {axes}) or (batch, seq_len, {axes}): one id per "
                f"position axis for each step of `inputs`. Received: positions with shape {shape} "
                f"for inputs.shape={tuple(inputs.shape)}"
            )

    def _rows_for(self, inputs, positions):
        groups = [
            (positions.values[..., column], provider)
            for column, provider in zip(self._columns, self._axis_providers, strict=True)
        ]
        return _rotation.grouped_rows(groups, _rotation.rotation_dtype(self.compute_dtype))

    def _combine(self, inputs, rows):
        rotated = sum(self.axes_dim)
        if inputs.shape[-1] > rotated:
            # MiniMax-M3's tower: the bands turn the head's leading features, the tail passes as it is.
            turned = self._combine(inputs[..., :rotated], rows)
            return keras.ops.concatenate(
                [turned, _rows.cast(inputs[..., rotated:], self.compute_dtype)], axis=-1
            )
        if self.layout != "half_per_axis":
            return _rotation.rotate(inputs, rows, self.layout, self.compute_dtype)
        parts, start = [], 0
        for width, band in zip(self.axes_dim, self._band_rows(rows), strict=True):
            parts.append(
                _rotation.rotate(inputs[..., start : start + width], band, "half", self.compute_dtype)
            )
            start += width
        return keras.ops.concatenate(parts, axis=-1)

    def _band_rows(self, rows):
        """Each band's rows (its pairs' sines, then their cosines) from the rows of every pair."""
        sines, cosines = keras.ops.split(rows, 2, axis=-1)
        bands, start = [], 0
        for width in self.axes_dim:
            pairs = slice(start, start + width // 2)
            bands.append(keras.ops.concatenate([sines[..., pairs], cosines[..., pairs]], axis=-1))
            start += width // 2
        return bands

    def frequencies(self):
        """The float64 angular frequency of every feature pair, axis after axis (times its
        axis's `position_scale`)."""
        return np.concatenate(self._axis_frequencies())

    def get_config(self):
        return {
            **super().get_config(),
            "axes_dim": list(self.axes_dim),
            "max_wavelength": self.max_wavelength,
            "layout": self.layout,
            "position_scale": self.position_scale,
            "grid_coordinates": self.grid_coordinates,
            "position_axes": self.position_axes,
            "head_dim": self.head_dim,
        }

    def _width(self):
        return sum(self.axes_dim) if self.head_dim is None else self.head_dim

    def _output_shape(self, shape):
        if len(shape) < 3 or shape[-1] != self._width():
            what = "sum(axes_dim)" if self.head_dim is None else "head_dim"
            raise ValueError(
                f"`inputs` must be (batch, seq_len, ..., dim) with dim = {what} = "
                f"{self._width()}. Received: inputs.shape={shape}"
            )
        return shape


@keras.saving.register_keras_serializable(package="tf_posenc")
class AxialRotaryEmbedding(AxialRotaryEmbeddingMixin, SinusoidLayer):
    """Rotary embedding over several position axes: each axis turns its own band of pairs.

    The head's `sum(axes_dim)` features are split into one band per axis; band `a` rotates by
    the position id `positions[..., a]` with the RoPE frequencies of its own width
    `axes_dim[a]` (`max_wavelength ** (-2j / axes_dim[a])`). This is FLUX's `EmbedND`
    (`axes_dim=(16, 56, 56)` over (text, row, column) ids, interleaved pairs), a 2-D vision
    RoPE such as Qwen2-VL's vision tower (row and column bands, `layout="half"`) or EVA-02's
    (row and column bands, interleaved, `position_scale=pt_seq_len / ft_seq_len`), and video
    (frame, row, column) splits. Cosines and sines come from the exact route; the rotation is
    float32 (float64 under a float64 policy), rounded once.

    Args:
        axes_dim: List of even integers: the feature width of each axis's band.
        max_wavelength: Number greater than 1 (diffusers' and transformers' `theta`).
            Defaults to `10000`.
        layout: `"interleave"` (pairs `2j, 2j + 1`: FLUX, EVA-02) or `"half"` (`j, j + dim/2`:
            Qwen2-VL's vision RoPE), over the whole head; or `"half_per_axis"`, halves within
            each band (Gemma 4's vision tower). Defaults to `"interleave"`.
        position_scale: Positive number, or one per axis: each axis's ids are multiplied by
            it (EVA-02's `pt_seq_len / ft_seq_len`, for a grid finer than the pretraining one).
            Defaults to `1.0`.
        grid_coordinates: `"ids"` (integer `positions`, or `grid_positions(grid_size)`) or
            `"normalized"` (DINOv3: a call's `grid_size`, whose cell `i` of an axis of `n`
            cells sits at the patch centre `(2i + 1) / n - 1` and turns pair `k` of its band by
            `2 pi c w_k`; see `from_hf_config`). Defaults to `"ids"`.
        position_axes: Optional list, one entry per band: band `a` turns by column
            `position_axes[a]` of `positions` (or axis of `grid_size`), every column used.
            Step3's and Inkling 2's vision towers rotate width before height, `[1, 0]`, from
            the same (h, w) ids as the others; Kimi-K2.5's alternate one pair at a time.
            Defaults to `None`: band `a` by column `a`.
        head_dim: Optional integer, at least `sum(axes_dim)`: each head's width, whose leading
            `sum(axes_dim)` features the bands rotate and whose rest passes unchanged
            (MiniMax-M3's vision tower). Defaults to `None` (`sum(axes_dim)`).
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: `(batch, seq_len, dim)` or `(batch, seq_len, heads, dim)`.
        positions: Integer ids `(seq_len, axes)` or `(batch, seq_len, axes)`, one column per
            position axis (`len(axes_dim)`, or the columns `position_axes` names), for example
            from `grid_positions` or `vision_position_ids`.
        grid_size: Instead of `positions`, a tuple of one positive integer per axis: the
            tokens of a patch grid in row-major order, `prod(grid_size)` of them. For DINOv3,
            pass the patch tokens only (`x[:, 1 + num_register_tokens:]`): its class and
            register tokens are not rotated.

    Example:

        >>> from tf_posenc import grid_positions
        >>> layer = AxialRotaryEmbedding((16, 56, 56), layout="interleave")
        >>> ids = grid_positions((1, 2, 3))  # FLUX's (0, row, column) image ids
        >>> tuple(layer(keras.ops.ones((1, 6, 24, 128)), positions=ids).shape)
        (1, 6, 24, 128)

    References:
        [Black Forest Labs, FLUX](https://github.com/black-forest-labs/flux)
    """
