"""Internal: keras-hub's rotary layers, read as `RotaryEmbedding` arguments.

The classes and their attributes are keras-hub 0.32's (`keras_hub/src/layers/modeling/
rotary_embedding.py`, `models/llama/llama_rotary_embedding.py`,
`models/phi3/phi3_rotary_embedding.py`, `models/smollm3/smollm3_layers.py`). Only
`keras_hub.layers.RotaryEmbedding` is public; the subclasses are looked up by their module path,
and a keras-hub that moved one is a `ValueError` naming its version, never a silent skip.
"""

import importlib
import math

# The keras-hub classes read here: name -> (module, class). The base class is public.
_CLASSES = {
    "RotaryEmbedding": ("keras_hub.layers", "RotaryEmbedding"),
    "LlamaRotaryEmbedding": ("keras_hub.src.models.llama.llama_rotary_embedding", "LlamaRotaryEmbedding"),
    "Phi3SuScaledRotaryEmbedding": (
        "keras_hub.src.models.phi3.phi3_rotary_embedding",
        "Phi3SuScaledRotaryEmbedding",
    ),
    "SmolLM3RotaryEmbedding": ("keras_hub.src.models.smollm3.smollm3_layers", "SmolLM3RotaryEmbedding"),
}
# The attributes each class must have for its arguments to be read.
_ATTRIBUTES = {
    "RotaryEmbedding": (
        "max_wavelength",
        "scaling_factor",
        "rope_type",
        "beta_fast",
        "beta_slow",
        "original_max_position_embeddings",
        "truncate",
        "sequence_axis",
        "feature_axis",
        "denominator_dim",
    ),
    "LlamaRotaryEmbedding": (
        "frequency_adjustment_factor",
        "low_freq_factor",
        "high_freq_factor",
        "pretraining_sequence_length",
    ),
    "Phi3SuScaledRotaryEmbedding": (
        "inverese_freq_short_factor",
        "inverese_freq_long_factor",
        "max_sequence_length",
        "pretraining_sequence_length",
        "embedding_scaling_factor",
    ),
    "SmolLM3RotaryEmbedding": ("rope_theta", "partial_rotary_factor", "head_dim", "attention_scaling"),
}


# keras-hub 0.32 changed what YaRN means (`rotary_embedding.py`): before it, `truncate=True` (not
# the default then) clamped every position at `original_max_position_embeddings`, and the end of
# the ramp was capped at `rotary_dim // 2 - 1`, not `rotary_dim - 1` (transformers' cap).
_YARN_MEANING_SINCE = "0.32.0"  # its development releases keep the old meaning


class NotConvertible(ValueError):
    """A keras-hub rotary site that no tf_posenc layer computes (its reason in the message)."""


def classes():
    """keras-hub's rotary classes by name, checked to be where keras-hub 0.32 has them."""
    try:
        import keras_hub
    except ImportError as error:
        raise ImportError("`tf_posenc.keras_hub` needs keras-hub (`pip install keras-hub`).") from error
    found = {}
    for name, (module, attribute) in _CLASSES.items():
        try:
            found[name] = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as error:
            raise ValueError(
                f"keras-hub {keras_hub.__version__} has no `{module}.{attribute}`, where keras-hub 0.32 "
                "keeps it: tf_posenc cannot tell its rotary layers apart in this version."
            ) from error
    return found


def checked_attributes(layer, name):
    """Raises unless `layer` has the attributes keras-hub 0.32's `name` has."""
    missing = [attribute for attribute in _ATTRIBUTES[name] if not hasattr(layer, attribute)]
    if missing:
        import keras_hub

        raise ValueError(
            f"keras-hub {keras_hub.__version__}'s `{name}` has no attribute `{missing[0]}`, which "
            "keras-hub 0.32's has: its arguments cannot be read."
        )


def rotary_arguments(layer):
    """`RotaryEmbedding` arguments computing what the keras-hub rotary `layer` computes.

    Raises `NotConvertible` for a layer whose computation no `RotaryEmbedding` reproduces (a
    keras-hub subclass other than Llama's and Phi-3's, a rope type keras-hub does not define).
    """
    known = classes()
    kind = type(layer)
    if kind is known["SmolLM3RotaryEmbedding"]:
        raise NotConvertible(
            "SmolLM3's rotary layer returns `(cos, sin)`, not a rotation: use "
            "`tf_posenc.keras_hub.exact_rotary`, which gives it an adapter."
        )
    if not isinstance(layer, known["RotaryEmbedding"]):
        raise NotConvertible(f"`layer` must be a keras-hub rotary layer. Received: {kind.__name__}")
    checked_attributes(layer, "RotaryEmbedding")
    common = {
        "max_wavelength": layer.max_wavelength,
        "sequence_axis": layer.sequence_axis,
        "feature_axis": layer.feature_axis,
        "denominator_dim": layer.denominator_dim,
        "dtype": layer.dtype_policy,
    }
    if kind is known["LlamaRotaryEmbedding"]:
        checked_attributes(layer, "LlamaRotaryEmbedding")
        # keras-hub's Llama layer ignores `position_scaling_factor` (its `_get_inverse_freq`
        # never divides by it), and so does this one.
        if layer.low_freq_factor is None:
            return common
        return {
            **common,
            "rope_type": "llama3",
            "scaling_factor": layer.frequency_adjustment_factor,
            "low_freq_factor": layer.low_freq_factor,
            "high_freq_factor": layer.high_freq_factor,
            "original_max_position_embeddings": layer.pretraining_sequence_length,
        }
    if kind is known["Phi3SuScaledRotaryEmbedding"]:
        checked_attributes(layer, "Phi3SuScaledRotaryEmbedding")
        # Phi-3's "su" is LongRoPE: the long factors once the call's last position reaches past
        # the pretraining length, cosines and sines times `embedding_scaling_factor`.
        return {
            **common,
            "rope_type": "longrope",
            "short_factor": [float(value) for value in layer.inverese_freq_short_factor],
            "long_factor": [float(value) for value in layer.inverese_freq_long_factor],
            "original_max_position_embeddings": layer.pretraining_sequence_length,
            "max_position_embeddings": layer.max_sequence_length,
            "attention_factor": float(layer.embedding_scaling_factor),
        }
    if kind is not known["RotaryEmbedding"]:
        raise NotConvertible(
            f"keras-hub's `{kind.__name__}` computes its own embedding (it is not one of keras-hub's "
            "rope types), which no tf_posenc layer reproduces."
        )
    if layer.rope_type == "yarn":
        _check_yarn_meaning()
        # keras-hub scales YaRN's cosines and sines by 0.1 ln s + 1 for every s, 1 included.
        return {
            **common,
            "rope_type": "yarn",
            "scaling_factor": layer.scaling_factor,
            "beta_fast": layer.beta_fast,
            "beta_slow": layer.beta_slow,
            "original_max_position_embeddings": layer.original_max_position_embeddings,
            "truncate": layer.truncate,
            "attention_factor": 0.1 * math.log(layer.scaling_factor) + 1.0,
        }
    if layer.rope_type in ("linear", "dynamic"):
        return {**common, "rope_type": layer.rope_type, "scaling_factor": layer.scaling_factor}
    raise NotConvertible(
        f"keras-hub's rope_type={layer.rope_type!r} is not one keras-hub defines ('linear', 'dynamic', "
        "'yarn'); keras-hub leaves its frequencies unscaled, which is surely not what was meant."
    )


def _check_yarn_meaning():
    """Raises `NotConvertible` unless the installed keras-hub's YaRN is 0.32's, which
    `RotaryEmbedding` reproduces."""
    import keras_hub
    from packaging.version import Version

    if Version(keras_hub.__version__) < Version(_YARN_MEANING_SINCE):
        raise NotConvertible(
            f"keras-hub {keras_hub.__version__}'s YaRN is not keras-hub 0.32's, which tf_posenc "
            "reproduces: before 0.32, `truncate=True` clamps every position at "
            "`original_max_position_embeddings` and the ramp ends at most at `rotary_dim // 2 - 1`. "
            "Upgrade keras-hub (`pip install 'keras-hub>=0.32'`) to convert it."
        )
