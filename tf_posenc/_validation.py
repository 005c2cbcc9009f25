"""Argument checks shared by the functions and layers, with Keras-style messages."""

import numbers

LAYOUTS = ("interleave", "concat")

# Integer positions are converted to float64 before they are scaled; above 2**53
# that conversion is no longer exact.
MAX_POSITION = 2**53


def _received(name, value):
    return f"Received: {name}={value!r} (of type {type(value).__name__})"


def positive_int(name, value, maximum=None):
    """Returns `value` as an `int`, or raises a `ValueError` that names `name`."""
    is_int = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not is_int or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer. {_received(name, value)}")
    if maximum is not None and value > maximum:
        raise ValueError(f"`{name}` must be at most {maximum}. {_received(name, value)}")
    return int(value)


def non_negative_int(name, value):
    is_int = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not is_int or value < 0:
        raise ValueError(f"`{name}` must be a non-negative integer. {_received(name, value)}")
    return int(value)


def wavelength(name, value):
    is_real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not is_real or not value > 1:
        raise ValueError(f"`{name}` must be a number greater than 1. {_received(name, value)}")
    return value


def input_shape(shape, rank, axes):
    """Returns `shape` as a tuple, or raises if it does not have `rank` dimensions named `axes`."""
    shape = tuple(shape)
    if len(shape) != rank:
        raise ValueError(f"`inputs` must have rank {rank}, {axes}. Received: inputs.shape={shape}")
    return shape


def layout(name, value, d_model):
    if value not in LAYOUTS:
        raise ValueError(f"`{name}` must be one of {LAYOUTS}. {_received(name, value)}")
    if value == "concat" and d_model % 2:
        raise ValueError(
            f"`{name}='concat'` needs an even `d_model`, so that the sine and cosine halves "
            f"have the same width. Received: d_model={d_model}"
        )
    return value
