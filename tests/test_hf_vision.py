"""The vision towers of transformers 5.25 whose rope type is "axial", read from their config
classes' defaults by `AxialRotaryEmbedding.from_hf_config`: at the (h, w) ids of
`vision_position_ids` for an image and a video of 2 frames, their rows and a vector rotated by
each tower's own apply function, run in float64, as `tools/print_transformers.py vision` printed
them (transformers 5.25.0, torch 2.13.0: `transformers_vision_5_25.json`); or refused by the
mechanism they need."""

import json
import pathlib
import re

import keras
import numpy as np
import pytest
from fingerprints import fixed_vectors
from helpers import slow_unless

from tf_posenc import AxialRotaryEmbedding, _hf_vision, _hf_vision_defaults, vision_position_ids

PRINTED = json.loads((pathlib.Path(__file__).parent / "transformers_vision_5_25.json").read_text())
TYPES = PRINTED["types"]
# Measured: 1.9e-12 at most, at ids below 12 (angles below 12): float64's last bits.
BOUND = 1e-10
READ = [model_type for model_type in sorted(TYPES) if model_type in _hf_vision.MODEL_TYPES]
# Those called on `vision_position_ids` (SAM's are called on fixed grids: tested on their own).
ON_IDS = [model_type for model_type in READ if model_type not in _hf_vision.SAM_GRIDS]


# Without `slow`: Qwen2.5-VL's tower, and each variant (width first; interleaved; Pixtral's
# frequencies; Gemma 4's halves per band). Kimi-K2.5's 36 one-pair bands take 5 s: with `slow`.
QUICK = {
    "minimax_m3_vl_vision",
    "qwen2_5_vl_vision",
    "step3p5_vision",
    "inkling2_vision",
    "pixtral",
    "gemma4_vision",
}


@pytest.mark.parametrize("model_type", slow_unless(QUICK, ON_IDS))
def test_the_rotation_is_the_towers(model_type):
    entry = TYPES[model_type]
    rope = AxialRotaryEmbedding.from_hf_config({"model_type": model_type}, dtype="float64")
    merge = _hf_vision_defaults.DEFAULTS[model_type].get("spatial_merge_size") or 1
    temporal = len(rope.axes_dim) == 3  # MiniMax-M3's (t, h, w)
    for printed in entry["grids"]:
        width = printed["width"]
        assert sum(rope.axes_dim) == width
        ids = vision_position_ids(np.asarray([printed["grid_thw"]]), merge, include_temporal=temporal)
        vector, units = fixed_vectors(width)
        tokens = int(np.prod(printed["grid_thw"]))
        head = rope.head_dim or width  # MiniMax-M3's head is wider than its bands: the tail stays
        tail = np.arange(head - width, dtype="float64") + 0.5
        features = np.concatenate([np.broadcast_to(vector, (1, tokens, 1, width)),
                                   np.broadcast_to(tail, (1, tokens, 1, head - width))], axis=-1)  # fmt: skip
        turned = np.asarray(rope(features, positions=ids))[0, :, 0]
        np.testing.assert_array_equal(turned[:, width:], features[0, :, 0, width:])
        rotated = turned[:, :width]
        assert np.abs(rotated @ units.T - printed["dots"]).max() <= BOUND
        assert np.abs(rotated[-1] - printed["rotated"]).max() <= BOUND
        # The rows of the last token, pair by pair: transformers' `[f | f]` (or `f` repeated
        # per pair, Inkling 2's) against ours.
        cos, sin = (keras.ops.convert_to_numpy(rows)[0, -1] for rows in rope.rows(features, positions=ids))
        pairs = slice(0, width // 2) if rope.layout == "half" else slice(0, width, 2)
        for ours, theirs in ((cos, printed["cos"]), (sin, printed["sin"])):
            theirs = np.asarray(theirs)
            theirs = theirs[: width // 2] if rope.layout == "half" else theirs[0::2]
            assert np.abs(ours[pairs] - theirs).max() <= BOUND


def test_every_axial_tower_is_read_or_refused_by_name():
    read, refused = [], {}
    for model_type in TYPES:
        try:
            AxialRotaryEmbedding.from_hf_config({"model_type": model_type})
            read.append(model_type)
        except ValueError as error:
            refused[model_type] = str(error)
    assert sorted(read) == READ and len(read) == 37
    assert sorted(refused) == sorted(_hf_vision.MECHANISMS)
    for model_type, message in refused.items():
        assert _hf_vision.MECHANISMS[model_type] in message and "needs a mechanism" in message
    # A multimodal config reads its `vision_config`, given whole, with its keys, or without its
    # model type; each model type using one of these towers reads as it.
    for parent, tower in _hf_vision_defaults.PARENTS.items():
        if tower in _hf_vision.MECHANISMS:
            with pytest.raises(ValueError, match="needs a mechanism"):
                AxialRotaryEmbedding.from_hf_config({"model_type": parent})
            continue
        expected = AxialRotaryEmbedding.from_hf_config({"model_type": tower}, name="tower").get_config()
        for config in ({"model_type": parent}, {"model_type": parent, "vision_config": {}}):
            assert AxialRotaryEmbedding.from_hf_config(config, name="tower").get_config() == expected, parent
    qwen = {"model_type": "qwen2_5_vl", "vision_config": {"hidden_size": 1280, "num_heads": 16,
            "rope_parameters": {"rope_type": "axial", "rope_theta": 5000.0}}}  # fmt: skip
    rope = AxialRotaryEmbedding.from_hf_config(qwen)
    assert (rope.axes_dim, rope.max_wavelength, rope.layout) == ((40, 40), 5000.0, "half")
    step3 = AxialRotaryEmbedding.from_hf_config({"model_type": "step3p7"})
    assert step3.position_axes == [1, 0]
    # Qwen2-VL's tower: its own width, `embed_dim`, not the language model's `hidden_size`.
    assert AxialRotaryEmbedding.from_hf_config({"model_type": "qwen2_vl_vision"}).axes_dim == (40, 40)


def test_bad_vision_configs_are_clear_errors():
    with pytest.raises(ValueError, match=r"rope type is 'axial'.*Received: model_type='llama'"):
        AxialRotaryEmbedding.from_hf_config({"model_type": "llama"})
    with pytest.raises(ValueError, match=r"must have rope_type 'axial'.*Received: rope_type='default'"):
        AxialRotaryEmbedding.from_hf_config(
            {"model_type": "qwen3_vl_vision", "rope_parameters": {"rope_type": "default"}}
        )
    with pytest.raises(ValueError, match=r"multiple of 4.*Received: head size 70"):
        AxialRotaryEmbedding.from_hf_config({"model_type": "qwen3_vl_vision", "hidden_size": 1120})
    with pytest.raises(
        ValueError,
        match=r"per band of `axes_dim` \(2\), using every column from 0 on. Received: position_axes=\[1, 1\]",
    ):
        AxialRotaryEmbedding((8, 8), position_axes=[1, 1])


def test_position_axes_turn_each_band_by_its_column_and_round_trip():
    layer = AxialRotaryEmbedding((8, 8), layout="half", position_axes=[1, 0], dtype="float64")
    plain = AxialRotaryEmbedding((8, 8), layout="half", dtype="float64")
    x = np.random.default_rng(0).normal(size=(1, 6, 2, 16))
    ids = np.stack([np.arange(6), 10 + np.arange(6)], axis=-1)
    np.testing.assert_array_equal(
        np.asarray(layer(x, positions=ids)), np.asarray(plain(x, positions=ids[:, ::-1].copy()))
    )
    again = AxialRotaryEmbedding.from_config(json.loads(json.dumps(layer.get_config())))
    assert again.position_axes == [1, 0]
    np.testing.assert_array_equal(np.asarray(again(x, positions=ids)), np.asarray(layer(x, positions=ids)))


def test_the_vision_page_lists_the_towers_read_and_refused():
    text = (pathlib.Path(__file__).parent.parent / "docs" / "vision.md").read_text(encoding="utf-8")

    def block(name):
        return text[text.index(f"<!-- {name} -->") : text.index(f"<!-- /{name} -->")]

    assert set(re.findall(r"`([a-z0-9_.-]+)`", block("vision-towers-read"))) == set(_hf_vision.MODEL_TYPES)
    parents = {
        parent for parent, tower in _hf_vision_defaults.PARENTS.items() if tower in _hf_vision.MODEL_TYPES
    }
    assert set(re.findall(r"`([a-z0-9_.-]+)`", block("vision-towers-parents"))) == parents
    refused = dict(re.findall(r"^- `([a-z0-9_.-]+)`: (.*)\.$", block("vision-towers-refused"), flags=re.M))
    assert refused == _hf_vision.MECHANISMS


def test_half_per_axis_rotates_each_band_in_halves_of_its_own():
    layer = AxialRotaryEmbedding((8, 12), layout="half_per_axis", dtype="float64")
    x = np.random.default_rng(1).normal(size=(1, 6, 2, 20))
    ids = np.stack([np.arange(6), 10 + np.arange(6)], axis=-1)
    bands = [
        AxialRotaryEmbedding((width,), layout="half", dtype="float64")(
            part, positions=ids[:, column : column + 1]
        )
        for column, (width, part) in enumerate(((8, x[..., :8]), (12, x[..., 8:])))
    ]
    np.testing.assert_array_equal(np.asarray(layer(x, positions=ids)), np.concatenate(bands, axis=-1))
    cos, sin = (np.asarray(rows)[0] for rows in layer.rows(x, positions=ids))
    np.testing.assert_array_equal(cos[:, :4], cos[:, 4:8])  # halves of the first band
    np.testing.assert_array_equal(sin[:, 8:14], sin[:, 14:])
    again = AxialRotaryEmbedding.from_config(json.loads(json.dumps(layer.get_config())))
    assert again.layout == "half_per_axis"


@pytest.mark.parametrize("model_type", sorted(_hf_vision.SAM_GRIDS))
def test_sam_towers_rotate_as_their_modules_on_their_grids(model_type):
    # The printer called each SAM rotary module with `vision_position_ids` as its own (x, y)
    # columns: its first band turned by the printed first column, which the layer's
    # `position_axes=[1, 0]` takes from the second.
    entry = TYPES[model_type]
    rope = AxialRotaryEmbedding.from_hf_config({"model_type": model_type}, dtype="float64")
    width = sum(rope.axes_dim)
    for printed in entry["grids"]:
        ids = vision_position_ids(np.asarray([printed["grid_thw"]]), 1)
        features = np.ones((1, len(ids), 1, width))
        cos, sin = (
            keras.ops.convert_to_numpy(rows)[0, -1] for rows in rope.rows(features, positions=ids[:, ::-1])
        )
        np.testing.assert_allclose(cos, printed["cos"], rtol=0, atol=BOUND)
        np.testing.assert_allclose(sin, printed["sin"], rtol=0, atol=BOUND)
    # SAM 3's global layers: ids scaled by window_size / grid, restated as its rotary module
    # computes them (`precompute_positions`, then `inv_freq`), in float64.
    if model_type.startswith("sam3_vi"):
        defaults = _hf_vision_defaults.DEFAULTS[model_type]
        grid = defaults["image_size"] // defaults["patch_size"]
        scale = defaults["window_size"] / grid
        global_ = AxialRotaryEmbedding.from_hf_config(
            {"model_type": model_type}, position_scale=scale, dtype="float64"
        )
        ids = vision_position_ids([[1, grid, grid]], 1)
        cos, _ = (
            keras.ops.convert_to_numpy(rows)[0]
            for rows in global_.rows(np.ones((1, grid * grid, 1, width)), positions=ids)
        )
        inverse = 1.0 / 10000.0 ** (np.arange(0, width // 2, 2) / (width // 2))
        angles = np.concatenate([ids[:, 1:] * scale * inverse, ids[:, :1] * scale * inverse], axis=-1)
        np.testing.assert_allclose(cos, np.repeat(np.cos(angles), 2, axis=-1), rtol=0, atol=BOUND)
