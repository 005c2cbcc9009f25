"""Argument checks shared by the functions and layers, with Keras-style messages."""

import math
import numbers

import keras

from tf_posenc import _tensorflow

LAYOUTS = ("interleave", "concat")
# Whose frequencies and column order a sinusoid table follows (see `_columns.columns`).
CONVENTIONS = ("paper", "tensor2tensor", "tensor2tensor_documented", "fairseq")

# Positions travel through the graphs as int32.
MAX_POSITION = 2**31 - 1


def received(name, value):
    return f"Received: {name}={value!r} (of type {type(value).__name__})"


def positive_int(name, value, maximum=None):
    """Returns `value` as an `int`, or raises a `ValueError` that names `name`."""
    is_int = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not is_int or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer. {received(name, value)}")
    if maximum is not None and value > maximum:
        raise ValueError(f"`{name}` must be at most {maximum}. {received(name, value)}")
    return int(value)


def non_negative_int(name, value):
    is_int = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not is_int or value < 0:
        raise ValueError(f"`{name}` must be a non-negative integer. {received(name, value)}")
    return int(value)


def wavelength(name, value):
    """Returns `value` as a Python int or float (so configs stay JSON), or raises."""
    is_real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not is_real or not math.isfinite(value) or not value > 1:
        raise ValueError(f"`{name}` must be a finite number greater than 1. {received(name, value)}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def floating_dtype(name, value):
    """Returns the name of a floating-point dtype, or raises naming `name`."""
    try:
        dtype = keras.backend.standardize_dtype(value)
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or not keras.backend.is_float_dtype(dtype):
        raise ValueError(f"`{name}` must be a floating-point dtype. {received(name, value)}")
    return dtype


def input_shape(shape, rank, axes):
    """Returns `shape` as a tuple, or raises if it does not have `rank` dimensions named `axes`."""
    shape = tuple(shape)
    if len(shape) != rank:
        raise ValueError(f"`inputs` must have rank {rank}, {axes}. Received: inputs.shape={shape}")
    return shape


def layout(name, value, d_model):
    if value not in LAYOUTS:
        raise ValueError(f"`{name}` must be one of {LAYOUTS}. {received(name, value)}")
    if value == "concat" and d_model % 2:
        raise ValueError(
            f"`{name}='concat'` needs an even `d_model`, so that the sine and cosine halves "
            f"have the same width. Received: d_model={d_model}"
        )
    return value


def integer(name, value):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ValueError(f"`{name}` must be an integer. {received(name, value)}")
    return int(value)


def number_at_least(name, value, minimum, strict=False):
    """Returns `value` as a Python float, or raises unless it is a finite number >= `minimum`."""
    is_real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not is_real or not math.isfinite(value) or value < minimum or (strict and value == minimum):
        relation = "greater than" if strict else "at least"
        raise ValueError(f"`{name}` must be a finite number {relation} {minimum}. {received(name, value)}")
    return float(value)


def one_of(name, value, choices):
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}. {received(name, value)}")
    return value


def dense_inputs(inputs):
    """Raises a `TypeError` for ragged and sparse inputs, which the layers do not take."""
    tensorflow = _tensorflow.loaded()  # (without TensorFlow loaded, no input is one of its tensors)
    if tensorflow is not None and isinstance(inputs, (tensorflow.RaggedTensor, tensorflow.SparseTensor)):
        raise TypeError(
            "`inputs` must be a dense tensor: ragged and sparse tensors are not accepted. Pad the "
            "sequences (for example `inputs.to_tensor()`) and pass the padding as a mask or as "
            f"`positions`. Received: inputs of type {type(inputs).__name__}"
        )


def floating_inputs(dtype, what):
    """Raises a `TypeError` unless `dtype` (a dtype or its name) is floating-point."""
    name = keras.backend.standardize_dtype(dtype)
    if "float" not in name:
        raise TypeError(f"`inputs` must be a floating-point tensor ({what}). Received: inputs.dtype={name}")


def supported_backend(layer_name, family):
    """Raises a `RuntimeError` unless Keras 3 runs on TensorFlow (or, for Keras 3 layers, JAX or
    PyTorch).

    tf_keras layers compute with `keras.ops` on TensorFlow tensors, so Keras 3's backend must
    be TensorFlow for them too.
    """
    backend = keras.backend.backend()
    supported = ("tensorflow", "jax", "torch") if family.__name__ == "keras" else ("tensorflow",)
    if backend not in supported:
        raise RuntimeError(
            f"`{layer_name}` runs on the Keras backend{'s' * (len(supported) > 1)} "
            f"{', '.join(supported)}; set "
            f"KERAS_BACKEND to one of them. Received: keras.backend.backend()={backend!r}"
        )


def same_keras_family(inputs, layer_name, family):
    """Raises a `TypeError` when `inputs` is a symbolic tensor of the other Keras family.

    `family` is the module the layer belongs to: `keras` (Keras 3) or `tf_keras` (Keras 2).
    """
    legacy_tensor = type(inputs).__module__.startswith("tf_keras.")
    if family.__name__ == "keras" and legacy_tensor:
        raise TypeError(
            f"`{layer_name}` here is a Keras 3 layer, and `inputs` is a tf_keras (Keras 2) tensor. "
            f"Use `tf_posenc.tf_keras.{layer_name}` in tf_keras models, or set "
            "TF_USE_LEGACY_KERAS=1 before importing tf_posenc, which makes the top-level names "
            f"tf_keras layers. Received: inputs of type {type(inputs).__module__}.{type(inputs).__name__}"
        )
    if family.__name__ != "keras" and isinstance(inputs, keras.KerasTensor):
        raise TypeError(
            f"`{layer_name}` here is a tf_keras (Keras 2) layer, and `inputs` is a Keras 3 tensor. "
            f"Use `tf_posenc.layers.{layer_name}` in Keras 3 models (the top-level "
            f"`tf_posenc.{layer_name}` is the tf_keras layer when TF_USE_LEGACY_KERAS=1). "
            f"Received: inputs of type keras.KerasTensor"
        )


def width_by_keyword(layer_name, grid, positional, d_model, function):
    """Raises unless a grid layer's width came by keyword: its NumPy twin `function` takes the
    width first (diffusers' order) and the layer takes the grid first, so a width given by position
    could be swapped with a grid size without a sign."""
    if positional or d_model is None:
        raise ValueError(
            f"`{layer_name}` takes `d_model` by keyword, as `{layer_name}({grid}, d_model=...)`: "
            f"`{function}` takes the width first, the layer the grid first, so two integers in a "
            f"row would be ambiguous. Received: positional arguments {tuple(positional)} after the "
            f"grid, d_model={d_model!r}"
        )


def boolean(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be a boolean. {received(name, value)}")
    return value


def positive_number(name, value):
    return number_at_least(name, value, 0, strict=True)


def optional(check):
    """`check`, with `None` let through."""

    def checked(name, value):
        return None if value is None else check(name, value)

    return checked


def positive_numbers(name, values):
    """`values` as a non-empty tuple of positive Python floats (a tuple: Keras tracks lists)."""
    try:
        numbers_ = tuple(positive_number(name, value) for value in values)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a list of positive numbers. {received(name, values)}") from None
    if not numbers_:
        raise ValueError(f"`{name}` must not be empty. {received(name, values)}")
    return numbers_


def positive_ints(name, values):
    """`values` as a non-empty tuple of positive Python ints."""
    if not isinstance(values, (tuple, list)) or not values:
        raise ValueError(f"`{name}` must be a list of positive integers. {received(name, values)}")
    return tuple(positive_int(name, value) for value in values)


def fraction(name, value):
    """`value` as a Python float in (0, 1]."""
    value = positive_number(name, value)
    if value > 1:
        raise ValueError(f"`{name}` must be in (0, 1]. {received(name, value)}")
    return value


def grid_shape(name, value, rank):
    """`value` (an int, for every axis alike, or `rank` ints) as a tuple of `rank` positive ints."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return (positive_int(name, value),) * rank
    if isinstance(value, (tuple, list)) and len(value) == rank:
        return tuple(positive_int(name, size) for size in value)
    raise ValueError(
        f"`{name}` must be a positive integer or a tuple of {rank} positive integers. {received(name, value)}"
    )


def head_size(size_name, size, heads_name, heads):
    """The head size `size // heads` of an attention whose heads split its width `size`; a
    `ValueError` naming both keys where they do not divide."""
    if size % heads:
        raise ValueError(
            f"`{size_name}` must be a multiple of `{heads_name}` ({heads}). Received: {size_name}={size}"
        )
    return size // heads


def multiple_of(name, value, multiple, why):
    """`value` as a positive int that is a multiple of `multiple` (`why` says what needs it)."""
    value = positive_int(name, value)
    if value % multiple:
        raise ValueError(f"`{name}` must be a multiple of {multiple}: {why}. Received: {name}={value}")
    return value


# Why the 2-D and 3-D sine-cosine tables need the widths they do.
GRID_2D_WIDTH = "each grid axis gets half the width, in sine and cosine halves"
GRID_3D_WIDTH = "a quarter for the frames and three eighths for each spatial axis, in sine and cosine halves"


def grid_2d_options(cls_token, base_size, interpolation_scale):
    """The checked options of a 2-D sine-cosine table (`sincos_2d`, `PatchPositionalEncoding`)."""
    boolean("cls_token", cls_token)
    optional(positive_number)("base_size", base_size)
    positive_number("interpolation_scale", interpolation_scale)
    return cls_token, base_size, interpolation_scale


def grid_3d_scales(spatial_interpolation_scale, temporal_interpolation_scale):
    """The checked position scales of a 3-D sine-cosine table (`sincos_3d`, `VideoPositionalEncoding`)."""
    positive_number("spatial_interpolation_scale", spatial_interpolation_scale)
    positive_number("temporal_interpolation_scale", temporal_interpolation_scale)
    return spatial_interpolation_scale, temporal_interpolation_scale


def encoding_options(d_model, max_wavelength, requested_layout, convention, min_timescale):
    """The checked options of a sinusoid table (`encoding.columns`), with `layout` resolved."""
    max_wavelength = wavelength("max_wavelength", max_wavelength)
    convention = one_of("convention", convention, CONVENTIONS)
    if convention == "fairseq" and d_model < 4:
        raise ValueError(
            "`convention='fairseq'` needs `d_model` of at least 4: its frequencies divide by "
            f"d_model // 2 - 1. Received: d_model={d_model}"
        )
    min_timescale = number_at_least("min_timescale", min_timescale, 0, strict=True)
    resolved = layout(
        "layout",
        requested_layout or ("interleave" if convention == "paper" else "concat"),
        d_model - d_model % 2 if convention != "paper" else d_model,
    )
    return max_wavelength, resolved, convention, min_timescale
