"""Pictures of the encoding: the position x depth heatmap and similarity against distance.

matplotlib is the optional `plot` extra (`pip install "tf_posenc[plot]"`); it is imported
only when a plot is asked for.
"""

import numpy as np

from tf_posenc import _validation, encoding


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
    'Depth (embedding dimension)'
    >>> figure.savefig("pe.png")  # doctest: +SKIP
    """
    table = encoding.positional_encoding(
        position, d_model, max_wavelength=max_wavelength, layout=layout, convention=convention
    ).numpy()[0]
    figure, ax = _figure_and_axes(ax, figsize=(10, 6))
    mesh = ax.pcolormesh(table, cmap=cmap, vmin=-1, vmax=1)
    ax.set_xlabel("Depth (embedding dimension)")
    ax.set_ylabel("Position")
    ax.set_title(f"Sinusoidal positional encoding (position={position}, d_model={d_model})")
    figure.colorbar(mesh, ax=ax, label="PE(pos, i)")
    return figure


def plot_similarity(position, d_model, ax=None, max_wavelength=10000, reference_positions=(0,)):
    """Plots the dot product PE(p) . PE(q) against the distance q - p.

    For an even `d_model` the dot product is sum_k cos((q - p) * w_k): it depends on
    the distance only, not on where the pair sits, and it is largest at distance 0.
    The curve is drawn from that formula, and the markers are dot products of actual
    rows taken at each of `reference_positions`, so the plot shows both.

    Args:
        position: Integer. Positions 0 .. position - 1 are compared.
        d_model: Integer. Width of the encoding.
        ax: Optional matplotlib `Axes`; a new figure is made if `None`.
        max_wavelength: Number. Defaults to `10000`.
        reference_positions: Positions p whose row is compared with every row q.
            Defaults to `(0,)`.

    Returns:
        The matplotlib `Figure` holding the plot.

    Example:

    >>> figure = plot_similarity(128, 64, reference_positions=(0, 60))
    >>> [line.get_label() for line in figure.axes[0].lines][1:]
    ['PE(0) . PE(q)', 'PE(60) . PE(q)']
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
    distances = np.arange(-position + 1, position)
    paired = encoding.frequencies(d_model, max_wavelength)[: d_model // 2]
    predicted = np.cos(np.multiply.outer(distances, paired)).sum(axis=1)
    ax.plot(distances, predicted, color="black", linewidth=1, label="sum_k cos((q - p) w_k)")
    for reference in reference_positions:
        ax.plot(
            np.arange(position) - reference,
            rows @ rows[reference],
            ".",
            markersize=3,
            label=f"PE({reference}) . PE(q)",
        )
    ax.set_xlabel("Distance q - p")
    ax.set_ylabel("Dot product PE(p) . PE(q)")
    ax.set_title(f"Similarity of encodings against distance (d_model={d_model})")
    ax.legend()
    return figure


def plot_patch_encoding(grid_size, d_model, columns=None, cmap="RdBu"):
    """Draws columns of MAE's 2-D patch encoding (`sincos_2d`) on the patch grid.

    Each panel is one column of the table, its value at every patch laid out where the patch
    sits in the image: columns of the first half change along the image's columns, columns of
    the second half along its rows.

    Args:
        grid_size: Integer. Patches per side.
        d_model: Integer, a multiple of 4. Width of the table.
        columns: Columns to draw. Defaults to the first column of each quarter (the fastest
            sine and cosine of each axis).
        cmap: A matplotlib colormap name. Defaults to `"RdBu"`.

    Returns:
        The matplotlib `Figure` holding the panels.

    Example:

    >>> figure = plot_patch_encoding(14, 64)
    >>> [ax.get_title() for ax in figure.axes[:4]]
    ['column 0', 'column 16', 'column 32', 'column 48']
    """
    table = encoding.sincos_2d(d_model, grid_size)
    if columns is None:
        columns = [quarter * (d_model // 4) for quarter in range(4)]
    for column in columns:
        if not 0 <= column < d_model:
            raise ValueError(
                f"Every entry of `columns` must be in [0, d_model). Received: columns={list(columns)} "
                f"with d_model={d_model}"
            )
    figure, axes = _pyplot().subplots(
        1, len(columns), figsize=(3 * len(columns), 3.2), layout="constrained", squeeze=False
    )
    for ax, column in zip(axes[0], columns, strict=True):
        image = ax.imshow(table[:, column].reshape(grid_size, grid_size), cmap=cmap, vmin=-1, vmax=1)
        ax.set_title(f"column {column}")
        ax.set_xlabel("patch column")
        ax.set_ylabel("patch row")
    figure.colorbar(image, ax=list(axes[0]), shrink=0.8)
    return figure
