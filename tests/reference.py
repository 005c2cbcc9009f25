"""An independent float64 NumPy reference, written straight from the paper's formula."""

import math

import numpy as np


def reference_table(positions, d_model, max_wavelength=10000, layout="interleave"):
    positions = np.asarray(positions, dtype=np.float64)
    table = np.zeros(positions.shape + (d_model,))
    for column in range(d_model):
        if layout == "interleave":
            pair, use_cosine = column // 2, column % 2 == 1
        else:
            pair, use_cosine = column % (d_model // 2), column >= d_model // 2
        angle = positions / math.pow(max_wavelength, 2 * pair / d_model)
        table[..., column] = np.cos(angle) if use_cosine else np.sin(angle)
    return table
