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


# The model types of transformers 5.25 whose `get_rope_index` is one of the rules here (their code
# is the same, `get_vision_position_ids` included): a video as one run of its whole grid
# (Qwen2-VL's; Qwen2.5-VL's with its frames' t ids spread by `second_per_grid_ts`), or one run per
# frame between timestamp tokens (Qwen3-VL's, which GLM-4V's and Qwen3.5's copy). ERNIE 4.5-VL,
# HunYuan-VL and the Omni models have rules of their own.
_WHOLE_VIDEO = ("qwen2_vl", "paddleocr_vl", "qwen2_5_vl")
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
    *,
    second_per_grid_ts=None,
    tokens_per_second=None,
):
    """The M-RoPE ids of a batch of text, image and video tokens, as transformers builds them.

    What transformers 5.x's Qwen2-VL `get_rope_index` computes: text tokens count up on all
    three axes; an image's or video's tokens get ids `(start + t, start + h, start + w)` over
    its merged grid `(t, h // spatial_merge_size, w // spatial_merge_size)` in row-major order,
    after which the text continues at `start + max(h, w) // spatial_merge_size`. Padding
    (`attention_mask` 0) is left out and gets ids 0. A run of image (or video) tokens is one
    image (video): the grids are used in order, across the batch.

    With `model_type="qwen2_5_vl"`, Qwen2.5-VL's: a video's frame `f` (of its merged grid) has the
    t id `start + int(f * tokens_per_second * second_per_grid_t)`, the product in float32 as
    transformers forms it, with `second_per_grid_ts` (one per video, 1 when not given) from the
    processor and `tokens_per_second` from the model's `vision_config`.

    With `model_type="qwen3_vl"`, Qwen3-VL's `get_rope_index`: its processor puts each video
    frame between timestamp text tokens, so a video's grid `(t, h, w)` is `t` grids `(1, h, w)`,
    one per run of video tokens; every vision token's t id is then its run's start. GLM-4V,
    GLM-4.5V, GLM-4.6V, GLM-OCR, Qwen3.5 and the others listed under `model_type` run the same code.

    Args:
        token_types: Integer array `(batch, seq_len)`: 0 for text, 1 for image and 2 for
            video tokens (transformers' `mm_token_type_ids`).
        image_grid_thw: Optional `(num_images, 3)` integers: each image's patch grid.
        video_grid_thw: Optional `(num_videos, 3)` integers: each video's patch grid.
        spatial_merge_size: Integer. How many patches per side the vision tower merges into
            one token. Defaults to `2` (Qwen2-VL).
        attention_mask: Optional `(batch, seq_len)` array, 1 for tokens and 0 for padding.
        model_type: The multimodal model's `model_type`, whose rule: `"qwen2_vl"`,
            `"paddleocr_vl"` or `"qwen2_5_vl"` (a video in one run); `"qwen3_vl"`,
            `"qwen3_vl_moe"`, `"qwen3_5"`, `"qwen3_5_moe"`, `"qwen4_exp"`, `"glm4v"`,
            `"glm4v_moe"`, `"glm46v"`, `"glm_ocr"`, `"cohere_compass"` or `"cosmos3_omni"` (a
            video frame by frame). Defaults to `"qwen2_vl"`.
        second_per_grid_ts: Optional sequence of numbers, one per video: the seconds between two
            frames of its merged grid (Qwen2.5-VL's processor output). Defaults to 1 for each.
        tokens_per_second: Number: Qwen2.5-VL's `vision_config.tokens_per_second` (2 in its
            released checkpoints). Required with `model_type="qwen2_5_vl"` and a video.

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
    time_intervals = _time_intervals(model_type, len(videos), second_per_grid_ts, tokens_per_second)
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
            times = np.arange(frames)
            if kind == 2 and time_intervals is not None:
                # transformers' `(arange(t) * interval).long()`: a float32 product, truncated.
                times = (times.astype(np.float32) * next(time_intervals)).astype(np.int64)
            ids = np.stack(np.meshgrid(times, np.arange(height), np.arange(width), indexing="ij"))
            parts.append(ids.reshape(3, -1) + start)
            start += max(grid[1], grid[2]) // merge
        ids = np.concatenate(parts, axis=1) if parts else np.zeros((3, 0), np.int64)
        positions[:, row, kept] = ids
        deltas[row, 0] = (ids.max() + 1 if ids.size else 0) - len(types)
    return positions.astype(np.int32), deltas.astype(np.int32)


def _time_intervals(model_type, video_count, second_per_grid_ts, tokens_per_second):
    """Qwen2.5-VL's float32 `tokens_per_second * second_per_grid_t` of each video, in order; None
    for the other rules, which take neither argument."""
    if model_type != "qwen2_5_vl":
        for name, value in (
            ("second_per_grid_ts", second_per_grid_ts),
            ("tokens_per_second", tokens_per_second),
        ):
            if value is not None:
                raise ValueError(
                    f"`{name}` is Qwen2.5-VL's: it needs model_type='qwen2_5_vl'. "
                    f"Received: {name}={value!r} with model_type={model_type!r}"
                )
        return None
    if not video_count:
        return iter(())
    if tokens_per_second is None:
        raise ValueError(
            "`tokens_per_second` must be given for Qwen2.5-VL's videos: the model's "
            "`vision_config.tokens_per_second` (2 in its released checkpoints). "
            "Received: tokens_per_second=None"
        )
    rate = _validation.positive_number("tokens_per_second", tokens_per_second)
    seconds = (
        np.ones(video_count) if second_per_grid_ts is None else np.asarray(second_per_grid_ts, np.float64)
    )
    if seconds.shape != (video_count,) or not (np.isfinite(seconds) & (seconds > 0)).all():
        raise ValueError(
            "`second_per_grid_ts` must hold one positive number per video. "
            f"Received: second_per_grid_ts={second_per_grid_ts!r} for {video_count} videos"
        )
    return iter(np.float32(rate) * seconds.astype(np.float32))
