"""DeBERTa's relative positions: the (query, key) offsets of its disentangled attention, in
log-spaced buckets beyond half the bucket count, as transformers 5.25 computes them."""

import numpy as np

from tf_posenc import _validation


def deberta_relative_positions(query_length, key_length, bucket_size=-1, max_position=-1):
    """The relative position of every (query, key) pair, as transformers 5.25's
    `build_relative_position` gives it to DeBERTa-v2/v3 and SEW-D.

    The offset is `query - key` (DeBERTa's sign: a key before its query is positive). With
    `bucket_size` and `max_position` both positive, offsets of at least `bucket_size // 2`
    either way are mapped to log-spaced buckets (`make_log_bucket_position`): `mid =
    bucket_size // 2`, and an offset `r` with `|r| >= mid` becomes
    `sign(r) * (mid + ceil(log(|r| / mid) / log((max_position - 1) / mid) * (mid - 1)))`.
    That formula runs in float32 as transformers runs it, so that the result is equal at every
    offset: in float64 a few offsets whose value sits on an integer land in the next bucket
    (for example 1292 at `bucket_size=256, max_position=256`). DeBERTa-v3's configs give
    `position_buckets=256` and `max_relative_positions=-1`, which its model reads as
    `max_position_embeddings` (512).

    Args:
        query_length: Positive integer. Queries sit at positions `0 .. query_length - 1`.
        key_length: Positive integer. Keys sit at positions `0 .. key_length - 1`.
        bucket_size: Integer: the config's `position_buckets`, or `-1` (any value below 1) for
            plain offsets. Defaults to `-1`.
        max_position: Integer: the largest relative position the buckets reach (DeBERTa's
            `max_relative_positions`), or `-1` for plain offsets. Defaults to `-1`.

    Returns:
        An int64 NumPy array of shape `(1, query_length, key_length)`.

    Example:

        >>> deberta_relative_positions(2, 3)[0].tolist()
        [[0, -1, -2], [1, 0, -1]]
        >>> offsets = deberta_relative_positions(1, 400, bucket_size=256, max_position=512)
        >>> offsets[0, 0, [1, 127, 128, 399]].tolist()
        [-1, -127, -128, -233]
    """
    query_length = _validation.positive_int("query_length", query_length)
    key_length = _validation.positive_int("key_length", key_length)
    bucket_size = _validation.integer("bucket_size", bucket_size)
    max_position = _validation.integer("max_position", max_position)
    offsets = np.arange(query_length)[:, None] - np.arange(key_length)[None, :]
    if bucket_size > 0 and max_position > 0:
        offsets = _log_buckets(offsets, bucket_size, max_position)
    return offsets.astype(np.int64)[None]


def _log_buckets(offsets, bucket_size, max_position):
    mid = bucket_size // 2
    if mid < 1 or max_position - 1 <= mid:
        raise ValueError(
            "Log buckets need `bucket_size` of at least 2 and `max_position` above "
            f"`bucket_size // 2 + 1`, so that the log base (max_position - 1) / (bucket_size // 2) "
            f"exceeds 1. Received: bucket_size={bucket_size}, max_position={max_position}"
        )
    near = np.abs(offsets) < mid
    distance = np.where(near, mid - 1, np.abs(offsets))
    # float32 throughout, as transformers' tensors are: `abs_pos / mid`, and the base from a
    # Python float given to `torch.tensor`.
    ratio = distance.astype(np.float32) / np.float32(mid)
    base = np.float32((max_position - 1) / mid)
    logs = np.ceil(np.log(ratio) / np.log(base) * np.float32(mid - 1)) + np.float32(mid)
    return np.where(distance <= mid, offsets, (logs * np.sign(offsets)).astype(np.int64))
