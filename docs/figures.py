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


def latent_split():
    """Where positions enter latent attention: each query head's last `qk_rope_head_dim`
    features and one shared key part rotate; the latent, which gives the rest, does not."""
    figure, axis = plt.subplots(figsize=(7.5, 3.2))
    rows = (
        # (label, y, [(start, width, text, rotated)])
        ("query head h", 3.0, [(0, 4, "q_nope (qk_nope_head_dim)", False), (4, 2, "q_rope", True)]),
        ("key head h", 2.0, [(0, 4, "k_nope = kv_b_proj(latent)", False), (4, 2, "k_rope (shared)", True)]),
        ("value head h", 1.0, [(0, 4, "v = kv_b_proj(latent)", False)]),
        ("cache, per token", 0.0, [(0, 4, "latent (kv_lora_rank)", False), (4, 2, "k_rope (rotated)", True)]),
    )
    for label, y, parts in rows:
        axis.text(-0.2, y + 0.35, label, ha="right", va="center")
        for start, width, text, rotated in parts:
            colour = "#f4a259" if rotated else "#8cb7d9"
            axis.add_patch(plt.Rectangle((start, y), width, 0.7, facecolor=colour, edgecolor="black"))
            axis.text(start + width / 2, y + 0.35, text, ha="center", va="center", fontsize=8)
    axis.set_xlim(-3.2, 6.2)
    axis.set_ylim(-0.3, 3.9)
    axis.axis("off")
    axis.set_title("Latent attention: orange rotates at the token's position, blue never does")
    figure.tight_layout()
    return figure


def main():
    FIGURES.mkdir(exist_ok=True)
    for name, figure in (
        ("heatmap.png", tf_posenc.plot_positional_encoding(50, 512)),
        ("similarity.png", tf_posenc.plot_similarity(50, 512)),
        ("rotation.png", tf_posenc.plot_pair_rotation(41, 64, pairs=(0, 8), shift=5)),
        ("latent.png", latent_split()),
    ):
        figure.savefig(FIGURES / name, dpi=90)
        plt.close(figure)
    print(f"figures written to {FIGURES}")


if __name__ == "__main__":
    main()
