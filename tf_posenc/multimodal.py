"""M-RoPE ids for sequences of text, image, video and audio tokens (Qwen2-VL's multimodal RoPE
and the rules of the models after it)."""

import itertools

import numpy as np

from tf_posenc import _validation

TOKEN_TYPES = {0: "text", 1: "image", 2: "video", 3: "audio"}


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


def vision_position_ids(grid_thw, spatial_merge_size, include_temporal=False):
    """The (h, w) ids of a vision tower's patches, as transformers 5.25's
    `vision_utils.get_vision_position_ids` lays them out for its axial rotation (the Qwen2-VL,
    Qwen2.5-VL, Qwen3-VL, GLM-4V and PaddleOCR-VL towers, MiniMax-M3's with `include_temporal`).

    Within each image or video the patches run block by block: the `spatial_merge_size x
    spatial_merge_size` patches the tower merges into one token come together, row-major
    inside the block, the blocks row-major over the grid; a video repeats its frame's ids `t`
    times.

    Args:
        grid_thw: `(count, 3)` positive integers: each image's or video's (t, h, w) in patches,
            known when the function is called (they decide the number of tokens).
        spatial_merge_size: Positive integer dividing every `h` and `w`, or one per grid.
        include_temporal: Boolean: prepend each patch's frame index. Defaults to `False`.

    Returns:
        An int32 NumPy array `(tokens, 2)` of (h, w) ids, or `(tokens, 3)` of (t, h, w) with
        `include_temporal`: the `positions` of `AxialRotaryEmbedding`.

    Example:

        >>> vision_position_ids([[1, 2, 4]], 2).tolist()
        [[0, 0], [0, 1], [1, 0], [1, 1], [0, 2], [0, 3], [1, 2], [1, 3]]
    """
    grids = _grids("grid_thw", grid_thw)
    if not grids:
        raise ValueError("`grid_thw` must hold at least one grid. Received: grid_thw=None")
    sizes = (spatial_merge_size,) * len(grids) if np.ndim(spatial_merge_size) == 0 else spatial_merge_size
    sizes = list(np.asarray(sizes).ravel())
    if len(sizes) != len(grids) or not all(
        isinstance(size, (int, np.integer)) and not isinstance(size, bool) and size > 0 for size in sizes
    ):
        raise ValueError(
            "`spatial_merge_size` must be a positive integer, or one per grid of `grid_thw` "
            f"({len(grids)}). {_validation.received('spatial_merge_size', spatial_merge_size)}"
        )
    _validation.boolean("include_temporal", include_temporal)
    ids = []
    for (t, h, w), merge in zip(grids, sizes, strict=True):
        merge = int(merge)
        if h % merge or w % merge:
            raise ValueError(
                f"`spatial_merge_size` must divide each grid's height and width. Received: "
                f"spatial_merge_size={merge} with grid (t, h, w)=({t}, {h}, {w})"
            )
        rows, columns = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        blocks = (h // merge, merge, w // merge, merge)
        rows = rows.reshape(blocks).transpose(0, 2, 1, 3).ravel()
        columns = columns.reshape(blocks).transpose(0, 2, 1, 3).ravel()
        spatial = np.tile(np.stack([rows, columns], axis=-1), (t, 1))
        if include_temporal:
            spatial = np.concatenate([np.repeat(np.arange(t), h * w)[:, None], spatial], axis=-1)
        ids.append(spatial)
    return np.concatenate(ids).astype(np.int32)


# The model types of transformers 5.25 whose `get_rope_index` is one of the rules here (their code
# is the same, `get_vision_position_ids` included): a video as one run of its whole grid
# (Qwen2-VL's; Qwen2.5-VL's with its frames' t ids spread by `second_per_grid_ts`), or one run per
# frame between timestamp tokens (Qwen3-VL's, which GLM-4V's and Qwen3.5's copy). ERNIE 4.5-VL,
# HunYuan-VL have rules of their own. The Omni models (audio too) have theirs, `_omni_ids`.
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
# Qwen2.5-Omni's and Qwen3-Omni's thinkers: time-aligned ids (`position_id_per_seconds` per
# second), audio tokens counting as text, a video's audio interleaved into it.
_OMNI = ("qwen2_5_omni", "qwen2_5_omni_thinker", "qwen3_omni_moe", "qwen3_omni_moe_thinker")
_MODEL_TYPES = _WHOLE_VIDEO + _FRAME_BY_FRAME + _OMNI


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
    position_id_per_seconds=None,
):
    """The M-RoPE ids of a batch of text, image, video and audio tokens, as transformers builds them.

    What transformers 5.x's Qwen2-VL `get_rope_index` computes: text tokens count up on all
    three axes; an image's or video's tokens get ids `(start + t, start + h, start + w)` over
    its merged grid `(t, h // spatial_merge_size, w // spatial_merge_size)` in row-major order,
    after which the text continues at `start + max(h, w) // spatial_merge_size`. Padding
    (`attention_mask` 0) is left out and gets ids 0 (1 for Qwen2.5-Omni, as its code fills it).
    A run of image (or video) tokens is one image (video): the grids are used in order, across
    the batch.

    With `model_type="qwen2_5_vl"`, Qwen2.5-VL's: a video's frame `f` (of its merged grid) has the
    t id `start + int(f * tokens_per_second * second_per_grid_t)`, the product in float32 as
    transformers forms it, with `second_per_grid_ts` (one per video, 1 when not given) from the
    processor and `tokens_per_second` from the model's `vision_config`.

    With `model_type="qwen3_vl"`, Qwen3-VL's `get_rope_index`: its processor puts each video
    frame between timestamp text tokens, so a video's grid `(t, h, w)` is `t` grids `(1, h, w)`,
    one per run of video tokens; every vision token's t id is then its run's start. GLM-4V,
    GLM-4.5V, GLM-4.6V, GLM-OCR, Qwen3.5 and the others listed under `model_type` run the same code.

    With `model_type="qwen2_5_omni"` or `"qwen3_omni_moe"` (or their `_thinker`), the Omni
    models' rule, time-aligned: an image's or video's frame `f` has the t id
    `start + f * second_per_grid_t * position_id_per_seconds` (one float32 product, truncated by
    Qwen2.5-Omni; Qwen3-Omni keeps it, and a fraction is a `ValueError` here, since rotations take
    whole positions); audio tokens (type 3) count up on all three axes as text does; after an
    image, video or audio, the text continues at one more than the largest id of its last run.
    A video with its audio (`use_audio_in_video`: a run that mixes video and audio tokens, in the
    order the model's processor interleaves them) gives its video tokens the video's ids and its
    audio tokens ids counting from the same start, each in order; Qwen2.5-Omni's two start tokens
    before it share one id, as do its two end tokens after it (Qwen3-Omni's count up). The vision
    and audio start and end tokens are text tokens here.

    Args:
        token_types: Integer array `(batch, seq_len)`: 0 for text, 1 for image, 2 for video and
            (Omni models) 3 for audio tokens (transformers' `mm_token_type_ids`).
        image_grid_thw: Optional `(num_images, 3)` integers: each image's patch grid.
        video_grid_thw: Optional `(num_videos, 3)` integers: each video's patch grid.
        spatial_merge_size: Integer. How many patches per side the vision tower merges into
            one token. Defaults to `2` (Qwen2-VL).
        attention_mask: Optional `(batch, seq_len)` array, 1 for tokens and 0 for padding.
        model_type: The multimodal model's `model_type`, whose rule: `"qwen2_vl"`,
            `"paddleocr_vl"` or `"qwen2_5_vl"` (a video in one run); `"qwen3_vl"`,
            `"qwen3_vl_moe"`, `"qwen3_5"`, `"qwen3_5_moe"`, `"qwen4_exp"`, `"glm4v"`,
            `"glm4v_moe"`, `"glm46v"`, `"glm_ocr"`, `"cohere_compass"` or `"cosmos3_omni"` (a
            video frame by frame); `"qwen2_5_omni"`, `"qwen2_5_omni_thinker"`,
            `"qwen3_omni_moe"` or `"qwen3_omni_moe_thinker"` (time-aligned, with audio).
            Defaults to `"qwen2_vl"`.
        second_per_grid_ts: Optional sequence of numbers, one per video: the seconds between two
            frames of its merged grid (the processor's `second_per_grid_ts`, or
            `video_second_per_grid` of the Omni processors). Defaults to 1 for each.
        tokens_per_second: Number: Qwen2.5-VL's `vision_config.tokens_per_second` (2 in its
            released checkpoints). Required with `model_type="qwen2_5_vl"` and a video.
        position_id_per_seconds: Number: the Omni models' `position_id_per_seconds` (25 in their
            configs). Defaults to `None`, 25 for the Omni models; other rules take none.

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
    _validation.one_of("model_type", model_type, _MODEL_TYPES)
    allowed = TOKEN_TYPES if model_type in _OMNI else {0: "text", 1: "image", 2: "video"}
    if not np.isin(token_types, list(allowed)).all():
        raise ValueError(
            "`token_types` must hold 0 (text), 1 (image) or 2 (video), and 3 (audio) for the Omni "
            f"models. Received: values {sorted(set(np.unique(token_types).tolist()) - set(allowed))} "
            f"with model_type={model_type!r}"
        )
    merge = _validation.positive_int("spatial_merge_size", spatial_merge_size)
    videos = _grids("video_grid_thw", video_grid_thw)
    if model_type in _FRAME_BY_FRAME:  # one grid per frame, each frame its own run
        videos = [(1, height, width) for frames, height, width in videos for _ in range(frames)]
    grids = {1: iter(_grids("image_grid_thw", image_grid_thw)), 2: iter(videos)}
    if model_type in _OMNI:
        if tokens_per_second is not None:
            raise ValueError(
                "`tokens_per_second` is Qwen2.5-VL's; the Omni models take `position_id_per_seconds`. "
                f"Received: tokens_per_second={tokens_per_second!r} with model_type={model_type!r}"
            )
        per_second = _validation.positive_number(
            "position_id_per_seconds", 25 if position_id_per_seconds is None else position_id_per_seconds
        )
        time_intervals = iter(_seconds(second_per_grid_ts, len(videos)) * np.float32(per_second))
    else:
        if position_id_per_seconds is not None:
            raise ValueError(
                "`position_id_per_seconds` is the Omni models'. Received: "
                f"position_id_per_seconds={position_id_per_seconds!r} with model_type={model_type!r}"
            )
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
        if model_type in _OMNI:
            shared = model_type.startswith("qwen2_5_omni")
            ids = _omni_ids(row, types.tolist(), grids, time_intervals, merge, per_second, shared)
            positions[:, row, kept] = ids
            positions[:, row, ~kept] = int(shared)  # as each fills padding: ones, or zeros
            deltas[row, 0] = (ids.max() + 1 if ids.size else 0) - len(types)
            continue
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
    return iter(np.float32(rate) * _seconds(second_per_grid_ts, video_count))


def _seconds(second_per_grid_ts, video_count):
    """Each video's seconds between two frames of its merged grid, float32 (1 where not given)."""
    seconds = (
        np.ones(video_count) if second_per_grid_ts is None else np.asarray(second_per_grid_ts, np.float64)
    )
    if seconds.shape != (video_count,) or not (np.isfinite(seconds) & (seconds > 0)).all():
        raise ValueError(
            "`second_per_grid_ts` must hold one positive number per video. "
            f"Received: second_per_grid_ts={second_per_grid_ts!r} for {video_count} videos"
        )
    return seconds.astype(np.float32)


def _omni_ids(row, types, grids, time_intervals, merge, per_second, shared_brackets):
    """One row's ids `(3, len(types))` by the Omni models' `get_rope_index` (see
    `mrope_positions`); `shared_brackets`: Qwen2.5-Omni's, whose two start and two end tokens
    around a video with its audio share an id."""
    # Runs of text (0), of an image (1), and of a video, an audio or both (2 and 3 together).
    segments = [(key, list(run)) for key, run in itertools.groupby(types, key=lambda kind: min(kind, 2))]
    mixed = [key == 2 and len(set(kinds)) == 2 for key, kinds in segments]
    parts, start = [], 0
    for index, (key, kinds) in enumerate(segments):
        if key == 0:
            before = shared_brackets and index + 1 < len(segments) and mixed[index + 1]
            after = shared_brackets and index > 0 and mixed[index - 1]
            if (before or after) and len(kinds) < 2 + 2 * (before and after):
                raise ValueError(
                    f"Row {row} has a video with its audio without its two start and two end tokens "
                    "around it (text tokens here), which Qwen2.5-Omni's ids need."
                )
            # Qwen2.5-Omni: the second start or end token takes the id of the first.
            steps = np.ones(len(kinds), np.int64)
            steps[0] = 0
            if after:
                steps[1] = 0
            if before:
                steps[-1] = 0
            ids = np.broadcast_to(start + np.cumsum(steps), (3, len(kinds)))
            parts.append(ids)
            start = int(ids.max()) + 1
            continue
        video_count = kinds.count(key)
        ids = np.empty((3, len(kinds)), np.int64)
        if key == 1 or video_count:
            kind = 1 if key == 1 else 2
            grid = next(grids[kind], None)
            if grid is None:
                raise ValueError(
                    f"Row {row} has more {TOKEN_TYPES[kind]} runs than `{TOKEN_TYPES[kind]}_grid_thw` "
                    "has grids."
                )
            frames, height, width = grid[0], grid[1] // merge, grid[2] // merge
            count = len(kinds) if key == 1 else video_count
            if frames * height * width != count:
                raise ValueError(
                    f"Row {row} has {count} {TOKEN_TYPES[kind]} tokens in a run, but its grid {list(grid)} "
                    f"merged {merge} x {merge} has {frames * height * width} tokens."
                )
            interval = np.float32(per_second) if key == 1 else next(time_intervals)
            # transformers' float32 `arange(t) * second_per_grid * position_id_per_seconds`.
            times = np.arange(frames).astype(np.float32) * interval
            whole = np.trunc(times)
            if not shared_brackets and (whole != times).any():
                raise ValueError(
                    f"Row {row}: Qwen3-Omni's t ids of a video are fractional ({times.tolist()}: its "
                    "frames' seconds times `position_id_per_seconds`), and a rotation takes whole "
                    "positions. Received: the video's second_per_grid_t with "
                    f"position_id_per_seconds={per_second}"
                )
            vision = np.stack(
                np.meshgrid(whole.astype(np.int64), np.arange(height), np.arange(width), indexing="ij")
            )
            ids[:, np.array(kinds) != 3] = vision.reshape(3, -1) + start
        ids[:, np.array(kinds) == 3] = start + np.arange(
            len(kinds) - (video_count if key == 2 else len(kinds))
        )
        parts.append(ids)
        # The next id: one past the largest of the last run (transformers' last piece).
        final = kinds[-1]
        last = len(kinds) - len(list(itertools.takewhile(final.__eq__, reversed(kinds))))
        start = int(ids[:, last:].max()) + 1
    return np.concatenate(parts, axis=1) if parts else np.zeros((3, 0), np.int64)
