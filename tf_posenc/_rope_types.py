"""Internal: the rope types, one record each, and the arguments they read.

`RotaryEmbedding` (its constructor, `get_config`, frequencies, attention scale and extent rule),
the public `rotary_frequencies` and `rotary_attention_factor`, and the Hugging Face config reader
all read this table, as transformers' `ROPE_INIT_FUNCTIONS` and its `_validate_*` functions
(5.x, `modeling_rope_utils.py`) serve its models. Adding a type is one `RopeType` record here,
plus its tests.

Names: the layer's positional arguments are keras-hub's (0.32, `RotaryEmbedding`), its
keyword-only ones transformers' rope parameters, with the names and meaning each gives them.
transformers calls `scaling_factor` `factor` and `max_wavelength` `rope_theta`.
"""

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from tf_posenc import _rotation, _validation


class Argument(NamedTuple):
    """A constructor argument of `RotaryEmbedding`: its default and its check, `check(name, value)`
    returning the value to keep. `per_pair`: a list with one entry per rotating pair."""

    default: object
    check: Callable
    per_pair: bool = False


# Every constructor argument of `RotaryEmbedding`, in the order of its signature (keras-hub's
# positional ones first).
ARGUMENTS = {
    "max_wavelength": Argument(10000, _validation.wavelength),
    "scaling_factor": Argument(None, _validation.optional(lambda n, v: _validation.number_at_least(n, v, 1))),
    "rope_type": Argument("linear", lambda name, value: _validation.one_of(name, value, tuple(REGISTRY))),
    "beta_fast": Argument(32.0, _validation.positive_number),
    "beta_slow": Argument(1.0, _validation.positive_number),
    "original_max_position_embeddings": Argument(4096, _validation.positive_int),
    "truncate": Argument(True, _validation.boolean),
    "sequence_axis": Argument(1, _validation.integer),
    "feature_axis": Argument(-1, _validation.integer),
    "denominator_dim": Argument(None, _validation.optional(_validation.positive_int)),
    "layout": Argument("half", lambda name, value: _validation.one_of(name, value, _rotation.ROTARY_LAYOUTS)),
    "attention_factor": Argument(None, _validation.optional(_validation.positive_number)),
    "mscale": Argument(None, _validation.optional(lambda n, v: _validation.number_at_least(n, v, 0))),
    "mscale_all_dim": Argument(None, _validation.optional(lambda n, v: _validation.number_at_least(n, v, 0))),
    "low_freq_factor": Argument(1.0, _validation.positive_number),
    "high_freq_factor": Argument(4.0, _validation.positive_number),
    "short_factor": Argument(None, _validation.optional(_validation.positive_numbers), per_pair=True),
    "long_factor": Argument(None, _validation.optional(_validation.positive_numbers), per_pair=True),
    "max_position_embeddings": Argument(None, _validation.optional(_validation.positive_int)),
    "partial_rotary_factor": Argument(1.0, _validation.fraction),
    "mrope_section": Argument(None, _validation.optional(_validation.positive_ints)),
    "mrope_interleaved": Argument(False, _validation.boolean),
}


class RopeType(NamedTuple):
    """One rope type.

    `frequencies(dim, options, seq_len)`: the float64 frequency of each of the `dim // 2` pairs,
    where `options` holds the checked arguments (`scaling_factor` as the effective factor).
    `scale(factor, options)`: the attention factor the cosines and sines are multiplied by, for
    a factor above 1 and no `attention_factor` given. `reads`: the arguments a Hugging Face
    config gives for this type beyond the common ones; `hf_required`: the keys of its rope
    parameters it must give; `needs`: the arguments the layer cannot do without.
    `extent(options, seq_len)`: for types whose frequencies follow a call's extent (its largest
    position + 1), the extent that decides them; `switch(options)`: the extent past which a
    graph that only knows the extent at run time switches to the second set (`None`: it must
    be known when the call is traced). `check(options)`: what the arguments must satisfy
    together.
    """

    frequencies: Callable
    transformers_names: tuple = ()
    unscaled_names: tuple = ()  # transformers' names for this type that take no `factor`
    reads: tuple = ()
    hf_required: tuple = ()
    needs: tuple = ()
    scale: Callable | None = None
    infers_factor: bool = False  # `scaling_factor` defaults to the ratio of the context lengths
    whole_head: bool = False  # `partial_rotary_factor` picks pairs of the whole head, not a width
    extent: Callable | None = None
    switch: Callable | None = None
    check: Callable | None = None


def _exponents(dim):
    return np.arange(0, dim, 2, dtype=np.float64)


def _plain(dim, options):
    return np.float64(options.max_wavelength) ** -(_exponents(dim) / (options.denominator_dim or dim))


def _factor(options):
    return np.float64(options.scaling_factor)


def _ntk(dim, options, seq_len):
    base, factor = np.float64(options.max_wavelength), _factor(options)
    return (base * factor ** (dim / (dim - 2))) ** -(_exponents(dim) / dim)


def _dynamic_ntk(dim, options, seq_len):
    context = options.max_position_embeddings
    extent = max(seq_len or context, context)
    factor = _factor(options)
    grown = np.float64(options.max_wavelength) * (factor * extent / context - (factor - 1)) ** (
        dim / (dim - 2)
    )
    return grown ** -(_exponents(dim) / dim)


def _proportional(dim, options, seq_len):
    rotating = int(options.partial_rotary_factor * dim // 2)
    frequencies = np.zeros(dim // 2)
    frequencies[:rotating] = np.float64(options.max_wavelength) ** -(np.arange(0, 2 * rotating, 2) / dim)
    return frequencies / _factor(options)


def _longrope(dim, options, seq_len):
    use_long = seq_len is not None and seq_len > options.original_max_position_embeddings
    factors = options.long_factor if use_long else options.short_factor
    return _plain(dim, options) / np.asarray(factors, np.float64)


def _llama3(dim, options, seq_len):
    plain, factor = _plain(dim, options), _factor(options)
    original, low, high = (
        options.original_max_position_embeddings,
        options.low_freq_factor,
        options.high_freq_factor,
    )
    wavelength = 2 * math.pi / plain
    if high == low:  # Llama 4 Scout: no band to blend across, a step at original / low
        return np.where(wavelength > original / low, plain / factor, plain)
    smooth = (original / wavelength - low) / (high - low)
    blended = (1 - smooth) * plain / factor + smooth * plain
    return np.where(
        wavelength < original / high, plain, np.where(wavelength > original / low, plain / factor, blended)
    )


def _yarn(dim, options, seq_len):
    extrapolated = 1 / np.float64(options.max_wavelength) ** (_exponents(dim) / dim)
    interpolated = extrapolated / _factor(options)

    def correction_dim(rotations):
        return (
            dim
            * math.log(options.original_max_position_embeddings / (rotations * 2 * math.pi))
            / (2 * math.log(options.max_wavelength))
        )

    low, high = correction_dim(options.beta_fast), correction_dim(options.beta_slow)
    if options.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    ramp = np.clip((np.arange(dim // 2) - low) / max(high - low, 0.001), 0, 1)
    return interpolated * ramp + extrapolated * (1 - ramp)


def yarn_softmax_factor(factor, mscale_all_dim):
    """What DeepSeek's attention multiplies its softmax scale by (transformers'
    `yarn_apply_mscale`): YaRN's `0.1 * mscale_all_dim * ln(factor) + 1`, squared, for a factor
    above 1 and a `mscale_all_dim` set; else 1."""
    if not mscale_all_dim or factor is None or factor <= 1:
        return 1.0
    mscale = 0.1 * mscale_all_dim * math.log(factor) + 1.0
    return mscale * mscale


def _yarn_scale(factor, options):
    def temperature(weight):
        return 0.1 * weight * math.log(factor) + 1.0

    if options.mscale and options.mscale_all_dim:
        return temperature(options.mscale) / temperature(options.mscale_all_dim)
    return temperature(1.0)


def _longrope_scale(factor, options):
    return math.sqrt(1 + math.log(factor) / math.log(options.original_max_position_embeddings))


def _check_llama3(options):
    if options.high_freq_factor < options.low_freq_factor:
        raise ValueError(
            "`high_freq_factor` must be at least `low_freq_factor`. Received: "
            f"high_freq_factor={options.high_freq_factor}, low_freq_factor={options.low_freq_factor}"
        )


def _check_longrope(options):
    if len(options.short_factor) != len(options.long_factor):
        raise ValueError(
            "`short_factor` and `long_factor` must have the same length. Received: "
            f"len(short_factor)={len(options.short_factor)}, len(long_factor)={len(options.long_factor)}"
        )


_YARN_LIKE = ("original_max_position_embeddings", "attention_factor")

# keras-hub's three rope types, then transformers' (`"dynamic_ntk"` is transformers'
# `"dynamic"`, renamed so that it cannot be mistaken for keras-hub's), then static NTK.
REGISTRY = {
    "linear": RopeType(
        lambda dim, options, seq_len: _plain(dim, options) / _factor(options),
        transformers_names=("linear", "default", "mrope"),
        unscaled_names=("default", "mrope"),  # "mrope": Qwen2-VL's old name, with `mrope_section`
        hf_required=("factor",),
    ),
    "dynamic": RopeType(
        lambda dim, options, seq_len: _plain(dim, options) / _factor(options) ** (dim / max(1, dim - 2))
    ),
    "yarn": RopeType(
        _yarn,
        transformers_names=("yarn",),
        reads=(*_YARN_LIKE, "beta_fast", "beta_slow", "truncate", "mscale", "mscale_all_dim"),
        scale=_yarn_scale,
        infers_factor=True,
    ),
    "llama3": RopeType(
        _llama3,
        transformers_names=("llama3",),
        reads=("original_max_position_embeddings", "low_freq_factor", "high_freq_factor"),
        hf_required=("factor", "low_freq_factor", "high_freq_factor"),
        check=_check_llama3,
    ),
    "longrope": RopeType(
        _longrope,
        transformers_names=("longrope", "su"),  # "su": Phi-3's old name
        reads=(*_YARN_LIKE, "short_factor", "long_factor"),
        hf_required=("short_factor", "long_factor"),
        needs=("short_factor", "long_factor"),
        scale=_longrope_scale,
        infers_factor=True,
        # Keyed by the side of the switch: the short factors up to the pretraining context.
        extent=lambda options, seq_len: (
            options.original_max_position_embeddings
            + int(seq_len is not None and seq_len > options.original_max_position_embeddings)
        ),
        switch=lambda options: options.original_max_position_embeddings,
        check=_check_longrope,
    ),
    "dynamic_ntk": RopeType(
        _dynamic_ntk,
        transformers_names=("dynamic",),
        hf_required=("factor",),
        needs=("max_position_embeddings",),
        extent=lambda options, seq_len: max(seq_len or 0, options.max_position_embeddings),
    ),
    "proportional": RopeType(_proportional, transformers_names=("proportional",), whole_head=True),
    "ntk": RopeType(_ntk),
}
ROPE_TYPES = tuple(REGISTRY)
# The types whose frequencies depend on the extent of the call (its largest position + 1).
EXTENT_DEPENDENT_ROPE_TYPES = tuple(name for name, record in REGISTRY.items() if record.extent)
# Why the layer cannot do without an argument, for its error message.
_NEEDED_FOR = {
    "max_position_embeddings": "its frequencies change once a call reaches past it",
    "short_factor": "the divisors of the frequencies within the pretraining context",
    "long_factor": "the divisors of the frequencies past it",
}


class Options:
    """Checked arguments of a rotary embedding, read by attribute; `scaling_factor` is the
    effective factor."""

    def __init__(self, **arguments):
        self.__dict__.update(arguments)


def checked_arguments(arguments):
    """`arguments` (every name of `ARGUMENTS`) after the checks of each and of their
    combination; raises a `ValueError` naming the first that fails."""
    checked = {name: argument.check(name, arguments[name]) for name, argument in ARGUMENTS.items()}
    record = REGISTRY[checked["rope_type"]]
    missing = [name for name in record.needs if checked[name] is None]
    if missing:
        raise ValueError(
            f"`rope_type={checked['rope_type']!r}` needs `{'` and `'.join(missing)}`: "
            f"{_NEEDED_FOR[missing[0]]}. Received: {missing[0]}=None"
        )
    for name, argument in ARGUMENTS.items():
        if argument.per_pair and checked[name] is not None and name not in record.reads:
            owners = [type_name for type_name, other in REGISTRY.items() if name in other.reads]
            raise ValueError(
                f"`{name}` is read by rope_type {' or '.join(map(repr, owners))} only: pass it "
                f"with rope_type='{owners[0]}'. Received: rope_type={checked['rope_type']!r}"
            )
    if record.check:
        record.check(Options(**checked))
    if checked["mrope_section"] is not None and record.extent:
        raise ValueError(
            f"`mrope_section` cannot be combined with rope_type={checked['rope_type']!r}, whose "
            "frequencies follow each call's extent."
        )
    if checked["mrope_interleaved"] and (
        checked["mrope_section"] is None or len(checked["mrope_section"]) not in (2, 3)
    ):
        raise ValueError(
            "`mrope_interleaved=True` needs a `mrope_section` of three sizes (t, h, w; Qwen3-VL) or "
            f"two (h, w; NeoMME). Received: mrope_section={arguments['mrope_section']!r}"
        )
    return checked


def effective_factor(arguments):
    """`scaling_factor`, or for the types that infer it, given `max_position_embeddings`, the
    ratio of the context lengths (as transformers does); 1.0 otherwise."""
    if arguments["scaling_factor"] is not None:
        return arguments["scaling_factor"]
    if REGISTRY[arguments["rope_type"]].infers_factor and arguments["max_position_embeddings"] is not None:
        return arguments["max_position_embeddings"] / arguments["original_max_position_embeddings"]
    return 1.0


def rotated_width(rope_type, dim, partial_rotary_factor):
    """How many of `dim` features rotate: `partial_rotary_factor` of them, except for a type
    whose non-rotating pairs are spread through the head."""
    if REGISTRY[rope_type].whole_head or partial_rotary_factor == 1:
        return dim
    return int(dim * partial_rotary_factor)


def checked_head(arguments, dim, where):
    """The number of rotating features of a head of `dim` features, after the checks that need
    `dim`: an even, positive rotating width, M-RoPE sections that cover its pairs, and one entry
    per pair in each per-pair list. `arguments` maps the argument names to their values; `where`
    ends the error messages (which inputs, or which config)."""
    partial = arguments["partial_rotary_factor"]
    width = rotated_width(arguments["rope_type"], dim, partial)
    if width == 0 or width % 2:
        raise ValueError(
            "`partial_rotary_factor` must leave an even, positive number of rotating features: "
            f"int({dim} * {partial}) = {width}. Received: partial_rotary_factor={partial} {where}"
        )
    sections = arguments.get("mrope_section")
    # Interleaved sections place h and w among the first pairs and give t every other pair, as
    # Qwen3-VL's code does for any width; contiguous ones split the pairs and must cover them.
    if sections is not None and not arguments.get("mrope_interleaved") and sum(sections) != width // 2:
        raise ValueError(
            f"`mrope_section` must add up to the {width // 2} rotating feature pairs. Received: "
            f"mrope_section={list(sections)} (sum {sum(sections)}) {where}"
        )
    for name, argument in ARGUMENTS.items():
        values = arguments.get(name)
        if argument.per_pair and values is not None and len(values) != width // 2:
            raise ValueError(
                f"`{name}` must have one entry per rotating feature pair: {width // 2} for {width} "
                f"rotating features. Received: len({name})={len(values)} {where}"
            )
    return width


def rotary_frequencies(
    dim,
    max_wavelength=10000,
    scaling_factor=None,
    rope_type="linear",
    beta_fast=32.0,
    beta_slow=1.0,
    original_max_position_embeddings=4096,
    truncate=True,
    denominator_dim=None,
    *,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    short_factor=None,
    long_factor=None,
    max_position_embeddings=None,
    partial_rotary_factor=1.0,
    seq_len=None,
):
    """The angular frequencies of the `dim // 2` feature pairs of a rotary embedding, in float64.

    `dim` is the width that rotates. The arguments of keras-hub's `RotaryEmbedding` (0.32) come
    first and mean what they mean there; the keyword-only ones are transformers' (5.x,
    `modeling_rope_utils.py`), with their names and meaning.

    * `"linear"` divides every frequency by `scaling_factor` (position interpolation).
    * `"dynamic"` is keras-hub's rule: it divides every frequency, the highest included, by
      `scaling_factor ** (dim / (dim - 2))`. That is neither transformers' dynamic NTK
      (`"dynamic_ntk"` here) nor static NTK (`"ntk"`); it is kept under keras-hub's name for
      models ported from it.
    * `"yarn"` blends the plain and the interpolated frequencies by a ramp between the pairs
      that turn `beta_fast` and `beta_slow` times over `original_max_position_embeddings`
      positions (YaRN; keras-hub and transformers compute the same frequencies).
    * `"llama3"` divides the frequencies whose wavelength exceeds
      `original_max_position_embeddings / low_freq_factor` by `scaling_factor`, keeps those
      below `original_max_position_embeddings / high_freq_factor`, and blends in between
      (with equal factors, as Llama 4 Scout's, there is no blend: a step at the boundary).
    * `"longrope"` divides frequency `j` by `long_factor[j]` when `seq_len` (the largest
      position of the call + 1) exceeds `original_max_position_embeddings`, else by
      `short_factor[j]` (LongRoPE, Phi-3).
    * `"dynamic_ntk"` is transformers' `"dynamic"`: nothing changes while `seq_len` is at most
      `max_position_embeddings`; past it the base grows to
      `base * (s * seq_len / max_position_embeddings - (s - 1)) ** (dim / (dim - 2))`.
    * `"ntk"` is static NTK-aware scaling: the base becomes `base * s ** (dim / (dim - 2))`, so
      the highest frequency stays and the lowest is divided by about `s`.
    * `"proportional"` (Gemma 4): `dim` is the whole head; the first
      `int(partial_rotary_factor * dim // 2)` pairs get the frequencies
      `base ** (-2j / dim)` / `scaling_factor`, and the other pairs frequency 0 (they do not
      rotate).

    transformers rounds `short_factor` and `long_factor` to float32 and computes its inverse
    frequencies in float32; here everything is float64, the numbers its code means.

    The arguments are checked as `RotaryEmbedding` checks them, and `scaling_factor=None` means
    what it means there (1, or for `"yarn"` and `"longrope"` given `max_position_embeddings`,
    the ratio of the context lengths): the function and the layer give the same frequencies.
    """
    given = {name: value for name, value in locals().items() if name in ARGUMENTS}
    arguments = {**{name: argument.default for name, argument in ARGUMENTS.items()}, **given}
    if _validation.positive_int("dim", dim) % 2:
        raise ValueError(f"`dim` must be even: features rotate in pairs. {_validation.received('dim', dim)}")
    checked = checked_arguments(arguments)
    if seq_len is not None:
        seq_len = _validation.non_negative_int("seq_len", seq_len)
    if checked["partial_rotary_factor"] != 1 and not REGISTRY[checked["rope_type"]].whole_head:
        raise ValueError(
            "`dim` is the width that rotates: `partial_rotary_factor` is read by "
            f"rope_type='proportional' only here. Received: partial_rotary_factor={partial_rotary_factor}, "
            f"rope_type={rope_type!r}"
        )
    checked_head(checked, dim, f"for dim={dim}")
    options = Options(**{**checked, "scaling_factor": effective_factor(checked)})
    return REGISTRY[checked["rope_type"]].frequencies(dim, options, seq_len)


def rotary_attention_factor(
    rope_type,
    scaling_factor=1.0,
    original_max_position_embeddings=4096,
    attention_factor=None,
    mscale=None,
    mscale_all_dim=None,
):
    """The number a rotary embedding multiplies its cosines and sines by, as a Python float.

    `attention_factor`, when given, is the answer (`1.0` turns the scale off). Otherwise, as in
    transformers: YaRN's `0.1 * ln(s) + 1` (also keras-hub's), or with `mscale` and
    `mscale_all_dim` both set DeepSeek's ratio `(0.1 * mscale * ln(s) + 1) /
    (0.1 * mscale_all_dim * ln(s) + 1)`; LongRoPE's `sqrt(1 + ln(s) / ln(original))`; `1.0`
    for every other type and wherever `s <= 1`.
    """
    if attention_factor is not None:
        return float(attention_factor)
    factor = 1.0 if scaling_factor is None else float(scaling_factor)
    scale = REGISTRY[rope_type].scale
    if factor <= 1 or scale is None:
        return 1.0
    options = Options(
        original_max_position_embeddings=original_max_position_embeddings,
        mscale=mscale,
        mscale_all_dim=mscale_all_dim,
    )
    return scale(factor, options)


def from_transformers_name(name):
    """The tf_posenc type of transformers' rope type `name`, and whether it takes a `factor`."""
    for type_name, record in REGISTRY.items():
        if name in record.transformers_names:
            return type_name, name not in record.unscaled_names
    names = tuple(name for record in REGISTRY.values() for name in record.transformers_names)
    raise ValueError(f"`rope_type` must be one of {names}. Received: rope_type={name!r}")
