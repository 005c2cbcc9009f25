"""One call of every layer, with the arguments that change its route: the same cases run in
every Keras family and backend, whose outputs must agree bit for bit."""

import numpy as np

rng = np.random.default_rng(7)

# name: (class name, constructor arguments, inputs, call arguments)
CASES = {
    "encoding": (
        "PositionalEncoding",
        {"position": 64, "d_model": 512},
        rng.normal(size=(2, 50, 512)).astype("float32"),
        {},
    ),
    "encoding-start-index": (
        "PositionalEncoding",
        {"position": 4096, "d_model": 64},
        rng.normal(size=(2, 3, 64)).astype("float32"),
        {"start_index": 4000},
    ),
    "encoding-positions": (
        "PositionalEncoding",
        {"position": 100, "d_model": 8, "layout": "concat"},
        rng.normal(size=(2, 4, 8)).astype("float32"),
        {"positions": np.array([[0, 9, 50, 99], [1, 2, 3, 4]])},
    ),
    "embedding": (
        "PositionalEmbedding",
        {"vocab_size": 50, "d_model": 16, "position": 32, "mask_zero": True},
        rng.integers(0, 50, size=(2, 12)).astype("int32"),
        {},
    ),
    "embedding-fairseq": (
        "PositionalEmbedding",
        {"vocab_size": 50, "d_model": 16, "position": 32, "convention": "fairseq", "padding_idx": 1},
        np.array([[5, 6, 7, 1], [1, 1, 9, 9]], "int32"),
        {},
    ),
    "rotary": (
        "RotaryEmbedding",
        {},
        rng.normal(size=(2, 10, 2, 8)).astype("float32"),
        {"start_index": 70000},
    ),
    "rotary-yarn-interleave": (
        "RotaryEmbedding",
        {"scaling_factor": 4.0, "rope_type": "yarn", "layout": "interleave"},
        rng.normal(size=(2, 6, 8)).astype("float32"),
        {"positions": np.array([0.0, 3.0, 5.0, 8.0, 13.0, 2.0**20])},
    ),
    "rotary-longrope-positions": (
        "RotaryEmbedding",
        {
            "rope_type": "longrope",
            "short_factor": [1.0, 1.5, 2.0, 3.0],
            "long_factor": [2.0, 4.0, 8.0, 16.0],
            "original_max_position_embeddings": 8,
            "max_position_embeddings": 32,
        },
        rng.normal(size=(2, 4, 2, 8)).astype("float32"),
        {"positions": np.array([[0, 3, 9, 20], [0, 1, 2, 3]])},  # past 8: the long factors
    ),
    "rotary-llama3-partial": (
        "RotaryEmbedding",
        {
            "rope_type": "llama3",
            "scaling_factor": 8.0,
            "original_max_position_embeddings": 64,
            "partial_rotary_factor": 0.5,
            "attention_factor": 1.5,
        },
        rng.normal(size=(2, 5, 16)).astype("float32"),
        {"start_index": 70000},
    ),
    "rotary-mrope-interleaved": (
        "RotaryEmbedding",
        {"mrope_section": [2, 1, 1], "mrope_interleaved": True},
        rng.normal(size=(2, 4, 2, 8)).astype("float32"),
        {"positions": np.array([[[0, 1, 1, 3]] * 2, [[0, 1, 2, 3]] * 2, [[0, 2, 1, 70000]] * 2])},
    ),
    "patch": (
        "PatchPositionalEncoding",
        {"grid_size": 4, "d_model": 16, "cls_token": True},
        rng.normal(size=(2, 17, 16)).astype("float32"),
        {},
    ),
    "patch-wide-grid": (
        "PatchPositionalEncoding",
        {"grid_size": None, "d_model": 16, "base_size": 16, "interpolation_scale": 2.0},
        rng.normal(size=(2, 3, 5, 16)).astype("float32"),
        {},
    ),
    "video": (
        "VideoPositionalEncoding",
        {"spatial_size": (5, 3), "temporal_size": 2, "d_model": 32, "spatial_interpolation_scale": 1.875},
        rng.normal(size=(2, 2, 3, 5, 32)).astype("float32"),
        {},
    ),
    "axial-rotary": (
        "AxialRotaryEmbedding",
        {"axes_dim": [4, 6, 6], "layout": "interleave"},
        rng.normal(size=(2, 6, 2, 16)).astype("float32"),
        {
            "positions": np.array([[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 1, 0], [0, 1, 1], [0, 1, 2]])
            + [0, 70000, 9]
        },
    ),
    "timestep": (
        "TimestepEmbedding",
        {"dim": 33, "flip_sin_to_cos": True},
        np.array([0, 1, 999, 2**30], "int32"),
        {},
    ),
    # Fractional and negative timesteps (SD3's `sigma * 1000`, EDM's `log(sigma) / 4`). Not a tiny
    # one: compiled, a fused multiply-add may move the last bit of an output below about 2**-10
    # (within the bound, as test_conventions checks under XLA).
    "timestep-floats": (
        "TimestepEmbedding",
        {"dim": 32, "flip_sin_to_cos": True, "downscale_freq_shift": 0},
        np.array([929.81793, 0.5, -1.553652, 999.0, -3.0], "float32"),
        {},
    ),
    "alibi": (
        "AlibiBias",
        {},
        rng.normal(size=(2, 6, 3, 5)).astype("float32"),
        {},
    ),
    "alibi-positions": (
        "AlibiBias",
        {"alibi_bias_max": 16, "num_heads": 6},
        rng.normal(size=(2, 6, 3, 5)).astype("float32"),
        {
            "query_positions": np.array([[2, 3, 4], [40, 41, 42]]),
            "key_positions": np.array([[0, 1, 2, 3, 4]] * 2),
        },
    ),
    "t5-bias": (
        "RelativePositionBias",
        {"num_heads": 6, "num_buckets": 16, "max_distance": 20, "bidirectional": False},
        rng.normal(size=(2, 6, 3, 5)).astype("float32"),
        {"query_positions": np.array([2, 30, 4]), "key_positions": np.array([0, 1, 2, 3, 4])},
    ),
    "window-bias": (
        "WindowPositionBias",
        {"window_size": (2, 3), "num_heads": 3, "num_prefix_tokens": 1},
        rng.normal(size=(4, 3, 7, 7)).astype("float32"),
        {},
    ),
    "continuous-bias": (
        "ContinuousPositionBias",
        {"window_size": 3, "num_heads": 2, "pretrained_window_size": (4, 4)},
        rng.normal(size=(4, 2, 9, 9)).astype("float32"),
        {},
    ),
    "learned-patch": (
        "LearnedPatchPositionEmbedding",
        {"grid_size": 4, "d_model": 3, "antialias": True},
        rng.normal(size=(2, 1 + 6 * 6, 3)).astype("float32"),
        {},
    ),
}


def helper_results():
    """The public functions besides the layers, each on fixed arguments, on the current backend."""
    import tf_posenc

    segments = np.array([[1, 1, 2, 2, 2, 0], [3, 3, 3, 3, 0, 0]], "int32")
    mask = np.array([[0, 0, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]], bool)
    table = np.linspace(-1, 1, (1 + 16) * 4, dtype="float32").reshape(1, 17, 4)
    return {
        "positions_from_mask": tf_posenc.positions_from_mask(mask),
        "positions_from_segment_ids": tf_posenc.positions_from_segment_ids(segments),
        "segment_attention_mask": tf_posenc.segment_attention_mask(segments, causal=True),
        "context_parallel_positions": tf_posenc.context_parallel_positions(16, 1, 4),
        "context_parallel_order": tf_posenc.context_parallel_order(16, 4),
        "mrope_positions": tf_posenc.mrope_positions([[0, 0, 1, 1, 1, 1, 0]], image_grid_thw=[[1, 4, 4]])[0],
        "interpolate_position_embeddings": tf_posenc.interpolate_position_embeddings(table, (6, 5)),
    }


def make_layer(family, name, policy="float32", weights=None):
    """Case `name`'s layer from `family` (a module of tf_posenc's layer classes), built for the
    case's inputs, with `weights` (a list, as `set_weights` takes) when given."""
    class_name, arguments, inputs, _ = CASES[name]
    layer = getattr(family, class_name)(**arguments, dtype=policy)
    layer.build(tuple(inputs.shape))
    if weights is not None:
        layer.set_weights(weights)
    return layer


def stored_weights(layer_weights):
    """Every case's weights as one flat dict of arrays (for `np.savez`): `name:index` keys."""
    return {
        f"{name}:{index}": weight
        for name, weights in layer_weights.items()
        for index, weight in enumerate(weights)
    }


def case_weights(stored, name):
    """Case `name`'s weights from `stored_weights`' dict (or its `np.load`), in order, or None."""
    keys = sorted(
        (key for key in stored if key.rsplit(":", 1)[0] == name), key=lambda key: int(key.rsplit(":", 1)[1])
    )
    return [stored[key] for key in keys] or None


# name: (class name, constructor arguments, inputs, call arguments, error, part of its message)
BAD_CALLS = {
    "too-long": (
        "PositionalEncoding",
        {"position": 8, "d_model": 4},
        np.zeros((1, 9, 4), "float32"),
        {},
        ValueError,
        "The sequence is longer than `position`",
    ),
    "wrong-width": (
        "PositionalEncoding",
        {"position": 8, "d_model": 4},
        np.zeros((1, 3, 5), "float32"),
        {},
        ValueError,
        "The last dimension of `inputs` must equal `d_model`",
    ),
    "integer-inputs": (
        "PositionalEncoding",
        {"position": 8, "d_model": 4},
        np.zeros((1, 3, 4), "int32"),
        {},
        TypeError,
        "`inputs` must be a floating-point tensor",
    ),
    "both-start-and-positions": (
        "PositionalEncoding",
        {"position": 8, "d_model": 4},
        np.zeros((1, 3, 4), "float32"),
        {"start_index": 1, "positions": np.arange(3)},
        ValueError,
        "Pass either `start_index` or `positions`, not both",
    ),
    "float-token-ids": (
        "PositionalEmbedding",
        {"vocab_size": 9, "d_model": 4, "position": 8},
        np.zeros((1, 3), "float32"),
        {},
        TypeError,
        "`inputs` must hold integer token ids",
    ),
    "odd-rotary-width": (
        "RotaryEmbedding",
        {},
        np.zeros((1, 3, 5), "float32"),
        {},
        ValueError,
        "must have a known, even size",
    ),
    "fractional-positions": (
        "RotaryEmbedding",
        {},
        np.zeros((1, 2, 4), "float32"),
        {"positions": np.array([0.5, 1.0])},
        "InvalidArgumentError",  # TensorFlow's, by name: this module imports no TensorFlow
        "must hold whole numbers",
    ),
    "patch-grid": (
        "PatchPositionalEncoding",
        {"grid_size": 4, "d_model": 16},
        np.zeros((1, 15, 16), "float32"),
        {},
        ValueError,
        "`inputs` must have shape (batch, 16, 16)",
    ),
}
