"""Pictures of the encoding: the position x depth heatmap, similarity against distance, pairs of
columns going round the unit circle, and the grids' tables.

matplotlib is the optional `plot` extra (`pip install "tf_posenc[plot]"`); it is imported
only when a plot is asked for.
"""

import numpy as np

from tf_posenc import _columns, _validation, encoding
from tf_posenc.layers.axial_rotary_embedding import AxialRotaryEmbedding


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as missing:
        raise ImportError(
            "Plotting needs matplotlib, which is the optional `plot` extra of tf_posenc. "
            'Install it with: pip install "tf_posenc[plot]"'
        ) from missing
    return plt


def _figure_and_axes(ax, figsize):
    if ax is not None:
        return ax.figure, ax
    figure, ax = _pyplot().subplots(figsize=figsize, layout="constrained")
    return figure, ax


def plot_positional_encoding(
    position, d_model, ax=None, max_wavelength=10000, layout=None, cmap="RdBu", convention="paper"
):
    """Draws the `(position, d_model)` encoding table as a heatmap.

    Rows are positions and columns are depths (embedding dimensions): columns on
    the left oscillate fast from one position to the next, columns on the right
    barely move.

    Args:
        position: Integer. Number of positions (rows) to draw.
        d_model: Integer. Width of the encoding (columns).
        ax: Optional matplotlib `Axes` to draw on; a new figure is made if `None`.
        max_wavelength: Number. The base of the wavelengths. Defaults to `10000`.
        layout: `"interleave"` or `"concat"`. Defaults to the convention's own.
        cmap: A matplotlib colormap name. Defaults to `"RdBu"`.
        convention: Whose table, as for `positional_encoding`. Defaults to `"paper"`.

    Returns:
        The matplotlib `Figure` holding the plot.

    Example:

        >>> figure = plot_positional_encoding(50, 512)
        >>> figure.axes[0].get_xlabel()
        'Depth: column c of the encoding'
        >>> figure.savefig("pe.png")  # doctest: +SKIP
    """
    table = encoding.positional_encoding(
        position, d_model, max_wavelength=max_wavelength, layout=layout, convention=convention
    ).numpy()[0]
    figure, ax = _figure_and_axes(ax, figsize=(10, 6))
    mesh = ax.pcolormesh(table, cmap=cmap, vmin=-1, vmax=1)
    ax.set_xlabel("Depth: column c of the encoding")
    ax.set_ylabel("Position pos")
    ax.set_title(f"Sinusoidal positional encoding (position={position}, d_model={d_model})")
    figure.colorbar(mesh, ax=ax, label="PE(pos, c)")
    return figure


def plot_similarity(position, d_model, ax=None, max_wavelength=10000, reference_positions=(0,)):
    """Plots the dot product PE(p) . PE(p + k) against the shift k.

    For an even `d_model` the dot product is sum_j cos(k * omega_j), over the pairs j: it
    depends on the shift only, not on where the pair of rows sits, and it is largest at k = 0.
    The curve is drawn from that formula, and the markers are dot products of actual
    rows taken at each of `reference_positions`, so the plot shows both.

    Args:
        position: Integer. Positions 0 .. position - 1 are compared.
        d_model: Integer. Width of the encoding.
        ax: Optional matplotlib `Axes`; a new figure is made if `None`.
        max_wavelength: Number. Defaults to `10000`.
        reference_positions: Positions p whose row is compared with every row p + k.
            Defaults to `(0,)`.

    Returns:
        The matplotlib `Figure` holding the plot.

    Example:

        >>> figure = plot_similarity(128, 64, reference_positions=(0, 60))
        >>> [line.get_label() for line in figure.axes[0].lines][1:]
        ['PE(0) . PE(0 + k)', 'PE(60) . PE(60 + k)']
    """
    position = _validation.positive_int("position", position)
    d_model = _validation.positive_int("d_model", d_model)
    for reference in reference_positions:
        if not 0 <= reference < position:
            raise ValueError(
                "Every entry of `reference_positions` must be in [0, position). "
                f"Received: reference_positions={tuple(reference_positions)!r} with "
                f"position={position}"
            )
    rows = encoding.sinusoids(np.arange(position), d_model, max_wavelength)
    figure, ax = _figure_and_axes(ax, figsize=(8, 4.5))
    shifts = np.arange(-position + 1, position)
    paired = _columns.frequencies(d_model, max_wavelength)[: d_model // 2]
    predicted = np.cos(np.multiply.outer(shifts, paired)).sum(axis=1)
    ax.plot(shifts, predicted, color="black", linewidth=1, label=r"$\sum_j \cos(k\,\omega_j)$")
    for reference in reference_positions:
        ax.plot(
            np.arange(position) - reference,
            rows @ rows[reference],
            ".",
            markersize=3,
            label=f"PE({reference}) . PE({reference} + k)",
        )
    ax.set_xlabel("Shift k (positions)")
    ax.set_ylabel("Dot product PE(p) . PE(p + k)")
    ax.set_title(f"Similarity of encodings against their shift (d_model={d_model})")
    ax.legend()
    return figure


def plot_pair_rotation(position, d_model, pairs=None, max_wavelength=10000, shift=None):
    """Draws pairs of columns `(PE(pos, 2j), PE(pos, 2j + 1))` going round the unit circle.

    Pair `j` of the paper's encoding is `(sin(pos * w_j), cos(pos * w_j))`: a point on the unit
    circle at angle `pos * w_j`, which turns by `w_j` from each position to the next. A fast
    pair goes round many times over the positions, a slow one barely moves. Moving every point
    by `shift` positions turns it by the same angle `shift * w_j` wherever it is (the paper's
    `T(k)`), and that angle is what RoPE turns a query's or a key's pair by at position `shift`.

    Args:
        position: Integer. Positions 0 .. position - 1 are drawn, coloured by position.
        d_model: Integer. Width of the encoding; an even number.
        pairs: Optional sequence of pair indices `j < d_model // 2`, one panel each. Defaults to
            the fastest pair and one a quarter of the way down (`(0, d_model // 8)`).
        max_wavelength: Number. The base of the wavelengths. Defaults to `10000`.
        shift: Optional positive integer `k`: an arrow from each of positions 0, 1, 2 to the same
            position plus `k`, the same turn for all three. Defaults to `None` (no arrows).

    Returns:
        The matplotlib `Figure` holding one panel per pair.

    Example:

        >>> figure = plot_pair_rotation(40, 64, pairs=(0, 8), shift=3)
        >>> [ax.get_title() for ax in figure.axes[:2]]
        ['pair 0: w = 1 rad per position', 'pair 8: w = 0.1 rad per position']
    """
    position = _validation.positive_int("position", position)
    d_model = _validation.positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(
            "`d_model` must be even: its columns are drawn in pairs. "
            + _validation.received("d_model", d_model)
        )
    pairs = tuple(pairs) if pairs is not None else (0, d_model // 8)
    for pair in pairs:
        if not (isinstance(pair, (int, np.integer)) and 0 <= pair < d_model // 2):
            raise ValueError(
                f"Every entry of `pairs` must be an integer in [0, d_model // 2). Received: pairs={pairs!r} "
                f"with d_model={d_model}"
            )
    if shift is not None:
        shift = _validation.positive_int("shift", shift)
    rows = encoding.sinusoids(np.arange(position), d_model, max_wavelength, layout="interleave")
    rates = _columns.frequencies(d_model, max_wavelength)
    plt = _pyplot()
    figure, axes = plt.subplots(
        1, len(pairs), figsize=(4.2 * len(pairs), 4.2), layout="constrained", squeeze=False
    )
    circle = np.linspace(0, 2 * np.pi, 256)
    for ax, pair in zip(axes[0], pairs, strict=True):
        sines, cosines = rows[:, 2 * pair], rows[:, 2 * pair + 1]
        ax.plot(np.cos(circle), np.sin(circle), color="0.85", linewidth=1)
        points = ax.scatter(cosines, sines, c=np.arange(position), cmap="viridis", s=16, zorder=2)
        for start in range(min(3, position)):
            ax.annotate(str(start), (cosines[start], sines[start]), textcoords="offset points", xytext=(5, 3))
            if shift is not None:
                end = np.array([np.cos((start + shift) * rates[pair]), np.sin((start + shift) * rates[pair])])
                ax.annotate(
                    "",
                    end,
                    (cosines[start], sines[start]),
                    arrowprops={"arrowstyle": "->", "color": "tab:red"},
                )
        ax.set_title(f"pair {pair}: w = {rates[pair]:.3g} rad per position")
        ax.set_aspect("equal")
        ax.set_xlim(-1.3, 1.3)
        ax.set_ylim(-1.3, 1.3)
        ax.set_xlabel(f"PE(pos, {2 * pair + 1}) = cos(pos w)")
        ax.set_ylabel(f"PE(pos, {2 * pair}) = sin(pos w)")
    figure.colorbar(points, ax=axes[0].tolist(), label="position pos", shrink=0.8)
    return figure


def _grid_panels(panels, titles, shape, cmap, vmin, vmax, label):
    """Rows of images on a patch grid: `panels[r][c]` drawn with `titles[r][c]`."""
    rows, columns = len(panels), len(panels[0])
    figure, axes = _pyplot().subplots(
        rows, columns, figsize=(3 * columns, 3.2 * rows), layout="constrained", squeeze=False
    )
    for row in range(rows):
        for column in range(columns):
            ax = axes[row][column]
            image = ax.imshow(panels[row][column].reshape(shape), cmap=cmap, vmin=vmin, vmax=vmax)
            ax.set_title(titles[row][column])
            ax.set_xlabel("patch column")
            ax.set_ylabel("patch row")
    figure.colorbar(image, ax=list(axes.ravel()), shrink=0.8, label=label)
    return figure


def _checked_columns(columns, width):
    for column in columns:
        if not 0 <= column < width:
            raise ValueError(
                f"Every entry of `columns` must be in [0, d_model). Received: columns={list(columns)} "
                f"with d_model={width}"
            )


def plot_patch_encoding(
    grid_size, d_model, columns=None, cmap="RdBu", *, base_size=None, interpolation_scale=1.0
):
    """Draws columns of the 2-D patch encoding (`sincos_2d`) on the patch grid.

    Each panel is one column of the table, its value at every patch laid out where the patch
    sits in the image: columns of the first half change along the image's columns, columns of
    the second half along its rows.

    Args:
        grid_size: Integer (a square grid) or `(height, width)`.
        d_model: Integer, a multiple of 4. Width of the table.
        columns: Columns to draw. Defaults to the first column of each quarter (the fastest
            sine and cosine of each axis).
        cmap: A matplotlib colormap name. Defaults to `"RdBu"`.
        base_size: Optional number, diffusers' `base_size` (see `sincos_2d`).
        interpolation_scale: Positive number dividing the positions. Defaults to `1.0`.

    Returns:
        The matplotlib `Figure` holding the panels.

    Example:

        >>> figure = plot_patch_encoding(14, 64)
        >>> [ax.get_title() for ax in figure.axes[:4]]
        ['column 0', 'column 16', 'column 32', 'column 48']
    """
    table = encoding.sincos_2d(
        d_model, grid_size, base_size=base_size, interpolation_scale=interpolation_scale
    )
    columns = [quarter * (d_model // 4) for quarter in range(4)] if columns is None else list(columns)
    _checked_columns(columns, d_model)
    shape = _validation.grid_shape("grid_size", grid_size, 2)
    return _grid_panels(
        [[table[:, column] for column in columns]],
        [[f"column {c}" for c in columns]],
        shape,
        cmap,
        -1,
        1,
        "value",
    )


def plot_video_encoding(spatial_size, temporal_size, d_model, columns=None, frames=None, cmap="RdBu"):
    """Draws columns of the 3-D video encoding (`sincos_3d`) on the patch grid, frame by frame.

    One row of panels per column, one panel per frame: the frame quarter of the width is
    constant over each frame and changes from frame to frame; the column and row bands change
    across the frame and repeat in every frame.

    Args:
        spatial_size: Integer or `(width, height)` (diffusers' order, as in `sincos_3d`).
        temporal_size: Integer. Frames.
        d_model: Integer, a multiple of 16.
        columns: Columns to draw. Defaults to the fastest sine of the frame, column and row
            bands: `0`, `d_model // 4` and `5 * d_model // 8`.
        frames: Frames to draw. Defaults to the first four.
        cmap: A matplotlib colormap name. Defaults to `"RdBu"`.

    Returns:
        The matplotlib `Figure` holding the panels.

    Example:

        >>> figure = plot_video_encoding((6, 4), 3, 32)
        >>> [ax.get_title() for ax in figure.axes[:3]]
        ['column 0, frame 0', 'column 0, frame 1', 'column 0, frame 2']
    """
    table = encoding.sincos_3d(d_model, spatial_size, temporal_size)
    columns = [0, d_model // 4, 5 * d_model // 8] if columns is None else list(columns)
    _checked_columns(columns, d_model)
    frames = list(range(min(temporal_size, 4))) if frames is None else list(frames)
    width, height = _validation.grid_shape("spatial_size", spatial_size, 2)
    panels = [[table[frame, :, column] for frame in frames] for column in columns]
    titles = [[f"column {column}, frame {frame}" for frame in frames] for column in columns]
    return _grid_panels(panels, titles, (height, width), cmap, -1, 1, "value")


def plot_axial_angles(axes_dim, grid, pairs=None, max_wavelength=10000, cmap="twilight"):
    """Draws the rotation angles of `AxialRotaryEmbedding` over a grid of patches.

    Each panel is one feature pair: the angle (mod 2 pi) it turns by at every patch. A pair
    of an axis's band changes along that axis only, fastest for the band's first pair.

    Args:
        axes_dim: The layer's `axes_dim`, one band per axis of `grid`.
        grid: `(height, width)`, or FLUX's `(1, height, width)`, as for `grid_positions`.
        pairs: Pairs to draw. Defaults to the first two pairs of each band.
        max_wavelength: Number. Defaults to `10000`.
        cmap: A cyclic matplotlib colormap name. Defaults to `"twilight"`.

    Returns:
        The matplotlib `Figure` holding the panels.

    Example:

        >>> figure = plot_axial_angles((16, 16), (8, 8))
        >>> [ax.get_title() for ax in figure.axes[:4]]
        ['pair 0 (axis 0)', 'pair 1 (axis 0)', 'pair 8 (axis 1)', 'pair 9 (axis 1)']
    """
    if len(grid) == 3 and grid[0] != 1 or len(grid) not in (2, 3):
        raise ValueError(f"`grid` must be (height, width) or (1, height, width). Received: grid={list(grid)}")
    if len(axes_dim) != len(grid):
        raise ValueError(
            f"`axes_dim` must have one band per axis of `grid`. Received: axes_dim={list(axes_dim)}, "
            f"grid={list(grid)}"
        )
    ids = encoding.grid_positions(grid)
    # The layer's own frequencies (and its checks of `axes_dim`), not a second statement of them.
    frequencies = AxialRotaryEmbedding(tuple(axes_dim), max_wavelength).frequencies()
    bands = np.repeat(np.arange(len(axes_dim)), [width // 2 for width in axes_dim])
    starts = np.cumsum([0, *[width // 2 for width in axes_dim]])[:-1]
    pairs = [start + offset for start in starts for offset in (0, 1)] if pairs is None else list(pairs)
    for pair in pairs:
        if not 0 <= pair < len(frequencies):
            raise ValueError(
                f"Every entry of `pairs` must be in [0, {len(frequencies)}). Received: pairs={pairs}"
            )
    angles = [np.mod(ids[:, bands[pair]] * frequencies[pair], 2 * np.pi) for pair in pairs]
    titles = [f"pair {pair} (axis {bands[pair]})" for pair in pairs]
    return _grid_panels([angles], [titles], tuple(grid[-2:]), cmap, 0, 2 * np.pi, "angle (rad)")
