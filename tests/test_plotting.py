import os
import sys

import matplotlib
import numpy as np
import pytest

from tf_posenc import (
    plot_axial_angles,
    plot_pair_rotation,
    plot_patch_encoding,
    plot_positional_encoding,
    plot_similarity,
    plot_video_encoding,
)
from tf_posenc.cli import main

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_heatmap_returns_figure_with_labelled_axes_and_colorbar():
    figure = plot_positional_encoding(50, 512)
    heatmap, colorbar = figure.axes
    assert heatmap.get_xlabel() == "Depth: column c of the encoding"
    assert heatmap.get_ylabel() == "Position pos"
    assert colorbar.get_ylabel() == "PE(pos, c)"
    mesh = heatmap.collections[0]
    values = np.asarray(mesh.get_array()).reshape(50, 512)
    np.testing.assert_allclose(values[1, :2], [np.sin(1), np.cos(1)], atol=1e-7)


def test_heatmap_draws_on_given_axes():
    figure, ax = plt.subplots()
    assert plot_positional_encoding(10, 8, ax=ax, layout="concat") is figure
    values = np.asarray(ax.collections[0].get_array()).reshape(10, 8)
    np.testing.assert_allclose(values[3, [0, 4]], [np.sin(3), np.cos(3)], atol=1e-7)


def test_similarity_depends_on_distance_only():
    figure = plot_similarity(64, 16, reference_positions=(0, 20))
    ax = figure.axes[0]
    curve, from_zero, from_twenty = ax.get_lines()
    assert ax.get_xlabel() == "Shift k (positions)"
    formula = dict(zip(curve.get_xdata(), curve.get_ydata(), strict=True))
    for markers in (from_zero, from_twenty):
        for distance, value in zip(markers.get_xdata(), markers.get_ydata(), strict=True):
            assert value == pytest.approx(formula[distance], abs=1e-9)
    assert max(formula, key=formula.get) == 0


def test_similarity_rejects_reference_outside_range():
    with pytest.raises(ValueError, match=r"`reference_positions` must be in \[0, position\)"):
        plot_similarity(10, 8, reference_positions=(10,))


def test_pairs_go_round_the_unit_circle_and_a_shift_turns_each_by_one_angle():
    figure = plot_pair_rotation(40, 64, pairs=(0, 8), shift=5)
    for ax, rate in zip(figure.axes[:2], (1.0, 0.1), strict=True):
        points = ax.collections[0].get_offsets()
        angles = np.arctan2(points[:, 1], points[:, 0])
        np.testing.assert_allclose(np.hypot(points[:, 0], points[:, 1]), 1.0, atol=1e-12)
        turns = np.angle(np.exp(1j * (np.diff(angles) - rate)))
        np.testing.assert_allclose(turns, 0.0, atol=1e-12)  # the same turn from each position to the next
        arrows = [text for text in ax.texts if text.arrow_patch is not None]
        assert len(arrows) == 3
        for start, arrow in enumerate(arrows):
            end_angle = np.arctan2(arrow.xy[1], arrow.xy[0]) - angles[start]
            assert np.angle(np.exp(1j * (end_angle - 5 * rate))) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param({"d_model": 7}, "`d_model` must be even", id="odd-width"),
        pytest.param(
            {"pairs": (32,)}, r"`pairs` must be an integer in \[0, d_model // 2\)", id="pair-past-the-width"
        ),
        pytest.param({"shift": 0}, "`shift` must be a positive integer", id="zero-shift"),
    ],
)
def test_pair_rotation_refuses_bad_arguments(arguments, message):
    with pytest.raises(ValueError, match=message):
        plot_pair_rotation(**{"position": 10, "d_model": 64, **arguments})


def test_plot_command_writes_png(tmp_path):
    out = tmp_path / "pe.png"
    assert main(["plot", "--position", "50", "--d-model", "512", "--out", str(out)]) == 0
    with open(out, "rb") as image:
        assert image.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(out) > 10_000


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--position", "0"], "argument --position: expected a positive integer, received '0'"),
        (["--d-model", "abc"], "argument --d-model: expected a positive integer, received 'abc'"),
        (["--max-wavelength", "1"], "argument --max-wavelength: expected a number greater than 1"),
        (["--layout", "halves"], "argument --layout: invalid choice: 'halves'"),
    ],
    ids=["position", "d-model", "wavelength", "layout"],
)
def test_plot_command_rejects_bad_values_in_one_line(arguments, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", *arguments, "--out", str(tmp_path / "x.png")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error.strip().splitlines()[-1]
    assert "Traceback" not in error
    assert not (tmp_path / "x.png").exists()


def test_plot_command_reports_unusable_values_without_traceback(tmp_path, capsys):
    assert main(["plot", "--d-model", "7", "--layout", "concat", "--out", str(tmp_path / "x.png")]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: `layout='concat'` needs an even `d_model`")
    assert len(error.splitlines()) == 1


def test_plot_command_help_explains_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["plot", "--help"])
    text = capsys.readouterr().out
    for option in (
        "--position",
        "--d-model",
        "--layout",
        "--max-wavelength",
        "--dpi",
        "--out",
        "--convention",
        "--grid",
    ):
        assert option in text


def test_missing_matplotlib_gives_a_clear_error(tmp_path, capsys, monkeypatch):
    # As if matplotlib were not installed: importing it raises ImportError.
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r'pip install "tf_posenc\[plot\]"'):
        plot_positional_encoding(10, 8)
    assert main(["plot", "--out", str(tmp_path / "x.png")]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: Plotting needs matplotlib")
    assert not (tmp_path / "x.png").exists()


def test_heatmap_of_another_convention():
    figure = plot_positional_encoding(10, 8, convention="fairseq")
    values = np.asarray(figure.axes[0].collections[0].get_array()).reshape(10, 8)
    rates = np.exp(-np.arange(4) * np.log(10000) / 3)
    np.testing.assert_allclose(values[3], np.concatenate([np.sin(3 * rates), np.cos(3 * rates)]), atol=1e-7)


def test_patch_encoding_panels_lay_columns_on_the_grid():
    figure = plot_patch_encoding(4, 16, columns=[0, 8])
    first, second = (np.asarray(ax.images[0].get_array()) for ax in figure.axes[:2])
    # Column 0 is sin(patch column), the same down every row; column 8 is sin(patch row).
    np.testing.assert_allclose(first, np.broadcast_to(np.sin(np.arange(4)), (4, 4)), atol=1e-12)
    np.testing.assert_allclose(second, np.broadcast_to(np.sin(np.arange(4))[:, None], (4, 4)), atol=1e-12)
    with pytest.raises(ValueError, match=r"Every entry of `columns` must be in \[0, d_model\)"):
        plot_patch_encoding(4, 16, columns=[16])


def test_plot_command_draws_a_patch_grid_and_other_conventions(tmp_path):
    grid = tmp_path / "grid.png"
    assert main(["plot", "--grid", "14", "--d-model", "64", "--out", str(grid)]) == 0
    table = tmp_path / "t2t.png"
    assert main(["plot", "--convention", "tensor2tensor", "--d-model", "9", "--out", str(table)]) == 0
    assert grid.read_bytes()[:8] == table.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_grid_plots_lay_values_where_the_patches_sit():
    wide = plot_patch_encoding((3, 5), 16, columns=[0], base_size=5)
    # diffusers' positions on a 3 x 5 grid with base_size 5: columns 0..4, rows 0, 5/3, 10/3.
    np.testing.assert_allclose(
        np.asarray(wide.axes[0].images[0].get_array()),
        np.broadcast_to(np.sin(np.arange(5)), (3, 5)),
        atol=1e-12,
    )
    video = plot_video_encoding((5, 3), 4, 32, columns=[0, 8])
    first_frames = [np.asarray(ax.images[0].get_array()) for ax in video.axes[:4]]
    # Column 0 is sin(frame): constant over each frame, one value per frame.
    np.testing.assert_allclose([frame.mean() for frame in first_frames], np.sin(np.arange(4)), atol=1e-12)
    assert all(frame.shape == (3, 5) and np.ptp(frame) < 1e-12 for frame in first_frames)
    axial = plot_axial_angles((8, 8), (3, 4), pairs=[0, 4])
    rows, columns = (np.asarray(ax.images[0].get_array()) for ax in axial.axes[:2])
    np.testing.assert_allclose(rows, np.broadcast_to(np.arange(3)[:, None] * 1.0, (3, 4)), atol=1e-12)
    np.testing.assert_allclose(columns, np.broadcast_to(np.arange(4) * 1.0, (3, 4)), atol=1e-12)
    with pytest.raises(ValueError, match=r"`axes_dim` must have one band per axis of `grid`"):
        plot_axial_angles((8, 8, 8), (3, 4))
    with pytest.raises(ValueError, match=r"`axes_dim` must hold even widths"):
        plot_axial_angles((7, 8), (3, 4))


def test_plot_command_draws_video_and_axial_grids(tmp_path):
    video, axial = tmp_path / "video.png", tmp_path / "axial.png"
    assert main(["plot", "--grid", "4x6", "--frames", "3", "--d-model", "32", "--out", str(video)]) == 0
    assert main(["plot", "--grid", "8x8", "--axial", "16,16", "--out", str(axial)]) == 0
    assert video.read_bytes()[:8] == axial.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["plot", "--axial", "16,16", "--out", str(axial)]) == 1  # needs --grid
