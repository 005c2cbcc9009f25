"""Draws the documentation's figures into docs/figures/ (not committed: the test command runs this
before `mkdocs build`). Run from anywhere: `python docs/figures.py`."""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

import tf_posenc

FIGURES = pathlib.Path(__file__).resolve().parent / "figures"


def main():
    FIGURES.mkdir(exist_ok=True)
    for name, figure in (
        ("heatmap.png", tf_posenc.plot_positional_encoding(50, 512)),
        ("similarity.png", tf_posenc.plot_similarity(50, 512)),
        ("rotation.png", tf_posenc.plot_pair_rotation(41, 64, pairs=(0, 8), shift=5)),
    ):
        figure.savefig(FIGURES / name, dpi=90)
        plt.close(figure)
    print(f"figures written to {FIGURES}")


if __name__ == "__main__":
    main()
