"""M-RoPE ids for sequences of text, image and video tokens (Qwen2-VL's multimodal RoPE)."""

import itertools

import numpy as np

from tf_posenc import _validation

TOKEN_TYPES = {0: "text", 1: "image", 2: "video"}


def _grids(name, grids):
    if grids is None:
        return []
    grids = np.asarray(grids)
    if (
        grids.ndim != 2
        or grids.shape[1] != 3
        or not np.issubdtype(grids.dtype, np.integer)
        or (grids <= 0).any()
    ):
        raise ValueError(
            f"`{name}` must be a (count, 3) array of positive integers: each grid's (t, h, w). "
            f"Received: {name} with shape {grids.shape} and dtype {grids.dtype}"
        )
    return [tuple(int(size) for size in grid) for grid in grids]


# The model types of transformers 5.25 whose `get_rope_index` is one of the two rules here (their
# code is the same, `get_vision_position_ids` included): a video as one run of its whole grid
# (Qwen2-VL's), or one run per frame between timestamp tokens (Qwen3-VL's, which GLM-4V's and
# Qwen3.5's copy). Qwen2.5-VL (time scaled by `second_per_grid_ts`), ERNIE 4.5-VL, HunYuan-VL and the
# Omni models have rules of their own.
_WHOLE_VIDEO = ("qwen2_vl", "paddleocr_vl")
_FRAME_BY_FRAME = (
    "qwen3_vl",
    "qwen3_vl_moe",
    "qwen3_5",
    "qwen3_5_moe",
    "qwen4_exp",
    "glm4v",
    "glm4v_moe",
    "glm46v",
    "glm_ocr",
    "cohere_compass",
    "cosmos3_omni",
)
_MODEL_TYPES = _WHOLE_VIDEO + _FRAME_BY_FRAME


def mrope_positions(
    token_types,
    image_grid_thw=None,
    video_grid_thw=None,
    spatial_merge_size=2,
    attention_mask=None,
    model_type="qwen2_vl",
):
    """The M-RoPE ids of a batch of text, image and video tokens, as transformers builds them.

    What transformers 5.x's Qwen2-VL `get_rope_index` computes: text tokens count up on all
    three axes; an image's or video's tokens get ids `(start + t, start + h, start + w)` over
    its merged grid `(t, h // spatial_merge_size, w // spatial_merge_size)` in row-major order,
    after which the text continues at `start + max(h, w) // spatial_merge_size`. Padding
    (`attention_mask` 0) is left out and gets ids 0. A run of image (or video) tokens is one
    image (video): the grids are used in order, across the batch.

    With `model_type="qwen3_vl"`, Qwen3-VL's `get_rope_index`: its processor puts each video
    frame between timestamp text tokens, so a video's grid `(t, h, w)` is `t` grids `(1, h, w)`,
    one per run of video tokens; every vision token's t id is then its run's start. GLM-4V,
    GLM-4.5V, GLM-4.6V, GLM-OCR, Qwen3.5 and the others of `_FRAME_BY_FRAME` run the same code.

    Args:
        token_types: Integer array `(batch, seq_len)`: 0 for text, 1 for image and 2 for
            video tokens (transformers' `mm_token_type_ids`).
        image_grid_thw: Optional `(num_images, 3)` integers: each image's patch grid.
        video_grid_thw: Optional `(num_videos, 3)` integers: each video's patch grid.
        spatial_merge_size: Integer. How many patches per side the vision tower merges into
            one token. Defaults to `2` (Qwen2-VL).
        attention_mask: Optional `(batch, seq_len)` array, 1 for tokens and 0 for padding.
        model_type: The multimodal model's `model_type`, whose rule: `"qwen2_vl"` or
            `"paddleocr_vl"` (also Qwen2.5-VL without `second_per_grid_ts`); `"qwen3_vl"`,
            `"qwen3_vl_moe"`, `"qwen3_5"`, `"qwen3_5_moe"`, `"qwen4_exp"`, `"glm4v"`,
            `"glm4v_moe"`, `"glm46v"`, `"glm_ocr"`, `"cohere_compass"` or `"cosmos3_omni"` (a
            video frame by frame). Defaults to `"qwen2_vl"`.

    Returns:
        `(positions, deltas)`: int32 arrays of shapes `(3, batch, seq_len)` (the `positions` of
        `RotaryEmbedding(mrope_section=...)`) and `(batch, 1)`. A decoding step at cache
        position `p` (tokens so far, padding excluded) takes the ids `p + delta` on every axis:
        `start_index=p + delta`, or the same id three times.

    Example:

        >>> types = [[0, 0, 1, 1, 1, 1, 0]]  # two text tokens, a 1 x 4 x 4 image merged 2 x 2, text
        >>> positions, deltas = mrope_positions(types, image_grid_thw=[[1, 4, 4]])
        >>> positions[:, 0].tolist()
        [[0, 1, 2, 2, 2, 2, 4], [0, 1, 2, 2, 3, 3, 4], [0, 1, 2, 3, 2, 3, 4]]
        >>> deltas.tolist()
        [[-2]]
    """
    token_types = np.asarray(token_types)
    if token_types.ndim != 2 or not np.issubdtype(token_types.dtype, np.integer):
        raise ValueError(
            "`token_types` must be an integer array of shape (batch, seq_len). "
            f"Received: token_types with shape {token_types.shape} and dtype {token_types.dtype}"
        )
    if not np.isin(token_types, list(TOKEN_TYPES)).all():
        raise ValueError(
            "`token_types` must hold 0 (text), 1 (image) or 2 (video). "
            f"Received: values {sorted(set(np.unique(token_types).tolist()) - set(TOKEN_TYPES))}"
        )
    merge = _validation.positive_int("spatial_merge_size", spatial_merge_size)
    _validation.one_of("model_type", model_type, _MODEL_TYPES)
    videos = _grids("video_grid_thw", video_grid_thw)
    if model_type in _FRAME_BY_FRAME:  # one grid per frame, each frame its own run
        videos = [(1, height, width) for frames, height, width in videos for _ in range(frames)]
    grids = {1: iter(_grids("image_grid_thw", image_grid_thw)), 2: iter(videos)}
    mask = (
        np.ones(token_types.shape, bool)
        if attention_mask is None
        else np.asarray(attention_mask).astype(bool)
    )
    if mask.shape != token_types.shape:
        raise ValueError(
            f"`attention_mask` must have the shape of `token_types`, {token_types.shape}. "
            f"Received: attention_mask with shape {mask.shape}"
        )
    positions = np.zeros((3, *token_types.shape), np.int64)
    deltas = np.zeros((token_types.shape[0], 1), np.int64)
    for row, (types, kept) in enumerate(zip(token_types, mask, strict=True)):
        types = types[kept]
        parts, start = [], 0
        for kind, run in itertools.groupby(types.tolist()):
            length = len(list(run))
            if kind == 0:
                parts.append(np.broadcast_to(start + np.arange(length), (3, length)))
                start += length
                continue
            grid = next(grids[kind], None)
            if grid is None:
                raise ValueError(
                    f"Row {row} has more {TOKEN_TYPES[kind]} runs than "
                    f"`{TOKEN_TYPES[kind]}_grid_thw` has grids."
                )
            frames, height, width = grid[0], grid[1] // merge, grid[2] // merge
            if frames * height * width != length:
                raise ValueError(
                    f"Row {row} has a run of {length} {TOKEN_TYPES[kind]} tokens, but its grid {list(grid)} "
                    f"merged {merge} x {merge} has {frames * height * width} tokens."
                )
            ids = np.stack(np.meshgrid(np.arange(frames), np.arange(height), np.arange(width), indexing="ij"))
            parts.append(ids.reshape(3, -1) + start)
            start += max(grid[1], grid[2]) // merge
        ids = np.concatenate(parts, axis=1) if parts else np.zeros((3, 0), np.int64)
        positions[:, row, kept] = ids
        deltas[row, 0] = (ids.max() + 1 if ids.size else 0) - len(types)
    return positions.astype(np.int32), deltas.astype(np.int32)
