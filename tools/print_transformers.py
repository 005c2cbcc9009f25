"""Prints what transformers' own modules do with positions: the package's printed facts
(`tf_posenc/_hf_*defaults.py`) and the records the tests compare with (`tests/transformers_*.json`).
Run by a maintainer in an environment with transformers 5.25.0 and torch (not the test
environment), from the repository's root:

    python tools/print_transformers.py rotations   # writes tests/transformers_5_25.json
    python tools/print_transformers.py rotations TYPE ...  # prints those types again, in place
    python tools/print_transformers.py defaults    # prints the config classes' defaults
    python tools/print_transformers.py windows     # adds each layer's sliding window to the json
    python tools/print_transformers.py inkling     # adds Inkling 2's bias and log scale to the json
    python tools/print_transformers.py deepseek_v4_output  # adds DeepSeek-V4's inverse rotation
    python tools/print_transformers.py omni        # adds the Omni models' get_rope_index
    python tools/print_transformers.py float32_rows  # adds the rotary modules' float32 rows
    python tools/print_transformers.py layer_types  # adds the layer types config classes derive
    python tools/print_transformers.py modules     # writes tests/transformers_modules_5_25.json
    python tools/print_transformers.py modules TYPE ...  # prints those types' modules again, in place
    python tools/print_transformers.py encoders    # writes tests/transformers_encoders_5_25.json
    python tools/print_transformers.py encoder_plans  # adds the encoders' masks and scales
    python tools/print_transformers.py vision      # writes tests/transformers_vision_5_25.json
    python tools/print_transformers.py speech_plans  # adds the speech models' masks and scales
    python tools/print_transformers.py deberta     # writes tests/transformers_deberta_5_25.json
    python tools/print_transformers.py deberta_attention  # writes transformers_deberta_attention_5_25.json
    python tools/print_transformers.py conformer_attention  # writes ..._conformer_attention_5_25.json
    python tools/print_transformers.py detr_sine   # writes tests/transformers_detr_sine_5_25.json
    python tools/print_transformers.py sam_attention  # writes tests/transformers_sam_attention_5_25.json
    python tools/print_transformers.py position_ids  # writes tests/transformers_position_ids_5_25.json
    python tools/print_transformers.py module_defaults  # writes tf_posenc/_hf_module_defaults.py
                                                        # (then `ruff format` it)
    python tools/print_transformers.py ports       # prints the whole ports' greedy tokens and outputs
    python tools/print_transformers.py plain_attention  # writes transformers_plain_attention_5_25.json
                                                        # and tf_posenc/_hf_plain_defaults.py

For every causal language model of transformers whose text model builds a rotary module, its
text model type (multimodal models share their language model's), and per distinct attention
layer (by module class and layer type), the linear map `R(p) R(0)^-1` that positions apply to
head 0's query and key: read from the attention module itself, run in float64 on a batch of
random tokens at positions 0 and p (its float32 constants made float64; M-RoPE's three rows of
ids p, 2p + 1 and 3p + 2 where its rotary module takes them), applied to a fixed
vector and dotted with three fixed unit vectors. Per decoder layer (on the meta device): whether
it is self-attention, and its attention module's `scaling`. No weights are downloaded: every
model is built from its config class's defaults, with random weights.
"""

import contextlib
import copy
import importlib
import inspect
import json
import math
import pathlib
import re
import sys
import textwrap
import warnings

import numpy as np
import torch
import transformers

# The tests' fixed inputs and tiny ports, and where the printed records go.
ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
sys.path.insert(0, str(TESTS))

from fingerprints import (  # noqa: E402
    INKLING,
    LAYER_TYPE_CASES,
    MODULE_POSITIONS,
    MODULE_SIZES,
    OVERRIDES,
    ROPE_KEYS,
    fixed_vectors,
    inkling_positions,
    inkling_weights,
    module_input,
    module_weights,
)
from transformers import AutoConfig, PreTrainedModel  # noqa: E402
from transformers.models.auto import modeling_auto  # noqa: E402

warnings.filterwarnings("ignore")
transformers.logging.set_verbosity_error()

POSITIONS = [0, 1, 2, 63, 2**17 - 1]  # capped below a model's max_position_embeddings
PRINTED = TESTS / "transformers_5_25.json"
MODULES = TESTS / "transformers_modules_5_25.json"
MAPPINGS = (
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
    "MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES",
)


def rotary_text_models():
    """{text model type: (model types whose language model it is, its modeling module)}."""
    found = {}
    for model_type in sorted({name for mapping in MAPPINGS for name in getattr(modeling_auto, mapping, {})}):
        try:
            text = AutoConfig.for_model(model_type).get_text_config(decoder=True)
        except Exception:
            continue
        for name in (text.model_type, model_type):
            module_name = transformers.models.auto.configuration_auto.model_type_to_module_name(name)
            try:
                module = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
                break
            except ImportError:
                module = None
        if module is None and model_type == text.model_type:
            # A config class of its own with another type's modules (EXAONE 3's and InternLM3's
            # are Llama's): the module of the class `AutoModelForCausalLM` builds for it.
            built = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
            if built is not None and hasattr(transformers, built):
                module = importlib.import_module(getattr(transformers, built).__module__)
        if module is None or not any(
            inspect.isclass(value) and key.endswith("RotaryEmbedding") and value.__module__ == module.__name__
            for key, value in vars(module).items()
        ):
            continue
        parents, _ = found.setdefault(text.model_type, ([], module.__name__))
        parents.append(model_type)
        if model_type == text.model_type:
            found[text.model_type] = (parents, module.__name__)
    return found


def aliases(found=None):
    """{model type: the type whose modules it runs} for the types with a config class of their own
    and no modeling module (`rotary_text_models` found them through `AutoModelForCausalLM`)."""
    found = found or rotary_text_models()
    by_module = {module: name for name, (_, module) in found.items() if module.endswith(f".modeling_{name}")}
    return {
        name: by_module[module]
        for name, (_, module) in sorted(found.items())
        if not module.endswith(f".modeling_{name}") and module in by_module
    }


def text_config(text_type, parents):
    parent = text_type if text_type in parents else parents[0]
    text = AutoConfig.for_model(parent).get_text_config(decoder=True)
    text._attn_implementation = "eager"
    for key, value in OVERRIDES.get(text_type, {}).items():
        if key in ROPE_KEYS and isinstance(getattr(text, "rope_parameters", None), dict):
            text.rope_parameters[key] = value
        setattr(text, key, value)
    if text_type == "dbrx":
        # DbrxAttention stores `attn_config.rope_theta`, which DbrxAttentionConfig no longer has
        # (its rotation reads `rope_parameters`): the same value, so that the module builds; and
        # it clamps by `clip_qkv` whether set or not: its checkpoints' 8, which the printer's
        # small queries and keys stay within.
        text.attn_config.rope_theta = text.rope_parameters["rope_theta"]
        text.attn_config.clip_qkv = 8.0
    return text


def text_model(text, module):
    """The text model of `text` (on the meta device) and its list of decoder layers: the list of
    `num_hidden_layers` outside a vision tower, or else (HRM's stacks run in cycles, LongCat-Flash's
    two attentions per layer) its first list named `layers`, whose plan is not printed."""
    candidates = [
        value
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, PreTrainedModel)
        and value.__module__ == module.__name__
        and value.__name__.endswith("Model")
        and "PreTrained" not in value.__name__
    ]
    candidates.sort(
        key=lambda value: (not value.__name__.endswith(("TextModel", "LanguageModel")), len(value.__name__))
    )
    for candidate in candidates:
        try:
            with torch.device("meta"):
                model = candidate(text)
        except Exception:
            continue
        lists = [
            (name, child)
            for name, child in model.named_modules()
            if isinstance(child, torch.nn.ModuleList) and not re.search("vision|visual|perceiver", name)
        ]
        for _, child in lists:
            if len(child) == text.num_hidden_layers:
                return model, child
        for name, child in lists:
            if name.split(".")[-1] == "layers":
                return model, child
    raise RuntimeError("no text model builds from the config class's defaults")


@contextlib.contextmanager
def float64_everywhere():
    """transformers' rope code asks for float32 by `torch.float`, `torch.float32` and `.float()`."""
    saved = torch.float, torch.float32, torch.Tensor.float
    torch.float = torch.float32 = torch.float64
    torch.Tensor.float = lambda self, *args, **kwargs: self.double()
    try:
        yield
    finally:
        torch.float, torch.float32, torch.Tensor.float = saved


def text_rotary(model, text):
    """The text model's rotary module: the one built from its config (not Evolla's protein
    encoder's), else the first outside a vision tower, or None."""
    rotaries = [
        child
        for name, child in model.named_modules()
        if type(child).__name__.endswith("RotaryEmbedding") and "vision" not in name.lower()
    ]
    own = next((child for child in rotaries if getattr(child, "config", None) is text), None)
    return own or next(iter(rotaries), None)


class Captured(Exception):
    pass


def takes_mrope_ids(rope, text):
    """Whether the rotary module takes M-RoPE's three rows of ids: its config's rope parameters
    (or those of a layer type) name `mrope_section`, or the module keeps one of its own (Cohere
    Compass's default sections)."""
    if getattr(rope, "mrope_section", None) is not None:
        return True
    parameters = getattr(text, "rope_parameters", None) or {}
    nested = [value for value in parameters.values() if isinstance(value, dict)]
    return any("mrope_section" in entry for entry in [parameters, *nested])


def attention_of(layer):
    if hasattr(layer, "shared_transformer"):  # Zamba2's hybrid layers: a shared attention block
        return layer.shared_transformer.self_attn
    skipped = ("Norm", "Dropout", "Identity")  # GPT-NeoX's `post_attention_dropout`, ModernBERT's `attn_norm`
    children = [
        (name, child)
        for name, child in layer.named_children()
        if not any(word in type(child).__name__ for word in skipped)
    ]
    for words in (("attn", "attention"), ("mixer", "mamba")):
        for name, child in children:
            if any(word in name for word in words):
                # LongCat-Flash's two attentions of a layer, alike but for their caches' slots.
                return child[0] if isinstance(child, torch.nn.ModuleList) else child
    # RecurrentGemma's `temporal_block`: an attention module by its class; DBRX's, inside its norms.
    found = next((child for _, child in children if "Attention" in type(child).__name__), None)
    return found or next(
        (child for child in layer.modules() if re.search("Attention$", type(child).__name__)), None
    )


def rotation(module, text, rotary, attention, index, layer_type):
    """The fingerprint of one attention layer's rotation of its queries and keys."""
    with float64_everywhere():
        try:
            rope = type(rotary)(config=text)
        except TypeError:
            rope = type(rotary)(text)
        rope = rope.double()
    torch.manual_seed(0)
    with float64_everywhere():  # a rotary module inside the attention (RecurrentGemma's) in float64 too
        try:
            layer = type(attention)(text, index)
        except TypeError:
            try:
                layer = type(attention)(config=text, layer_idx=index)
            except TypeError:  # other constructor arguments (Laguna's heads per layer): the model's own
                layer = copy.deepcopy(attention).to_empty(device="cpu")
                for name, child in list(layer.named_children()):
                    # A rotary module inside (IDEFICS's): its frequencies, which `to_empty` left unset.
                    if type(child).__name__.endswith("RotaryEmbedding"):
                        setattr(layer, name, type(child)(text))
    layer = layer.double()
    for parameter in layer.parameters():
        if parameter.dim() == 1:  # norms and per-channel scales: ones, which commute with a rotation
            torch.nn.init.ones_(parameter)
        else:
            torch.nn.init.normal_(parameter, std=0.05)
    first = run(module, text, rope, layer, layer_type, 2)
    return run(module, text, rope, layer, layer_type, max(first["dims"]) + 8)


def run(module, text, rope, layer, layer_type, batch):
    limit = getattr(text, "max_position_embeddings", None) or 2**31
    positions = [min(position, int(limit) - 1) for position in POSITIONS]
    # One random token per example, at every position: only the positions differ.
    # Zamba2's shared attention reads the hidden states and the embeddings side by side.
    width = getattr(getattr(layer, "q_proj", None), "in_features", text.hidden_size)
    tokens = torch.randn(batch, 1, width, dtype=torch.float64).expand(-1, len(positions), -1)
    ids = torch.tensor(positions).expand(batch, -1)
    # DeepSeek-V4's rotary modules are keyed by their rope's label ("main", "compress"), which
    # its attention modules name, not by the layer type.
    label = getattr(layer, "rope_layer_type", layer_type)
    extra = {"layer_type": label} if "layer_type" in inspect.signature(rope.forward).parameters else {}
    # M-RoPE: three rows of ids (t, h, w) that differ, so that each section shows.
    mrope_ids = torch.stack([ids, ids * 2 + 1, ids * 3 + 2])
    mrope_ids[:, :, 0] = 0
    mrope = takes_mrope_ids(rope, text)
    with float64_everywhere():
        try:
            embeddings = rope(tokens, mrope_ids if mrope else ids, **extra)
        except (KeyError, AttributeError):
            # No rope for this layer type (Ergo's and Beam's full layers, Cohere Compass's NoPE
            # layers): the model passes none.
            embeddings = None
        except Exception:  # M-RoPE that its config does not name
            embeddings, mrope = rope(tokens, mrope_ids, **extra), True
    if mrope:
        ids = mrope_ids
    captured = {}

    def capture(_, query, key, *args, **kwargs):
        captured["q"], captured["k"] = query.detach(), key.detach()
        raise Captured

    patched = {
        name: value
        for name, value in vars(module).items()
        if inspect.isfunction(value) and "attention_forward" in name
    }
    for name in patched:
        setattr(module, name, capture)
    if hasattr(layer, "_attn"):  # GPT-NeoX Japanese's own attention method
        layer._attn = lambda query, key, *args, **kwargs: capture(None, query, key)
    try:
        accepted = inspect.signature(layer.forward).parameters
        arguments = {}
        if "position_embeddings" in accepted:
            labelled = hasattr(layer, "rope_layer_type")  # DeepSeek-V4's: a dict by label
            # (cos, sin), or Llama 4's and DeepSeek-V2's complex `freqs_cis`, as the module takes it.
            arguments["position_embeddings"] = {label: embeddings} if labelled else embeddings
        if "position_ids" in accepted:
            arguments["position_ids"] = ids
        if "layer_idx" in accepted:  # Zamba2's shared attention, told which layer calls it
            arguments["layer_idx"] = layer.layer_idx
        if "shared_kv_states" in accepted:  # Gemma 4's store of the keys its last layers share
            arguments["shared_kv_states"] = {}
        masks = [None]
        if "attention_mask" in accepted:
            masks = [torch.zeros(batch, 1, len(positions), len(positions), dtype=torch.float64), None]
        for mask in masks:
            if "attention_mask" in accepted:
                arguments["attention_mask"] = mask
            try:
                with float64_everywhere():  # a rotary step inside the module (RecurrentGemma's, Moshi's) too
                    layer(tokens, **arguments)
            except Captured:
                break
            except Exception:
                if mask is masks[-1]:
                    raise
    finally:
        for name, value in patched.items():
            setattr(module, name, value)
    if "q" not in captured:
        raise RuntimeError("the layer computed no query and key")
    if batch == 2:
        return {"dims": [captured[name].shape[-1] for name in ("q", "k")]}
    result = {"mrope": mrope, "positions": positions}
    for name in ("q", "k"):
        states = captured[name][:, 0].numpy()  # head 0: (batch, positions, dim)
        dim = states.shape[-1]
        if np.linalg.matrix_rank(states[:, 0]) < dim:
            raise RuntimeError(f"the {name} at position 0 has rank below {dim}")
        vector, units = fixed_vectors(dim)
        dots = []
        for column in range(1, len(positions)):
            moved, *_ = np.linalg.lstsq(states[:, 0], states[:, column], rcond=None)  # x_p = x_0 @ moved
            dots.append((units @ (moved.T @ vector)).tolist())
        result[name] = {"dim": dim, "dots": dots}
    return result


def rotations(only=()):
    """All model types, or (given names) only those, whose entries replace the stored ones."""
    stored = json.loads(PRINTED.read_text()) if only else {}
    printed = stored.get("types", {})
    for text_type, (parents, module_name) in sorted(rotary_text_models().items()):
        if only and text_type not in only:
            continue
        before = printed.pop(text_type, {})
        module = importlib.import_module(module_name)
        entry = printed.setdefault(text_type, {"parents": sorted(parents)})
        if "windows" in before:  # printed by `windows`, from the modules' own attributes
            entry["windows"] = before["windows"]
        try:
            text = text_config(text_type, parents)
            model, layers = text_model(text, module)
        except Exception as error:
            entry["error"] = f"{type(error).__name__}: {error}"[:200]
            continue
        rotary = text_rotary(model, text)
        layer_types = getattr(text, "layer_types", None) or [None] * len(layers)
        entry["rotations"], entry["plan"] = {}, []
        for index, layer in enumerate(layers):
            attention = attention_of(layer)
            mixers = [type(child).__name__ for child in [*layer.children(), attention]]
            self_attention = any(
                re.search("Attention|MLA$", name) and not re.search("Linear|Lightning|Delta|Cross", name)
                for name in mixers
            ) or hasattr(layer, "shared_transformer")
            scaling = getattr(attention, "scaling", None) if self_attention else None
            entry["plan"].append([self_attention, None if scaling is None else float(scaling)])
            kind = layer_types[index] if index < len(layer_types) else None
            key = f"{type(attention).__name__}:{kind}"
            if not self_attention or rotary is None or key in entry["rotations"]:
                continue
            try:
                entry["rotations"][key] = {
                    "layer_type": kind,
                    **rotation(module, text, rotary, attention, index, kind),
                }
            except Exception as error:
                entry["rotations"][key] = {
                    "layer_type": kind,
                    "error": f"{type(error).__name__}: {error}"[:200],
                }
        if len(layers) != text.num_hidden_layers:  # not one decoder layer per cache layer
            del entry["plan"]
        print(
            text_type,
            {key: value.get("error", "ok") for key, value in entry["rotations"].items()},
            flush=True,
        )
    source = (
        f"transformers {transformers.__version__}, torch {torch.__version__}: tools/print_transformers.py"
    )
    types = dict(sorted(printed.items()))
    # What the other verbs printed (Inkling's bias) stays.
    kept = {key: value for key, value in stored.items() if key not in ("source", "types")}
    PRINTED.write_text(json.dumps({"source": source, "types": types, **kept}, separators=(",", ":")) + "\n")


READ = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "head_dim",
    "max_position_embeddings",
    "sliding_window",
    "use_sliding_window",
    "max_window_layers",
    "partial_rotary_factor",
    "rotary_dim",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "rope_interleave",
    "query_pre_attn_scalar",
    "attention_multiplier",
    "no_rope_layer_interval",
    "attention_chunk_size",
    "position_embedding_type",
    "use_mem_rope",
    "alibi",
    "layer_rope_theta",
    "cross_attention_layers",
    "attention_head_dim",
    "qk_scale_factor",
)


def defaults():
    """Each text model type's defaults of the keys tf_posenc reads, its default layer types and
    its config class's renamed keys, as `_hf_defaults` holds them."""
    for text_type, (parents, _) in sorted(rotary_text_models().items()):
        text = text_config(text_type, parents)
        values = {}
        for key in READ:
            try:
                value = getattr(text, key)
            except Exception:  # Gemma 4's per-layer keys refuse a global read: the config's own
                value = text.to_dict().get(key)
            if value is not None:
                values[key] = value
        rope = getattr(text, "rope_parameters", None) or getattr(text, "rope_scaling", None)
        if rope is None and text_type in ("gptj", "codegen"):
            rope = {"rope_type": "default", "rope_theta": 10000.0}  # hard-coded in their code
        # hidden_size // num_attention_heads at the config's own sizes, unless the parent model's
        # config gives its text config a head size (Voxtral Realtime's 128)
        if "head_dim" in values and derives_head_dim(text) and text_type not in PARENT_GIVES_HEAD_DIM:
            del values["head_dim"]
        values["rope_parameters"] = rope
        if (
            isinstance(rope, dict)
            and rope
            and not all(isinstance(v, dict) or v is None for v in rope.values())
        ):
            if rope.get("rope_theta") is not None:
                values["rope_theta"] = rope["rope_theta"]
        renamed = {
            ours: theirs for ours, theirs in getattr(type(text), "attribute_map", {}).items() if ours in READ
        }
        print(repr(text_type), values, getattr(text, "layer_types", None), renamed, parents)


def windows():
    """Adds to tests/transformers_5_25.json, per text model type, each decoder layer's window as
    its attention module passes it to the attention function (`sliding_window`, None on a layer
    whose `is_sliding` is False; "absent" where the module has no such attribute), on the meta
    device from the config class's defaults."""
    stored = json.loads(PRINTED.read_text())
    for text_type, (parents, module_name) in sorted(rotary_text_models().items()):
        entry = stored["types"].get(text_type)
        if entry is None or "plan" not in entry:
            continue
        try:
            text = text_config(text_type, parents)
            _, layers = text_model(text, importlib.import_module(module_name))
        except Exception as error:
            print(text_type, "error", error, flush=True)
            continue
        found = []
        for layer in layers:
            attention = attention_of(layer)
            window = getattr(attention, "sliding_window", "absent") if attention is not None else "absent"
            if getattr(attention, "is_sliding", True) is False:
                window = None  # EXAONE 4 and Kolibri keep the window, and pass it on sliding layers only
            found.append(window if window in (None, "absent") else int(window))
        entry["windows"] = found
        print(text_type, sorted({str(window) for window in found}), flush=True)
    PRINTED.write_text(json.dumps(stored, separators=(",", ":")) + "\n")


def inkling():
    """Adds to tests/transformers_5_25.json the bias of transformers' own
    `Inkling2RelativePositionBias` (float32, as the model runs it) on `fingerprints`' inputs and
    weights, with and without log scaling, and `Inkling2LogScale` of some positions."""
    from transformers.models.inkling2 import modeling_inkling2 as inkling2

    stored = json.loads(PRINTED.read_text())
    case = INKLING
    keys = ("d_rel", "rel_l2_clip_threshold", "log_scaling_alpha", "log_scaling_n_floor", "hidden_size")
    config = transformers.Inkling2TextConfig(**{key: case[key] for key in keys})
    hidden, linear, scale, proj = (torch.from_numpy(array) for array in inkling_weights())
    printed = {}
    for log_scaling in (False, True):
        module = inkling2.Inkling2RelativePositionBias(
            config, case["num_heads"], case["rel_extent"], log_scaling
        )
        with torch.no_grad():
            module.linear.weight.copy_(linear)
            module.norm.scale.copy_(scale)
            module.proj.copy_(proj)
            for first in case["first_positions"]:
                queries, keys_ = (torch.from_numpy(values) for values in inkling_positions(first))
                distance = queries[:, None] - keys_[None, :]
                position_ids = queries[None, :].expand(2, -1)
                bias = module(hidden, distance, position_ids)
                printed[f"log_scaling={log_scaling},first={first}"] = bias.numpy().astype(float).tolist()
    log_scale = inkling2.Inkling2LogScale(config)
    positions = torch.tensor([[0, 62, 63, 64, 1000, 2**17 - 1, 2**20, 2**24 + 1, 2**31 - 2]])
    ones = torch.ones(1, positions.shape[1], 1, 1)
    printed["log_scale_positions"] = positions[0].tolist()
    printed["log_scale"] = log_scale(ones, positions)[0, :, 0, 0].numpy().astype(float).tolist()
    stored["inkling"] = {
        "source": f"transformers {transformers.__version__}, torch {torch.__version__}",
        **printed,
    }
    PRINTED.write_text(json.dumps(stored, separators=(",", ":")) + "\n")
    print(sorted(printed))


def deepseek_v4_output():
    """Adds to tests/transformers_5_25.json DeepSeek-V4's inverse rotation of an attention
    output (`apply_rotary_pos_emb(attn_output, cos, -sin)` of `DeepseekV4Attention.forward`) at
    some positions, per rope label, run in float64 from the config class's defaults: the last
    `qk_rope_head_dim` features of `fixed_vectors(head_dim)`'s vector (the others pass through)."""
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as deepseek_v4

    stored = json.loads(PRINTED.read_text())
    text = AutoConfig.for_model("deepseek_v4")
    positions = [1, 63, 2**17 - 1]
    vector, _ = fixed_vectors(text.head_dim)
    output = torch.from_numpy(np.broadcast_to(vector, (1, len(positions), 1, text.head_dim)).copy())
    printed = {"positions": positions}
    with float64_everywhere():
        rope = deepseek_v4.DeepseekV4RotaryEmbedding(text).double()
        for label in ("main", "compress"):
            cos, sin = rope(output, torch.tensor([positions]), layer_type=label)
            undone = deepseek_v4.apply_rotary_pos_emb(output, cos, -sin, unsqueeze_dim=2)
            assert torch.equal(undone[..., : -text.qk_rope_head_dim], output[..., : -text.qk_rope_head_dim])
            printed[label] = undone[0, :, 0, -text.qk_rope_head_dim :].numpy().tolist()
    stored["deepseek_v4_output"] = {"source": f"transformers {transformers.__version__}", **printed}
    PRINTED.write_text(json.dumps(stored, separators=(",", ":")) + "\n")
    print(sorted(printed))


# Token ids of the Omni batches (the Qwen2.5-Omni tokenizer's): text, the vision and audio
# brackets, image, video and audio tokens; and their `mrope_positions` token types.
OMNI_TOKENS = {"text": 9, "vision_bos": 151652, "vision_eos": 151653, "audio_bos": 151647,
               "audio_eos": 151648, "image": 151655, "video": 151656, "audio": 151646}  # fmt: skip
OMNI_TYPES = {"image": 1, "video": 2, "audio": 3}


def omni_batches(model_type, audio_tokens):
    """The Omni batches: (rows of token names, grids, seconds per grid, audio feature lengths,
    use_audio_in_video). Audio in a video is interleaved as the model's processor does it:
    Qwen2.5-Omni by chunks of 2 s (50 ids), a chunk's video then its audio; Qwen3-Omni by
    time, a video frame before the audio at its time."""
    length = 100  # audio feature frames
    count = audio_tokens(length)
    seconds = 1 / 3 if model_type == "qwen2_5_omni" else 0.4

    def video(frames, tokens_per_frame, audio=False):
        times = [
            int(np.float32(np.float32(frame) * np.float32(seconds)) * np.float32(25))
            for frame in range(frames)
        ]
        video_ids = [time for time in times for _ in range(tokens_per_frame)]
        if not audio:
            return ["vision_bos"] + ["video"] * len(video_ids) + ["vision_eos"]
        order = []
        if model_type == "qwen2_5_omni":
            for chunk in range(max(max(video_ids), count - 1) // 50 + 1):
                order += ["video" for time in video_ids if chunk * 50 <= time < (chunk + 1) * 50]
                order += ["audio" for time in range(count) if chunk * 50 <= time < (chunk + 1) * 50]
        else:
            v = a = 0
            while v < len(video_ids) and a < count:
                if video_ids[v] <= a:
                    order.append("video")
                    v += 1
                else:
                    order.append("audio")
                    a += 1
            order += ["video"] * (len(video_ids) - v) + ["audio"] * (count - a)
        return ["vision_bos", "audio_bos"] + order + ["audio_eos", "vision_eos"]

    image = ["vision_bos"] + ["image"] * 4 + ["vision_eos"]  # a 1 x 4 x 4 image, merged 2 x 2
    audio = ["audio_bos"] + ["audio"] * count + ["audio_eos"]
    plain = (
        [["text"] * 3 + image + ["text"] * 2 + audio + ["text"] + video(3, 4) + ["text"] * 2,
         ["pad"] * 9 + ["text"] * 2 + video(2, 1) + ["text"] * 2],
        {"image": [[1, 4, 4]], "video": [[3, 4, 4], [2, 2, 2]]},
        [seconds, seconds],
        [length],
        False,
    )  # fmt: skip
    in_video = (
        [["text"] * 2 + image + ["text"] * 2 + video(3, 4, audio=True) + ["text"] * 3],
        {"image": [[1, 4, 4]], "video": [[3, 4, 4]]},
        [seconds],
        [length],
        True,
    )
    return {"plain": plain, "audio_in_video": in_video}


def omni():
    """Adds to tests/transformers_5_25.json the M-RoPE ids and deltas of the Omni models'
    `get_rope_index` (Qwen2.5-Omni's and Qwen3-Omni's thinkers, transformers 5.25) on
    `omni_batches`, called on the model class with its config's token ids."""
    import types

    from transformers.models.qwen2_5_omni import modeling_qwen2_5_omni as qwen2_5
    from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as qwen3

    stored = json.loads(PRINTED.read_text())
    printed = {}
    classes = {
        "qwen2_5_omni": (qwen2_5.Qwen2_5OmniPreTrainedModelForConditionalGeneration, 100,
                         lambda n: ((n - 1) // 2 + 1 - 2) // 2 + 1),
        "qwen3_omni_moe": (qwen3.Qwen3OmniMoePreTrainedModelForConditionalGeneration, 50,
                           lambda n: int(qwen3._get_feat_extract_output_lengths(torch.tensor(n), 50))),
    }  # fmt: skip
    for model_type, (model_class, n_window, audio_tokens) in classes.items():
        config = types.SimpleNamespace(
            image_token_id=OMNI_TOKENS["image"], video_token_id=OMNI_TOKENS["video"],
            audio_token_id=OMNI_TOKENS["audio"], vision_start_token_id=OMNI_TOKENS["vision_bos"],
            audio_start_token_id=OMNI_TOKENS["audio_bos"], position_id_per_seconds=25, seconds_per_chunk=2,
            audio_config=types.SimpleNamespace(n_window=n_window),
        )  # fmt: skip
        model = types.SimpleNamespace(config=config, spatial_merge_size=2)
        for name in ("get_llm_pos_ids_for_vision", "get_chunked_index"):
            setattr(model, name, types.MethodType(getattr(model_class, name), model))
        for batch_name, (rows, grids, seconds, lengths, in_video) in omni_batches(
            model_type, audio_tokens
        ).items():
            width = max(len(row) for row in rows)
            rows = [["pad"] * (width - len(row)) + row for row in rows]
            ids = torch.tensor([[OMNI_TOKENS.get(token, 0) for token in row] for row in rows])
            mask = torch.tensor([[token != "pad" for token in row] for row in rows]).long()
            positions, deltas = model_class.get_rope_index(
                model, ids, torch.tensor(grids["image"]), torch.tensor(grids["video"]), mask,
                use_audio_in_video=in_video, audio_seqlens=torch.tensor(lengths),
                second_per_grids=torch.tensor(seconds),
            )  # fmt: skip
            printed[f"{model_type}/{batch_name}"] = {
                "token_types": [[OMNI_TYPES.get(token, 0) for token in row] for row in rows],
                "attention_mask": mask.tolist(),
                "image_grid_thw": grids["image"],
                "video_grid_thw": grids["video"][: 1 if in_video else 2],
                "second_per_grid_ts": seconds,
                "positions": positions.tolist(),
                "deltas": deltas.tolist(),
            }
            print(model_type, batch_name, positions.dtype, positions[0, 0].tolist())
    stored["omni"] = {"source": f"transformers {transformers.__version__}", **printed}
    PRINTED.write_text(json.dumps(stored, separators=(",", ":")) + "\n")


def layer_types():
    """Adds to tests/transformers_5_25.json the layer types the config classes derive for the
    configs of `fingerprints.LAYER_TYPE_CASES`, as `AutoConfig.for_model(model_type, **case)`
    gives them."""
    stored = json.loads(PRINTED.read_text())
    printed = {}
    for model_type, cases in LAYER_TYPE_CASES.items():
        for case in cases:
            config = AutoConfig.for_model(model_type, **case)
            kinds = getattr(config, "layer_types", None) or config.layers_block_type
            printed.setdefault(model_type, []).append([case, list(kinds)])
            print(model_type, case, kinds, flush=True)
    stored["layer_types"] = {"source": f"transformers {transformers.__version__}", **printed}
    PRINTED.write_text(json.dumps(stored, separators=(",", ":")) + "\n")


def distinct(row):
    """A row of transformers' cosines or sines, one value per rotating pair: the first half of
    `[c, c]`, the even entries of `[c0, c0, c1, c1, ...]`, or the row itself (a complex
    module's)."""
    half = len(row) // 2
    if len(row) % 2 == 0 and np.array_equal(row[:half], row[half:]):
        return row[:half]
    if len(row) % 2 == 0 and np.array_equal(row[0::2], row[1::2]):
        return row[0::2]
    return row


def float32_rows():
    """Adds to tests/transformers_5_25.json, per text model type and rotation the json holds,
    the rows of transformers' rotary module as it runs by default, in float32, at positions 0 to
    63 (M-RoPE: the rows p, 2p + 1 and 3p + 2 modulo 64): each pair's cosine and
    sine at position 63, and the largest difference over positions 0-63 between these float32
    rows and the same module's rows run in float64."""
    stored = json.loads(PRINTED.read_text())
    stored.pop("float32_rows", None)
    found = rotary_text_models()
    printed = {}
    for text_type, entry in sorted(stored["types"].items()):
        rotations_ = {key: value for key, value in entry.get("rotations", {}).items() if "error" not in value}
        if not rotations_ or text_type not in found:
            continue
        parents, module_name = found[text_type]
        text = text_config(text_type, parents)
        model, layers = text_model(text, importlib.import_module(module_name))
        rotary = text_rotary(model, text)
        if rotary is None:
            continue
        layer_types = getattr(text, "layer_types", None) or [None] * len(layers)
        for key, value in rotations_.items():
            kind = value["layer_type"]
            index = layer_types.index(kind) if kind in layer_types else 0
            label = getattr(attention_of(layers[index]), "rope_layer_type", kind)
            results = []
            for wide in (False, True):
                context = float64_everywhere() if wide else contextlib.nullcontext()
                with context:
                    try:
                        rope = type(rotary)(config=text)
                    except TypeError:
                        rope = type(rotary)(text)
                    if wide:
                        rope = rope.double()
                    ids = torch.arange(64)[None]
                    if value["mrope"]:  # three different rows, every id within 0-63
                        ids = torch.stack([ids, (ids * 2 + 1) % 64, (ids * 3 + 2) % 64])
                    extra = (
                        {"layer_type": label}
                        if "layer_type" in inspect.signature(rope.forward).parameters
                        else {}
                    )
                    tokens = torch.zeros(
                        1, 64, text.hidden_size, dtype=torch.float64 if wide else torch.float32
                    )
                    try:
                        embeddings = rope(tokens, ids, **extra)
                    except (KeyError, AttributeError):  # no rope for this layer type
                        break
                if torch.is_tensor(embeddings) and embeddings.is_complex():  # Llama 4's `freqs_cis`
                    embeddings = (embeddings.real, embeddings.imag)
                cos, sin = (np.asarray(rows.detach().numpy()[0], np.float64) for rows in embeddings[:2])
                if not cos[0].any():  # GPT-J's and CodeGen's modules return (sin, cos)
                    cos, sin = sin, cos
                results.append((cos, sin))
            if len(results) < 2:
                continue
            (cos32, sin32), (cos64, sin64) = results
            error = max(np.abs(cos32 - cos64).max(), np.abs(sin32 - sin64).max())
            printed.setdefault(text_type, {})[key] = {
                # float32 values in their shortest decimal form
                "cos_63": [float(str(np.float32(value))) for value in distinct(cos32[63])],
                "sin_63": [float(str(np.float32(value))) for value in distinct(sin32[63])],
                "error_0_63": float(error),
            }
        print(
            text_type,
            {key: value["error_0_63"] for key, value in printed.get(text_type, {}).items()},
            flush=True,
        )
    stored["float32_rows"] = {
        "source": f"transformers {transformers.__version__}, torch {torch.__version__}",
        **printed,
    }
    PRINTED.write_text(json.dumps(stored, separators=(",", ":")) + "\n")


def _head_dim(text):
    try:
        return getattr(text, "head_dim", None)
    except Exception:  # Gemma 4's per-layer keys refuse a global read
        return None


def module_config(text_type, parents, wide=False, switches=None):
    """The text config at `MODULE_SIZES` (the keys it has, a window only where it has one), and
    those overrides with the head size the module builds with, as the test passes them. `wide`
    keeps the default head size (M-RoPE sections, GPT-J's `rotary_dim`): four heads of it.
    `switches`: further keys to set (a variant's)."""
    text = text_config(text_type, parents)
    given = dict(OVERRIDES.get(text_type, {}))
    head_dim = _head_dim(text) or text.hidden_size // text.num_attention_heads
    sizes = dict(MODULE_SIZES, hidden_size=4 * head_dim) if wide else MODULE_SIZES
    for key, value in sizes.items():
        if key == "sliding_window" and getattr(text, key, None) is None:
            continue
        if hasattr(text, key) or key in getattr(type(text), "attribute_map", {}):
            setattr(text, key, value)
            given[key] = value
    if getattr(text, "num_attention_heads_per_layer", None) is not None:
        # Laguna's, derived at init from the class's default heads: the heads set above
        text.num_attention_heads_per_layer = [text.num_attention_heads] * text.num_hidden_layers
    for key, value in (switches or {}).items():
        if "." in key:  # DBRX's `attn_config.clip_qkv`
            outer, inner = key.split(".")
            setattr(getattr(text, outer), inner, value)
        else:
            setattr(text, key, value)
            given[key] = value
    init_only = {key: value for key, value in (switches or {}).items() if key in INIT_ONLY}
    if init_only:  # derived into `per_layer_config` by the class's `__post_init__`: built again
        values = {key: value for key, value in text.to_dict().items() if key != "per_layer_config"}
        text = type(text)(**{**values, **init_only})
        text._attn_implementation = "eager"
    if text_type == "dbrx":  # the attention's own config, which its module reads
        given["attn_config"] = {
            "clip_qkv": text.attn_config.clip_qkv,
            "kv_n_heads": text.attn_config.kv_n_heads,
        }
    if _head_dim(text) is not None and "head_dim" not in given:
        with contextlib.suppress(AttributeError):  # Falcon's derived property
            text.head_dim = int(text.head_dim)
            given["head_dim"] = int(text.head_dim)
    return text, given


def module_output(module, text, rotary, attention, index, layer_type):
    """One attention module's output on `module_input`, with `module_weights` under its own
    state-dict names, in float64; and those names' shapes."""
    torch.manual_seed(0)
    with float64_everywhere():
        try:
            layer = type(attention)(text, index)
        except TypeError:
            try:
                layer = type(attention)(config=text, layer_idx=index)
            except TypeError:  # other constructor arguments (Laguna's, IDEFICS's): the model's own
                layer = copy.deepcopy(attention).to_empty(device="cpu")
                for name, child in list(layer.named_children()):
                    if type(child).__name__.endswith("RotaryEmbedding"):
                        setattr(layer, name, type(child)(text))
        layer = layer.double()
        shapes = {name: list(value.shape) for name, value in layer.state_dict().items()}
        weights = module_weights(shapes)
        layer.load_state_dict({name: torch.tensor(value) for name, value in weights.items()})
        rope = None
        if rotary is not None:
            try:
                rope = type(rotary)(config=text)
            except TypeError:
                rope = type(rotary)(text)
            rope = rope.double()
    width = getattr(getattr(layer, "q_proj", None), "in_features", text.hidden_size)
    hidden = torch.tensor(module_input(width))
    length = len(MODULE_POSITIONS)
    ids = torch.tensor([MODULE_POSITIONS])
    embeddings = None
    if rope is not None:
        extra = (
            {"layer_type": layer_type} if "layer_type" in inspect.signature(rope.forward).parameters else {}
        )
        rope_ids = torch.stack([ids, ids, ids]) if takes_mrope_ids(rope, text) else ids
        with float64_everywhere():
            try:
                embeddings = rope(hidden, rope_ids, **extra)
            except (KeyError, AttributeError):
                embeddings = None  # no rope for this layer type
    window = getattr(layer, "sliding_window", None)
    if window is None and re.search(
        r"sliding_window=(getattr\(self\.config|self\.config\.sliding_window)",
        inspect.getsource(type(layer).forward),
    ):
        window = getattr(
            text, "sliding_window", None
        )  # Mistral's: the module takes the config's, the model masks by it
    if getattr(layer, "is_sliding", True) is False:
        window = None
    q = torch.arange(length)[:, None]
    k = torch.arange(length)[None, :]
    if getattr(layer, "is_causal", True) is False:  # an encoder's: both ways, within its window
        keep = torch.ones(length, length, dtype=torch.bool)
        if window is not None:  # transformers' bidirectional band, |q - k| < the module's window
            keep = (q - k).abs() < int(window)
    else:
        keep = k <= q
        if window is not None:
            keep = keep & (k > q - int(window))
    blocked = torch.full((length, length), torch.finfo(torch.float64).min, dtype=torch.float64)
    mask = torch.where(keep, torch.zeros_like(blocked), blocked)[None, None]
    accepted = inspect.signature(layer.forward).parameters
    arguments = {}
    if "position_embeddings" in accepted:
        withheld = text.model_type in ROWS_WITHHELD and ROWS_WITHHELD[text.model_type] == layer_type
        arguments["position_embeddings"] = None if withheld else embeddings
    if "position_ids" in accepted:
        arguments["position_ids"] = ids
    if "attention_mask" in accepted:
        arguments["attention_mask"] = mask
    if "shared_kv_states" in accepted:
        arguments["shared_kv_states"] = {}
    if "layer_idx" in accepted:  # Zamba2's shared attention, told which layer calls it
        arguments["layer_idx"] = layer.layer_idx
    layer.eval()
    with torch.no_grad(), float64_everywhere():
        output = layer(hidden, **arguments)
    output = output[0] if isinstance(output, tuple) else output
    return {
        "layer_index": index,
        "layer_type": layer_type,
        "window": None if window is None else int(window),
        "class": type(layer).__name__,
        "shapes": shapes,
        "output": [float(f"{value:.12g}") for value in output.double().numpy().ravel()],
    }


def module_entry(module, text_type, parents, wide, switches=None):
    entry = {}
    try:
        text, given = module_config(text_type, parents, wide, switches)
        model, layers = text_model(text, module)
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"[:200]}
    entry["config"] = given
    rotary = text_rotary(model, text)
    layer_types = getattr(text, "layer_types", None) or [None] * len(layers)
    entry["layers"] = {}
    for index, layer in enumerate(layers):
        attention = attention_of(layer)
        if attention is None or re.search(
            "Linear|Lightning|Delta|Cross|Mamba|Conv", type(attention).__name__
        ):
            continue
        kind = layer_types[index] if index < len(layer_types) else None
        key = f"{type(attention).__name__}:{kind}"
        if key in entry["layers"]:
            continue
        try:
            entry["layers"][key] = module_output(module, text, rotary, attention, index, kind)
        except Exception as error:
            entry["layers"][key] = {"layer_index": index, "error": f"{type(error).__name__}: {error}"[:200]}
    return entry


def modules(only=()):
    """Every text model type's distinct attention modules (by class and layer type), run whole:
    projections, norms, biases, rotation, mask and output, as `module_output` says."""
    stored = json.loads(MODULES.read_text()) if only and MODULES.exists() else {}
    printed = stored.get("types", {})
    models = {**rotary_text_models(), **ENCODER_MODULES}
    for text_type, (parents, module_name) in sorted(models.items()):
        if only and text_type not in only:
            continue
        module = importlib.import_module(module_name)
        for wide in (False, True):
            entry = printed[text_type] = module_entry(module, text_type, parents, wide)
            if "error" not in entry and not any("error" in layer for layer in entry["layers"].values()):
                break
        layers = entry.get("layers", {})
        print(
            text_type,
            entry.get("error"),
            {key: value.get("error", "ok") for key, value in layers.items()},
            flush=True,
        )
        for name, switches in module_variants(text_type, parents).items():
            variant = module_entry(module, text_type, parents, wide, switches)
            printed[f"{text_type}+{name}"] = {"model_type": text_type, **variant}
            layers = variant.get("layers", {})
            print(
                f"{text_type}+{name}",
                variant.get("error"),
                {key: value.get("error", "ok") for key, value in layers.items()},
                flush=True,
            )
    versions = f"transformers {transformers.__version__}, torch {torch.__version__}"
    source = f"{versions}: tools/print_transformers.py modules"
    MODULES.write_text(
        json.dumps({"source": source, "types": dict(sorted(printed.items()))}, separators=(",", ":")) + "\n"
    )


# Encoders whose attention modules `GroupQueryAttention.from_hf_config` reads: (parents, module).
ENCODER_MODULES = {
    name: ((name,), f"transformers.models.{name}.modeling_{name}")
    for name in ("modernbert", "eurobert", "ultrabert", "gte", "jina_embeddings_v3", "nomic_bert")
}

# The switches of the modules' own mechanisms, set in a variant of each type whose config has
# one off by default: biases, query and key norms, the clamp (tighter than the values, so that it
# acts).
MODULE_SWITCHES = {
    "attention_bias": True,
    "attention_out_bias": True,
    "use_qkv_bias": True,
    "use_bias": True,
    "bias": True,
    "qkv_bias": True,
    "add_bias_linear": True,
    "qk_layernorm": True,
    "use_qk_norm": True,
    "clip_qkv": 0.5,
}
# Variants of a type's other layouts, by name.
MODULE_LAYOUTS = {
    "falcon": {
        "new": {"new_decoder_architecture": True, "num_kv_heads": 2, "bias": True},
        "heads": {"multi_query": False, "num_kv_heads": 4, "bias": True},
    },
    "molmo2_text": {"olmo": {"qk_norm_type": "olmo"}},
    # Their masks slide on every attention layer once the config sets a window.
    "minimax": {"window": {"sliding_window": 3}},
    "phi4_multimodal": {"window": {"sliding_window": 3}},
    "dbrx": {"on": {"attn_config.clip_qkv": 0.5}},
    # Keys their modules read that the defaults leave neutral: the keys scaled, a softmax scale of
    # its own (away from `head_dim`).
    "falcon_h1": {"keys": {"key_multiplier": 0.7}},
    "vaultgemma": {"scalar": {"query_pre_attn_scalar": 24}},
    # Keys reused as values on the full layers, with key-value heads and a head size of their own.
    **dict.fromkeys(
        ("gemma4_text", "gemma4_unified_text"),
        {"k_eq_v": {"attention_k_eq_v": True, "num_global_key_value_heads": 1, "global_head_dim": 64}},
    ),
    "diffusion_gemma_text": {"heads": {"num_global_key_value_heads": 1, "global_head_dim": 64}},
    # Query heads per layer, a sliding layer; a gate per feature.
    "laguna": {
        "layers": {
            "layer_types": ["full_attention", "sliding_attention"] * 20,
            "num_attention_heads_per_layer": [4, 6] * 20,
        },
        "features": {"gating": "per-feature"},
    },
}
# Keys a config class's `__post_init__` takes and derives `per_layer_config` from, keeping
# neither (Gemma 4's head size and key-value heads of its full layers).
INIT_ONLY = ("global_head_dim", "num_global_key_value_heads")
# Layers whose decoder gives their attention module no rows (LaraMini's full-attention layers,
# `position_embeddings if layer_type == "sliding_attention" else None`), which it would apply.
ROWS_WITHHELD = {"lara_mini": "full_attention"}


def module_variants(text_type, parents):
    """{name: switches}: "on" (every switch of `MODULE_SWITCHES` the config has, where one is off)
    and the type's `MODULE_LAYOUTS`."""
    try:
        text = text_config(text_type, parents)
    except Exception:
        return {}
    switches = {}
    for key, value in MODULE_SWITCHES.items():
        try:
            current = getattr(text, key)
        except Exception:
            continue
        if key in vars(text) or key in getattr(type(text), "__annotations__", {}):
            if current != value and current is not True:
                switches[key] = value
    if text_type == "dbrx":  # its clamp sits in `attn_config`, set by `text_config`
        switches.pop("clip_qkv", None)
    variants = {"on": switches} if switches else {}
    return {**variants, **MODULE_LAYOUTS.get(text_type, {})}


# The config keys of the attention modules' own mechanisms (`tf_posenc/_hf_attention.py`).
MODULE_KEYS = (
    "num_key_value_heads",
    "attention_bias",
    "attention_out_bias",
    "use_qkv_bias",
    "use_bias",
    "bias",
    "qkv_bias",
    "add_bias_linear",
    "qk_layernorm",
    "use_qk_norm",
    "qk_norm",
    "clip_qkv",
    "attn_logit_softcapping",
    "rms_norm_eps",
    "layer_norm_eps",
    "layer_norm_epsilon",
    "norm_eps",
    "new_decoder_architecture",
    "multi_query",
    "num_kv_heads",
    "qk_norm_type",
    "gating",
    "use_attention_gate",
    "global_attention_scale",
    "key_multiplier",
    "attention_k_eq_v",
    "num_attention_heads_per_layer",
    "v_head_dim",
    "attention_value_scale",
)


def module_defaults():
    """Writes tf_posenc/_hf_module_defaults.py: each text model type's config-class defaults of
    `MODULE_KEYS` (those its config has)."""
    lines, per_layer, from_keys, by_layer, reads = [], {}, {}, {}, {}
    for text_type, (parents, module_name) in sorted(rotary_text_models().items()):
        try:
            text = text_config(text_type, parents)
        except Exception:
            continue
        values = {}
        for key in MODULE_KEYS:
            try:
                value = getattr(text, key)
            except Exception:
                continue
            # None too: a key the class declares without a value is still its own, which
            # `KEYS` tells from one it lacks (a key transformers ignores).
            if value is None or isinstance(value, (bool, int, float, str)):
                values[key] = value
            elif getattr(type(text), "__dataclass_fields__", {}).get(key) is not None:
                # A list its `__post_init__` derives (Laguna's heads per layer): the class's own
                # key, its declared default.
                values[key] = type(text).__dataclass_fields__[key].default
        lines.append(f"    {json.dumps(text_type)}: {{")
        lines.extend(f"        {json.dumps(key)}: {value!r}," for key, value in values.items())
        lines.append("    },")
        sizes = layer_sizes(text)
        if sizes:
            per_layer[text_type] = sizes
        shared = values_from_keys(text_type, parents, importlib.import_module(module_name))
        if shared:
            from_keys[text_type] = shared
        differ = layer_modules(text_type, parents, importlib.import_module(module_name))
        if differ:
            by_layer[text_type] = differ
        keys = module_reads(text_type, parents, importlib.import_module(module_name))
        if keys:
            reads[text_type] = keys
    header = (
        '"""Internal, generated by `python tools/print_transformers.py module_defaults` '
        f"(transformers {transformers.__version__}):\n"
        "each text model type's config-class defaults of the keys its attention module reads\n"
        "(`KEYS`): a key of `KEYS` that a type's config class lacks is absent from its row.\n"
        '"""\n\n'
        f"KEYS = {MODULE_KEYS!r}\n\n"
        "# The model types whose config class is their own and whose modules are another type's\n"
        "# (the classes `AutoModelForCausalLM` builds for them): read as that type, with their own\n"
        "# defaults.\n"
        f"ALIASES = {aliases()!r}\n\n"
        "DEFAULTS = {\n"
    )
    for text_type, (parents, module_name) in sorted(ENCODER_MODULES.items()):  # their reads only
        keys = module_reads(text_type, parents, importlib.import_module(module_name))
        if keys:
            reads[text_type] = keys
    footer = (
        "\n# A default config's head sizes and key-value heads of its own per layer type (its\n"
        "# `per_layer_config`, which a config.json may give, or derive from `global_head_dim` and\n"
        "# `num_global_key_value_heads`).\n"
        f"LAYER_SIZES = {per_layer!r}\n\n"
        "# The layer types whose module has no value projection, its values being the key\n"
        "# projection's output before the key norm and rotation, and the config key that turns\n"
        "# this on (None: always).\n"
        f"VALUES_FROM_KEYS = {from_keys!r}\n\n"
        "# Where a type's attention modules differ by layer type in their key-value heads (a\n"
        "# multiple of the config's `num_key_value_heads`) or in having sinks.\n"
        f"LAYER_MODULES = {by_layer!r}\n\n"
        "# The config keys each type's self-attention modules read in their code (`config.x`,\n"
        '# `getattr(config, "x")`), which `_hf_attention.ACCOUNTED` must account for.\n'
        "# fmt: off\n"
        "MODULE_READS = {\n"
        + "".join(
            f"    {json.dumps(text_type)}: (\n"
            + "".join(
                f"        {line}\n" for line in textwrap.wrap(" ".join(f"{key!r}," for key in keys), 96)
            )
            + "    ),\n"
            for text_type, keys in reads.items()
        )
        + "}\n# fmt: on\n"
    )
    target = ROOT / "tf_posenc" / "_hf_module_defaults.py"
    target.write_text(header + "\n".join(lines) + "\n}\n" + footer)


def layer_sizes(text):
    """{layer type: {key: value}}: the overrides of a default config's `per_layer_config`, where
    every layer of a type has the same."""
    try:
        given = text.to_dict().get("per_layer_config")
    except Exception:
        return {}
    kinds = getattr(text, "layer_types", None)
    if not given or not kinds:
        return {}
    found = {}
    for index, kind in enumerate(kinds):
        overrides = dict(given.get(f"{index:02d}", given.get(str(index), {})) or {})
        if found.setdefault(kind, overrides) != overrides:
            raise ValueError(f"{text.model_type}: layers of type {kind} differ in size")
    return {kind: overrides for kind, overrides in found.items() if overrides}


def module_reads(text_type, parents, module):
    """The config keys the type's self-attention classes read (`config_reads` of each distinct
    class `module_entry` compares), sorted; or None."""
    try:
        text, _ = module_config(text_type, parents)
        _, layers = text_model(text, module)
    except Exception:
        return None
    classes = {type(attention_of(layer)) for layer in layers if attention_of(layer) is not None}
    classes = {
        cls for cls in classes if not re.search("Linear|Lightning|Delta|Cross|Mamba|Mixer|Conv", cls.__name__)
    }
    return sorted({key for cls in classes for key in config_reads(cls)}) or None


def layer_modules(text_type, parents, module):
    """{layer type: {"kv_heads_factor": f, "sinks": bool}} where a type's attention modules, built
    at `module_config`'s sizes, differ by layer type in their key-value heads (as a multiple of
    the config's) or in having sinks (MiMo-V2-Flash's sliding layers); or None."""
    try:
        text, _ = module_config(text_type, parents)
        _, layers = text_model(text, module)
        configured = text.num_key_value_heads
    except Exception:
        return None
    kinds = getattr(text, "layer_types", None)
    if not kinds or not configured:
        return None
    found = {}
    for index, layer in enumerate(layers):
        kind = kinds[index] if index < len(kinds) else None
        attention = attention_of(layer)
        if kind in found or attention is None:
            continue
        shapes = {name: tuple(value.shape) for name, value in attention.named_parameters()}
        head_dim = getattr(attention, "head_dim", None)
        if "k_proj.weight" not in shapes or not head_dim:
            continue
        factor = shapes["k_proj.weight"][0] / head_dim / configured
        found[kind] = {
            "kv_heads_factor": int(factor) if factor.is_integer() else factor,
            "sinks": "sinks" in shapes,
        }
    if len({json.dumps(value, sort_keys=True) for value in found.values()}) <= 1:
        return None
    return found


def values_from_keys(text_type, parents, module):
    """{"key": the config key turning it on or None, "layer_types": [...]}: the layers whose
    attention module has a key projection and no value projection, built with the switch
    `attention_k_eq_v` off and on where the config has it; or None."""
    found = {}
    for switch in (False, True):
        try:
            text, _ = module_config(text_type, parents)
        except Exception:
            return None
        if hasattr(text, "attention_k_eq_v"):
            text.attention_k_eq_v = switch
        elif switch:
            break
        try:
            _, layers = text_model(text, module)
        except Exception:
            return None
        kinds = getattr(text, "layer_types", None) or [None] * len(layers)
        without = set()
        for index, layer in enumerate(layers):
            attention = attention_of(layer)
            names = {name for name, _ in attention.named_parameters()} if attention is not None else set()
            if "k_proj.weight" in names and not any(name.startswith("v_proj.") for name in names):
                without.add(kinds[index] if index < len(kinds) else None)
        found[switch] = sorted(without, key=str)
    if found.get(False):
        return {"key": None, "layer_types": found[False]}
    if found.get(True):
        return {"key": "attention_k_eq_v", "layer_types": found[True]}
    return None


ENCODERS = TESTS / "transformers_encoders_5_25.json"
ENCODER_POSITIONS = [1, 63, 2**17 - 1]  # capped below a model's max_position_embeddings
# Rotary modules that take a row of ids per axis of an image (NeoMME's h and w): printed at
# ids p and 2p + 1, so that both rows show.
TWO_AXES = ("neomme",)


def rotary_other_models():
    """{model type: its modeling module} for the model types (text encoders, speech and audio
    models, towers, sub-configs of multimodal models) whose modeling module defines a
    `*RotaryEmbedding` and which are not a rotary decoder's type or a parent of one."""
    decoders = rotary_text_models()
    taken = set(decoders) | {parent for parents, _ in decoders.values() for parent in parents}
    found = {}
    for model_type in sorted(transformers.models.auto.configuration_auto.CONFIG_MAPPING_NAMES):
        if model_type in taken:
            continue
        name = transformers.models.auto.configuration_auto.model_type_to_module_name(model_type)
        try:
            module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
            if AutoConfig.for_model(model_type).model_type in taken:
                continue  # another name of a decoder's config (`EvollaModel`)
        except Exception:
            continue
        if any(
            inspect.isclass(value) and key.endswith("RotaryEmbedding") and value.__module__ == module.__name__
            for key, value in vars(module).items()
        ):
            found[model_type] = module
    return found


def entries(items, make):
    """`{model_type: make(model_type, value)}` for the `(model_type, value)` pairs of `items`, or
    the error `make` raised, as the printer records one; each printed as it comes."""
    printed = {}
    for model_type, value in items:
        try:
            printed[model_type] = make(model_type, value)
        except Exception as error:
            printed[model_type] = {"error": f"{type(error).__name__}: {error}"[:200]}
        print(model_type, printed[model_type].get("error", "ok"), flush=True)
    return printed


def every_config():
    """`(model_type, its config class's defaults)` for every model type of transformers whose
    config builds from its defaults."""
    for model_type in sorted(transformers.models.auto.configuration_auto.CONFIG_MAPPING_NAMES):
        try:
            yield model_type, AutoConfig.for_model(model_type)
        except Exception:
            continue


def own_rotary(config, module):
    """(key, config, rotary module) for the model type's own rotary module: built from its
    config, else from its first sub-config (`key`) a rotary class of its module builds from,
    the classes not named for vision first."""
    classes = sorted(
        (
            value
            for key, value in vars(module).items()
            if inspect.isclass(value)
            and key.endswith("RotaryEmbedding")
            and value.__module__ == module.__name__
        ),
        key=lambda value: ("Vision" in value.__name__, value.__name__),
    )
    candidates = [(None, config)] + [
        (key, value)
        for key, value in vars(config).items()
        if isinstance(value, transformers.PretrainedConfig)
    ]
    for key, candidate in candidates:
        for rotary_class in classes:
            try:
                with float64_everywhere():
                    return key, candidate, rotary_class(config=candidate).double()
            except Exception:
                continue
    raise RuntimeError("no rotary class of the module builds from the config or a sub-config")


# What a config class needs besides other sizes to validate (sizes tied to the hidden size).
TIED_SIZES = {"gradium_phonon_tts": {"flow_head_config": {"condition_dim": 64}},
              "pocket_tts": {"flow_head_config": {"condition_dim": 64}},
              "dots3_note_audio_encoder": {"adapter_input_size": 64},
              "dots3_note_text": {"num_key_value_heads": 4}}  # fmt: skip


PARENT_GIVES_HEAD_DIM = {"voxtral_realtime_text"}


def derives_head_dim(config):
    """Whether `config`'s class derives `head_dim` from `hidden_size // num_attention_heads` when
    a config gives none: then its default is no default (Mimi's, CSM's, Pixtral's, ...)."""
    try:
        sized = type(config)(hidden_size=64, num_attention_heads=4, **TIED_SIZES.get(config.model_type, {}))
        return sized.head_dim == 16 != config.head_dim
    except Exception:  # EmbeddingGemma 2's head sizes are per layer
        return False


def encoder_entry(model_type, module):
    config = AutoConfig.for_model(model_type)
    key, rotary_config, rope = own_rotary(config, module)
    parameters = getattr(rotary_config, "rope_parameters", None) or {}
    entry = {
        "config_key": key,
        "config_type": getattr(rotary_config, "model_type", None),
        "rotary_class": type(rope).__name__,
        "defaults": {},
    }
    # As a config.json holds them: the class's fields, or their names in its `attribute_map`;
    # not the values its properties derive (ESM C's `head_dim`, hidden_size // heads, follows
    # the config's sizes), and EmbeddingGemma 2's head sizes per layer as the json has them.
    written = rotary_config.to_dict()
    renamed = getattr(type(rotary_config), "attribute_map", {})
    for name in (*READ, "layer_types", "per_layer_config", "local_attention"):
        value = written.get(renamed.get(name, name))
        if value is not None and isinstance(value, (bool, int, float, str, list, dict)):
            entry["defaults"][name] = value
    if "head_dim" in entry["defaults"] and derives_head_dim(rotary_config):
        del entry["defaults"]["head_dim"]
    entry["defaults"]["rope_parameters"] = parameters
    nested = [name for name, value in parameters.items() if isinstance(value, dict)]
    kinds = nested or [None]
    rope_type = (parameters.get(nested[0]) if nested else parameters).get("rope_type")
    entry["rope_type"] = rope_type
    if rope_type == "axial":
        return entry  # a vision tower's rope: `AxialRotaryEmbedding`'s
    limit = getattr(rotary_config, "max_position_embeddings", None) or 2**31
    positions = [min(position, int(limit) - 1) for position in ENCODER_POSITIONS]
    ids = torch.tensor([positions])
    if model_type in TWO_AXES:
        ids = torch.stack([ids, ids * 2 + 1])
        entry["axes"] = 2
    elif takes_mrope_ids(rope, rotary_config):  # GLM-Image's text model: t, h and w ids
        ids = torch.stack([ids, ids * 2 + 1, ids * 3 + 2])
        entry["axes"] = 3
    apply = getattr(module, "apply_rotary_pos_emb", None)
    accepted = inspect.signature(rope.forward).parameters
    entry["positions"], entry["rows"] = positions, {}
    for kind in kinds:
        extra = {"layer_type": kind} if "layer_type" in accepted else {}
        with float64_everywhere():
            cos, sin = rope(torch.zeros(1, len(positions), 1, dtype=torch.float64), ids, **extra)
        # The rows at the last position (largest angles), and the rotated vector there whole
        # and at every position dotted with three unit vectors: as wide as the cosines, or
        # twice (a row per pair: the privacy filter's).
        printed = {"cos": cos[0, -1].tolist(), "sin": sin[0, -1].tolist()}
        for width in (cos.shape[-1], 2 * cos.shape[-1]) if apply is not None else ():
            vector, units = fixed_vectors(width)
            query = torch.tensor(vector).expand(1, 1, len(positions), width).clone()
            try:
                with float64_everywhere():
                    rotated, _ = apply(query, query.clone(), cos, sin)
            except RuntimeError:
                continue
            printed.update(width=width, rotated=rotated[0, 0, -1].tolist())
            printed["dots"] = (rotated[0, 0].numpy() @ units.T).tolist()
            break
        entry["rows"][str(kind)] = printed
    return entry


def encoders():
    """Writes tests/transformers_encoders_5_25.json: for every model type of
    `rotary_other_models`, its rotary module built from its config class's defaults (or its
    first sub-config it builds from), run in float64: the defaults of the keys tf_posenc reads,
    the rows (cos, sin) at the last position, and a fixed vector rotated at each position by
    the module's own `apply_rotary_pos_emb`."""
    printed = entries(rotary_other_models().items(), encoder_entry)
    for entry in printed.values():
        # A composite config whose rotary module is its sub-config's, printed under that type.
        own = printed.get(entry.get("config_type"), {})
        if (
            entry.get("config_key")
            and own.get("config_key", "") is None
            and own["defaults"] == entry["defaults"]
        ):
            for key in ("defaults", "rows", "positions"):
                entry.pop(key, None)
    # The model types whose text model is one of these (ModernVBERT's ModernBERT).
    text_types = {}
    for model_type, config in every_config():
        try:
            text = config.get_text_config()
        except Exception:
            continue
        if (
            model_type not in printed
            and text.model_type != model_type
            and "rows" in printed.get(text.model_type, {})
        ):
            text_types[model_type] = text.model_type
    source = f"transformers {transformers.__version__}, torch {torch.__version__}: "
    source += "tools/print_transformers.py encoders"
    ENCODERS.write_text(
        json.dumps({"source": source, "types": printed, "text_types": text_types}, separators=(",", ":"))
        + "\n"
    )
    encoder_defaults(printed, text_types)


def encoder_defaults(printed, text_types):
    """Writes tf_posenc/_hf_encoder_defaults.py from the printed entries (then `ruff format` it)."""
    own, nested = {}, {}
    for model_type, entry in printed.items():
        if "error" in entry or entry.get("rope_type") == "axial":
            continue
        if "defaults" in entry:
            own[model_type] = entry["defaults"]
        if entry.get("config_key"):
            nested[model_type] = (entry["config_key"], entry["config_type"])
    header = (
        '"""Internal, generated by `python tools/print_transformers.py encoders` '
        f"(transformers {transformers.__version__}):\n"
        "the model types that rotate queries and keys and are not decoders (text encoders, speech\n"
        "and audio models, towers): each one's config-class defaults of the keys tf_posenc reads,\n"
        "and the composite configs whose rotary module is built from a sub-config.\n"
        '"""\n\n'
    )
    body = (
        f"DEFAULTS = {own!r}\n\n"
        f"# model type: (its key, the sub-config's model type)\nSUB_CONFIGS = {nested!r}\n\n"
        f"# model type: its text model's type (its `text_config`)\nTEXT_MODEL_TYPES = {text_types!r}\n"
    )
    target = ROOT / "tf_posenc" / "_hf_encoder_defaults.py"
    target.write_text(header + body)


VISION = TESTS / "transformers_vision_5_25.json"
# Two grids (t, h, w): an image, and a video of 2 frames, each a whole number of merge blocks.
VISION_GRIDS = ([1, 4, 6], [2, 6, 4])


def vision_apply(module):
    """The apply function a vision tower's attention calls."""
    for name in ("apply_multidimensional_rope", "apply_rotary_pos_emb_vision", "apply_rotary_pos_emb"):
        if callable(getattr(module, name, None)):
            return name, getattr(module, name)
    return None, None


SAM_ROTARY_KEYS = (
    "memory_attention_hidden_size",
    "memory_attention_downsample_rate",
    "memory_attention_num_attention_heads",
    "window_size",
    "image_size",
    "patch_size",
)


def vision_entry(model_type, module):
    """A vision config whose rope type is "axial": its rotary module run in float64 at
    `get_vision_position_ids` of each grid, and a vector rotated by the module's apply function."""
    from transformers.vision_utils import get_vision_position_ids

    config = AutoConfig.for_model(model_type)
    key, rotary_config, rope = own_rotary(config, module)
    parameters = getattr(rotary_config, "rope_parameters", None) or {}
    entry = {
        "config_key": key,
        "rotary_class": type(rope).__name__,
        "rope_parameters": parameters,
        "defaults": {},
    }
    written = rotary_config.to_dict()
    for name in (
        "hidden_size",
        "embed_dim",
        "num_attention_heads",
        "num_heads",
        "head_dim",
        "spatial_merge_size",
        # SAM's: the memory attention's head is `memory_attention_hidden_size // (downsample_rate *
        # heads)`; SAM 3's ViT scales its global layers' ids by `window_size / grid`.
        *(SAM_ROTARY_KEYS if type(rope).__name__.startswith(("Sam", "EdgeTam")) else ()),
    ):
        if isinstance(written.get(name), int):
            entry["defaults"][name] = written[name]
    if "head_dim" in entry["defaults"] and derives_head_dim(rotary_config):
        del entry["defaults"]["head_dim"]
    merge = written.get("spatial_merge_size") or 1
    apply_name, apply = vision_apply(module)
    entry["apply"] = apply_name
    entry["grids"] = []
    for grid in VISION_GRIDS:
        thw = torch.tensor([[grid[0], grid[1] * merge, grid[2] * merge]])
        # MiniMax-M3's tower turns (t, h, w): its ids carry the frame.
        temporal = type(rope).__name__.startswith("MiniMaxM3")
        ids = get_vision_position_ids(thw, merge, include_temporal=temporal)
        # (tokens, 2) ids; Gemma 4's module takes a batch of them.
        given = ids[None] if apply_name == "apply_multidimensional_rope" else ids
        with float64_everywhere():
            cos, sin = rope(torch.zeros(1, dtype=torch.float64), given)
        cos, sin = cos.reshape(len(ids), -1), sin.reshape(len(ids), -1)
        width = cos.shape[-1]
        vector, units = fixed_vectors(width)
        query = torch.tensor(vector).expand(len(ids), 1, width).clone()
        printed = {"grid_thw": thw[0].tolist(), "cos": cos[-1].tolist(), "sin": sin[-1].tolist()}
        if apply is not None:
            for shaped in (query, query.permute(1, 0, 2)[None], query[None]):
                try:
                    with float64_everywhere():
                        if apply_name == "apply_multidimensional_rope":  # Gemma 4's: by the ids' axes
                            rotated = apply(shaped, cos[None], sin[None], ids[None])
                        else:
                            rotated, _ = apply(shaped, shaped.clone(), cos, sin)
                except Exception:
                    continue
                rotated = rotated.reshape(len(ids), width)
                printed.update(
                    width=width, rotated=rotated[-1].tolist(), dots=(rotated.numpy() @ units.T).tolist()
                )
                break
        entry["grids"].append(printed)
    return entry


def vision():
    """Writes tests/transformers_vision_5_25.json: for every model type of `rotary_other_models`
    whose rope type is "axial", its rotary module (from its config class's defaults, or its first
    sub-config it builds from) and apply function, run in float64 at two grids' position ids."""
    encoders = json.loads(ENCODERS.read_text())["types"]
    axial = [
        (model_type, module)
        for model_type, module in rotary_other_models().items()
        if encoders.get(model_type, {}).get("rope_type") == "axial"
    ]
    printed = entries(axial, vision_entry)
    # The model types whose `vision_config` is one of these.
    parents = {}
    for model_type, config in every_config():
        vision_config = getattr(config, "vision_config", None)
        if vision_config is not None and vision_config.model_type in printed and model_type not in printed:
            parents[model_type] = vision_config.model_type
    source = f"transformers {transformers.__version__}, torch {torch.__version__}: "
    source += "tools/print_transformers.py vision"
    VISION.write_text(
        json.dumps({"source": source, "types": printed, "parents": parents}, separators=(",", ":")) + "\n"
    )
    header = (
        '"""Internal, generated by `python tools/print_transformers.py vision` '
        f"(transformers {transformers.__version__}):\n"
        'the vision configs whose rope type is "axial": each one\'s config-class defaults of the keys\n'
        "`AxialRotaryEmbedding.from_hf_config` reads, and the model types whose `vision_config` is one.\n"
        '"""\n\n'
    )
    defaults = {
        model_type: {**entry["defaults"], "rope_parameters": entry["rope_parameters"]}
        for model_type, entry in printed.items()
        if "error" not in entry
    }
    body = f"DEFAULTS = {defaults!r}\n\n# model type: its vision config's model type\nPARENTS = {parents!r}\n"
    target = ROOT / "tf_posenc" / "_hf_vision_defaults.py"
    target.write_text(header + body)


# The encoders' plans, printed at small sizes: a window short enough to show in 16 tokens.
ENCODER_PLAN_SIZES = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16,
                      "intermediate_size": 128, "num_hidden_layers": 6}  # fmt: skip
ENCODER_PLAN_WINDOWS = {"modernbert": {"local_attention": 6}}  # its `sliding_window` is half of it
ENCODER_PLAN_TOKENS = 16


@contextlib.contextmanager
def attention_calls(modules):
    """Yields a list that gets, for each call of an attention function (`*attention_forward`) of
    `modules`, what the attention module gave it: its softmax scale and mask, as booleans of
    (queries, keys) of the first example and head (all True where it gave none)."""
    originals = [
        (module, name, value)
        for module in modules
        for name, value in vars(module).items()
        if inspect.isfunction(value) and name.endswith("attention_forward")
    ]
    captured = []

    def capturing(original):
        def attend(*args, **kwargs):
            bound = inspect.signature(original).bind(*args, **kwargs).arguments
            queries, keys, mask = (
                bound["query"].shape[-2],
                bound["key"].shape[-2],
                bound.get("attention_mask"),
            )
            if mask is None:
                allowed = torch.ones(queries, keys, dtype=torch.bool)
            else:
                allowed = mask[0, 0, :, :keys] if mask.dtype == torch.bool else mask[0, 0, :, :keys] == 0
            module = type(bound.get("module")).__name__
            captured.append({"scaling": float(bound["scaling"]), "mask": allowed, "module": module})
            return original(*args, **kwargs)

        return attend

    for module, name, value in originals:
        setattr(module, name, capturing(value))
    try:
        yield captured
    finally:
        for module, name, value in originals:
            setattr(module, name, value)


def encoder_plan(model_type):
    """The mask and softmax scale each attention module of the model of `model_type` is given,
    run on 16 tokens of which the first is padding (so that every mask is materialised)."""
    overrides = {**ENCODER_PLAN_SIZES, **ENCODER_PLAN_WINDOWS.get(model_type, {"sliding_window": 3})}
    written = AutoConfig.for_model(model_type).to_dict()
    # The keys its config has, as a config.json holds them (per-layer ones left as they are).
    overrides = {
        key: value for key, value in overrides.items() if key in written and written[key] is not None
    }
    config = AutoConfig.for_model(model_type, **overrides)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config).double().eval()
    ids = torch.arange(ENCODER_PLAN_TOKENS)[None] + 5  # ordinary tokens, not special ones
    padding = torch.ones_like(ids)
    padding[0, 0] = 0
    with attention_calls([importlib.import_module(type(model).__module__)]) as captured, torch.no_grad():
        model(input_ids=ids, attention_mask=padding)
    if len(captured) != config.num_hidden_layers:
        raise RuntimeError(f"{len(captured)} attention calls for {config.num_hidden_layers} layers")
    layers = []
    for entry in captured:
        # Each real token's keys (the padding column aside), for each real query.
        layers.append({"scaling": entry["scaling"], "mask": entry["mask"][1:, 1:].int().tolist()})
    return {"overrides": overrides, "layer_types": getattr(config, "layer_types", None), "layers": layers}


def encoder_plans():
    """Adds to tests/transformers_encoders_5_25.json each encoder's plan (`encoder_plan`) where
    `AutoModel` builds it from input ids."""
    stored = json.loads(ENCODERS.read_text())
    own = [
        (model_type, None)
        for model_type, entry in stored["types"].items()
        if "defaults" in entry and not entry.get("config_key")
    ]
    stored["plans"] = entries(own, lambda model_type, _: encoder_plan(model_type))
    ENCODERS.write_text(json.dumps(stored, separators=(",", ":")) + "\n")


SPEECH_SIZES = {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "num_hidden_layers": 3}
# The speech and audio models whose plan is read, each with what its tiny model needs besides
# `SPEECH_SIZES`, and its inputs: 16 attention positions, none of them padding (Mimi's and
# Voxtral's masks never see padding; the plan's mask is the one every unpadded input gets).
POCKET_TOKENIZER = {"num_key_value_heads": 4, "head_dim": 16, "sliding_window": 3, "num_filters": 4,
                    "upsampling_ratios": [2, 2], "latent_stride": 2, "latent_dim": 8,
                    "upsample_groups": 64}  # fmt: skip
MIMI = {"num_key_value_heads": 4, "head_dim": 16, "sliding_window": 3, "upsample_groups": 64,
        "num_filters": 8, "upsampling_ratios": [2, 2], "codebook_size": 16, "codebook_dim": 16,
        "num_quantizers": 4, "vector_quantization_hidden_dimension": 16}  # fmt: skip
PE_TINY_DAC = {"downsampling_ratios": [2, 2], "encoder_hidden_size": 4, "codebook_dim": 8,
               "decoder_hidden_size": 16}  # fmt: skip
PE_TINY_VIT = {"model_type": "timm_wrapper", "architecture": "test_vit", "num_labels": 8,
               "model_args": {"img_size": 32}}  # fmt: skip
PE_TINY_SIZES = SPEECH_SIZES
SPEECH_PLANS = {
    "lasr_encoder": ({"num_mel_bins": 16, "subsampling_conv_channels": 32, "conv_kernel_size": 5},
                     lambda: {"input_features": torch.randn(1, 73, 16)}),
    "glmasr_encoder": ({"num_key_value_heads": 4, "num_mel_bins": 16},
                       lambda: {"input_features": torch.randn(1, 16, 32)}),
    "nemotron3_5_transcribe_asr_audio": ({"num_mel_bins": 16},
                                         lambda: {"input_features": torch.randn(1, 128, 16)}),
    "nemotron3_diarization_audio": ({"num_key_value_heads": 4, "num_mel_bins": 8, "subsampling_factor": 2},
                                    lambda: {"input_features": torch.randn(1, 32, 8)}),
    "esm": ({"vocab_size": 33, "position_embedding_type": "rotary", "pad_token_id": 1, "mask_token_id": 32},
            lambda: {"input_ids": torch.arange(16)[None] + 4}),
    "gradium_phonon_tts": ({"num_key_value_heads": 4, "head_dim": 16, "vocab_size": 64,
                            "flow_head_config": {"hidden_size": 32, "num_hidden_layers": 1,
                                                 "condition_dim": 64}},
                           lambda: {"input_ids": torch.arange(16)[None] + 7, "use_cache": False}),
    "pocket_tts": ({"num_key_value_heads": 4, "head_dim": 16,
                    "flow_head_config": {"hidden_size": 32, "num_hidden_layers": 1, "latent_dim": 32,
                                         "condition_dim": 64, "frequency_embedding_size": 16}},
                   lambda: {"input_ids": torch.arange(16)[None] + 5, "use_cache": False}),
    "mimi_encoder": (MIMI,
                     lambda: {"input_values": torch.randn(1, 1, 64)}),
    "voxtral_realtime_encoder": ({"head_dim": 16, "num_mel_bins": 8, "sliding_window": 3},
                                 lambda: {"input_features": torch.randn(1, 8, 32), "use_cache": False}),
    "mimi_decoder": (MIMI,
                     lambda: {"latents": torch.randn(1, 64, 8)}),
    "pocket_tts_audio_tokenizer_encoder": (POCKET_TOKENIZER, lambda: {"input_values": torch.randn(1, 1, 64)}),
    "pocket_tts_audio_tokenizer_decoder": (POCKET_TOKENIZER, lambda: {"latents": torch.randn(1, 64, 8)}),
    "pe_audio_encoder": ({"num_key_value_heads": 4, "head_dim": 16, "dac_config": PE_TINY_DAC},
                         lambda: {"input_values": torch.randn(1, 1, 60)}),  # the class token and 15 frames
    # PE Video's frames through a tiny timm ViT (timm's `test_vit`), then its encoder: the class token
    # and 15 frames. PE Audio-Video's: the audio's and the video's encoders first, then its own.
    "pe_video_encoder": ({"num_key_value_heads": 4, "head_dim": 16, "vision_config": PE_TINY_VIT},
                         lambda: {"pixel_values_videos": torch.randn(1, 15, 3, 32, 32)}),
    "pe_audio_video_encoder": ({"num_key_value_heads": 4, "head_dim": 16,
                                "audio_config": {"num_key_value_heads": 4, "head_dim": 16, **PE_TINY_SIZES,
                                                 "dac_config": PE_TINY_DAC},
                                "video_config": {"num_key_value_heads": 4, "head_dim": 16, **PE_TINY_SIZES,
                                                 "vision_config": PE_TINY_VIT}},
                               lambda: {"input_values": torch.randn(1, 1, 60),
                                        "pixel_values_videos": torch.randn(1, 15, 3, 32, 32)}),
    # Dia's decoder: 16 steps of 9 codebooks attending to 5 encoder states (its cross-attention
    # calls, between its self-attention ones, are left out of the plan).
    "dia_decoder": ({"head_dim": 16, "num_key_value_heads": 4, "vocab_size": 64, "cross_hidden_size": 32,
                     "cross_head_dim": 16, "cross_num_attention_heads": 4, "cross_num_key_value_heads": 4},
                    lambda: {"input_ids": torch.randint(0, 64, (1, 16, 9)),
                             "encoder_hidden_states": torch.randn(1, 5, 32), "cache": None},
                    "transformers.models.dia.modeling_dia.DiaDecoder"),
    "dia_encoder": ({"head_dim": 16, "num_key_value_heads": 4, "vocab_size": 64},
                    lambda: {"input_ids": torch.arange(16)[None] + 5},
                    "transformers.models.dia.modeling_dia.DiaEncoder"),
    "csm_depth_decoder_model": ({"num_key_value_heads": 4, "head_dim": 16, "num_codebooks": 16,
                                 "vocab_size": 32, "backbone_hidden_size": 64, "max_position_embeddings": 17},
                                lambda: {"input_ids": torch.arange(16)[None], "use_cache": False,
                                         "backbone_last_hidden_state": torch.zeros(1, 64)},
                                "transformers.models.csm.modeling_csm.CsmDepthDecoderModel"),
    "dots3_note_audio_encoder": ({"adapter_input_size": 64, "adapter_out_dim": 64, "feature_size": 16,
                                  "downsample_hidden_size": 8},
                                 lambda: {"input_features": torch.randn(1, 16, 128),
                                          "chunk_sample_lengths": torch.tensor([128 * 160])},
                                 "transformers.models.dots3_note.modeling_dots3_note.Dots3NoteAudioModel"),
    "nemotron3_5_transcribe_word_timestamp": ({"num_key_value_heads": 4, "upsampling_factor": 2,
                                               "vocab_size": 10, "blank_token_id": 9},
                                              lambda: {"inputs_embeds": torch.randn(1, 8, 64)}),
    "qwen3_omni_moe_talker_code_predictor": ({"num_key_value_heads": 4, "head_dim": 16, "vocab_size": 100,
                                              "num_code_groups": 4},
                                             lambda: {"inputs_embeds": torch.randn(1, 16, 64),
                                                      "use_cache": False},
                                             "transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe."
                                             "Qwen3OmniMoeTalkerCodePredictorModel"),
    "qwen2_5_omni_talker": ({"embedding_size": 64, "num_key_value_heads": 4, "head_dim": 16,
                             "use_sliding_window": True, "sliding_window": 3, "max_window_layers": 1,
                             "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0,
                                                 "mrope_section": [2, 3, 3]}},
                            lambda: {"input_ids": torch.arange(16)[None] + 5, "use_cache": False},
                            "transformers.models.qwen2_5_omni.modeling_qwen2_5_omni.Qwen2_5OmniTalkerModel"),
    "qwen3_omni_moe_talker_text": ({"num_key_value_heads": 4, "vocab_size": 100, "num_experts": 4,
                                    "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                    "shared_expert_intermediate_size": 32, "sliding_window": 3,
                                    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                                        "mrope_section": [2, 3, 3]}},
                                   lambda: {"inputs_embeds": torch.randn(1, 16, 64), "use_cache": False},
                                   "transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe."
                                   "Qwen3OmniMoeTalkerModel"),
    "blt_patcher": ({"sliding_window": 3}, lambda: {"input_ids": torch.arange(16)[None] + 5},
                    "transformers.models.blt.modeling_blt.BltPatcher"),
}  # fmt: skip


def speech_plan(model_type):
    """The mask and softmax scale each attention module of the tiny model of `model_type` gives
    the attention function, on the inputs `SPEECH_PLANS` holds (16 positions)."""
    extra, inputs, *model_class = SPEECH_PLANS[model_type]  # the class where AutoModel has none
    overrides = {**SPEECH_SIZES, **extra}
    config = AutoConfig.for_model(model_type, **overrides)
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"  # grouped matrix products take no float64
    torch.manual_seed(0)
    if model_class:
        module, name = model_class[0].rsplit(".", 1)
        model = getattr(importlib.import_module(module), name)(config).double().eval()
    else:
        model = transformers.AutoModel.from_config(config).double().eval()
    modules = {importlib.import_module(type(module).__module__) for module in model.modules()}
    given = inputs()
    floats = {
        key for key, value in given.items() if isinstance(value, torch.Tensor) and value.is_floating_point()
    }
    with attention_calls(modules) as captured, torch.no_grad():
        model(**{key: value.double() if key in floats else value for key, value in given.items()})
    if model_type == "pe_audio_video_encoder":  # its audio's and video's encoders run first
        captured = captured[-config.num_hidden_layers :]
    captured = [entry for entry in captured if "Cross" not in entry["module"]]  # Dia's decoder
    if len(captured) != config.num_hidden_layers:
        raise RuntimeError(f"{len(captured)} attention calls for {config.num_hidden_layers} layers")
    layers = [{"scaling": entry["scaling"], "mask": entry["mask"].int().tolist()} for entry in captured]
    return {"overrides": overrides, "layer_types": getattr(config, "layer_types", None), "layers": layers}


def speech_plans():
    """Adds each speech model's plan (`speech_plan`) to tests/transformers_encoders_5_25.json."""
    stored = json.loads(ENCODERS.read_text())
    stored["speech_plans"] = entries(
        [(model_type, None) for model_type in SPEECH_PLANS], lambda t, _: speech_plan(t)
    )
    ENCODERS.write_text(json.dumps(stored, separators=(",", ":")) + "\n")


POSITION_IDS = TESTS / "transformers_position_ids_5_25.json"
# Model types with a learned table of token positions whose rows `position_ids` records, each
# with what its tiny model needs besides `POSITION_SIZES` (and "cache" where a decoder of it
# takes a cache: its second step is recorded too).
POSITION_TYPES = {
    **dict.fromkeys(["albert", "convbert", "distilbert", "fnet", "layoutlm", "mobilebert", "splinter",
                     "squeezebert", "mra", "nystromformer", "yoso", "ernie", "megatron-bert", "rembert",
                     "roc_bert", "electra", "xlm", "flaubert", "roberta-prelayernorm", "camembert",
                     "xlm-roberta", "xlm-roberta-xl", "data2vec-text", "mpnet", "markuplm",
                     "gpt_bigcode", "mbart", "plbart", "mvp", "blenderbot", "blenderbot-small"], {}),
    "bert": {"cache": {"is_decoder": True}},
    "roberta": {"cache": {"is_decoder": True}},
    "gpt2": {"cache": {}},
    "opt": {"cache": {}},
    "bart": {"cache": {}},
    "biogpt": {"cache": {}},
    "big_bird": {"attention_type": "original_full"},
    "lilt": {"hidden_size": 48},
    "esm": {"vocab_size": 100, "position_embedding_type": "absolute", "mask_token_id": 3, "pad_token_id": 1,
            "emb_layer_norm_before": False, "token_dropout": False},
    "bigbird_pegasus": {"attention_type": "original_full"},
    **dict.fromkeys(["bert-generation", "gpt-sw3", "openai-gpt", "visual_bert", "luke"], {}),
    # Text towers, by their model classes (AutoModel builds none from their configs).
    **{f"{name}_text_model": {"class": f"{prefix}TextModel"} for name, prefix in (
        ("clip", "CLIP"), ("siglip", "Siglip"), ("siglip2", "Siglip2"), ("owlvit", "OwlViT"),
        ("owlv2", "Owlv2"), ("groupvit", "GroupViT"), ("clipseg", "CLIPSeg"), ("aimv2", "Aimv2"),
        ("metaclip_2", "MetaClip2"), ("altclip", "AltCLIP"), ("chinese_clip", "ChineseCLIP"),
        ("align", "Align"), ("clap", "Clap"), ("flava", "Flava"), ("blip", "Blip"))},
    "gpt_neo": {"attention_types": [[["global"], 1]], "attention_layers": ["global"], "num_layers": 1},
    "deberta": {"position_biased_input": True},
    "deberta-v2": {"position_biased_input": True},
    "layoutlmv3": {"coordinate_size": 6, "shape_size": 4},
    # They pad their inputs to a multiple of `attention_window` (8 positions here) with pad tokens.
    "longformer": {"attention_window": 4},
    "led": {"attention_window": 4},
    # Tables read otherwise: Whisper's decoder slices its table (its rows are read back from the
    # slice), ProphetNet's decoder reads its table again for its predicting streams (the main
    # stream's read is kept) and steps one token at a time after a cache, CLVP's decoder is its
    # own class, the Decision Transformer embeds states, actions and returns.
    "whisper": {"cache": {}, "num_mel_bins": 4, "max_source_positions": 8},
    "prophetnet": {"cache": {}},
    "clvp_decoder": {"class": "ClvpDecoder", "cache": {}},
    "decision_transformer": {"state_dim": 3, "act_dim": 2, "max_ep_len": 16},
    "git": {"cache": {}},
    "imagegpt": {"cache": {}},
    "trocr": {"class": "TrOCRForCausalLM", "cache": {}},
    **dict.fromkeys(["dpr", "canine", "ibert"], {}),
    "xmod": {"cache": {"is_decoder": True}},
    "xclip_text_model": {"class": "XCLIPTextModel"},
    "bridgetower_text_model": {"class": "bridgetower.BridgeTowerTextModel"},
    "pp_formulanet_text": {"class": "PPFormulaNetTextModel"},
    # Models that take more than token ids (their other inputs tiny and random).
    "bros": {"hidden_size": 256}, "lxmert": {}, "vilt": {"image_size": 32, "patch_size": 16},
    "perceiver": {"class": "PerceiverForMaskedLM"},
}  # fmt: skip
# One of each size under each of its names, small.
POSITION_SIZES = {
    **dict.fromkeys(["hidden_size", "d_model", "n_embd", "dim", "emb_dim", "embedding_size"], 32),
    **dict.fromkeys(["num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers",
                     "decoder_layers"], 1),
    **dict.fromkeys(["num_attention_heads", "n_head", "n_heads", "encoder_attention_heads",
                     "decoder_attention_heads"], 2),
    **dict.fromkeys(["intermediate_size", "encoder_ffn_dim", "decoder_ffn_dim", "ffn_dim", "hidden_dim",
                     "n_inner"], 64),
    **dict.fromkeys(["max_position_embeddings", "n_positions"], 64),
    "vocab_size": 100,
}  # fmt: skip
POSITION_TABLE = re.compile(
    r"(^|\.)(position_embeddings?|embed_positions|wpe|positions_embed|position_embeds_layer|char_position_embeddings)$"
)
PROPHETNET_CACHED = 5  # ProphetNet's decoder: five tokens cached, then one


def position_ids(model_type):
    """The rows of its position table each token reads, in a tiny model of `model_type`: on a
    batch of two rows of six tokens, the first right-padded and the second left-padded (two pad
    tokens each, the attention mask zero there), and for a decoder that caches, on the last three
    after the first three were cached."""
    extra = {key: value for key, value in POSITION_TYPES[model_type].items() if key not in ("cache", "class")}
    model_class = POSITION_TYPES[model_type].get("class")
    defaults = AutoConfig.for_model(model_type)
    written = defaults.to_dict()
    sizes = {key: value for key, value in POSITION_SIZES.items() if isinstance(written.get(key), int)}
    for key in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        if isinstance(written.get(key), int) and written[key] >= 100:  # inside the tiny vocabulary
            sizes[key] = {"pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}.get(key, 3)
    pad = extra.get("pad_token_id", sizes.get("pad_token_id", written.get("pad_token_id")))
    pad = 0 if pad is None else pad
    ids = torch.tensor([[10, 11, 12, 13, pad, pad], [pad, pad, 10, 11, 12, 13]])
    mask = (ids != pad).long()
    size = next((written[key] for key in ("max_position_embeddings", "n_positions", "max_target_positions")
                 if written.get(key) is not None), None)  # fmt: skip
    printed = {"pad_token_id": written.get("pad_token_id"), "max_position_embeddings": size,
               "input_ids": ids.tolist(), "attention_mask": mask.tolist()}  # fmt: skip
    if model_type == "prophetnet":
        printed["cache_past_length"] = PROPHETNET_CACHED
    for run, cache in (("padded", None), ("cache", POSITION_TYPES[model_type].get("cache"))):
        if run == "cache" and cache is None:
            continue
        config = AutoConfig.for_model(model_type, **{**sizes, **extra, **(cache or {})})
        torch.manual_seed(0)
        if model_class:
            found = modeling_class(model_class) if "." in model_class else getattr(transformers, model_class)
            model = found(config).eval()
        else:
            model = transformers.AutoModel.from_config(config).eval()
        tables = {id(module.weight): name for name, module in model.named_modules()
                  if POSITION_TABLE.search(name)
                  and isinstance(getattr(module, "weight", None), torch.Tensor)}  # fmt: skip
        if model_type == "xmod":
            model.set_default_language("en_XX")
        others = {  # what the models take besides `input_ids` and `attention_mask`
            "bros": lambda: {"bbox": torch.rand(2, 6, 4)},
            "lxmert": lambda config=config: {"visual_feats": torch.randn(2, 3, config.visual_feat_dim),
                                             "visual_pos": torch.rand(2, 3, config.visual_pos_dim)},
            "vilt": lambda: {"pixel_values": torch.randn(2, 3, 32, 32)},
        }.get(model_type, dict)()  # fmt: skip
        read = {}
        embedding = torch.nn.functional.embedding

        def recording(indices, weight, *args, tables=tables, read=read, embedding=embedding, **kwargs):
            if id(weight) in tables:
                read.setdefault(tables[id(weight)], []).append(indices.tolist())
            return embedding(indices, weight, *args, **kwargs)

        decoder = {"decoder_input_ids": ids} if config.is_encoder_decoder else {}
        if model_type == "whisper":  # its decoder slices its table: each row holds its index
            features = torch.randn(2, config.num_mel_bins, 2 * config.max_source_positions)
            table = model.decoder.embed_positions
            with torch.no_grad():
                table.weight[:, 0] = torch.arange(table.weight.shape[0], dtype=table.weight.dtype)
            table.register_forward_hook(
                lambda module, args, output, read=read: read.setdefault("decoder.embed_positions", []).append(
                    output[..., 0].long().tolist()
                )
            )
        torch.nn.functional.embedding = recording
        try:
            with torch.no_grad():
                if model_type == "decision_transformer":  # three tokens per step: return, state, action
                    steps = 2
                    timesteps = torch.arange(steps)[None].repeat(2, 1)
                    model(states=torch.randn(2, steps, 3), actions=torch.randn(2, steps, 2),
                          returns_to_go=torch.randn(2, steps, 1), timesteps=timesteps,
                          attention_mask=torch.ones(2, steps, dtype=torch.long))  # fmt: skip
                elif model_type == "whisper":  # no `input_ids`: the decoder's tokens, then three more
                    if run == "padded":
                        model(input_features=features, decoder_input_ids=ids, decoder_attention_mask=mask)
                    else:
                        first = model(input_features=features, decoder_input_ids=ids[:, :3], use_cache=True)
                        read.clear()
                        model(input_features=features, decoder_input_ids=ids[:, 3:],
                              past_key_values=first.past_key_values, use_cache=True)  # fmt: skip
                elif run == "cache" and model_type == "prophetnet":
                    cached = PROPHETNET_CACHED
                    first = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :cached],
                                  use_cache=True)  # fmt: skip
                    read.clear()
                    model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, cached:],
                          past_key_values=first.past_key_values, use_cache=True)  # fmt: skip
                elif run == "padded":
                    model(input_ids=ids, attention_mask=mask, **decoder, **others)
                elif config.is_encoder_decoder:  # the decoder's three tokens, then its next three
                    first = model(
                        input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :3], use_cache=True
                    )
                    read.clear()
                    model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, 3:],
                          past_key_values=first.past_key_values, use_cache=True)  # fmt: skip
                else:
                    first = model(input_ids=ids[:, :3], attention_mask=mask[:, :3], use_cache=True)
                    read.clear()
                    model(
                        input_ids=ids[:, 3:],
                        attention_mask=mask,
                        past_key_values=first.past_key_values,
                        use_cache=True,
                    )
        finally:
            torch.nn.functional.embedding = embedding
        if not read:
            raise RuntimeError("no position table was read")
        # ProphetNet's decoder reads its table first for its main stream, then for the others.
        which = 0 if model_type == "prophetnet" else -1
        printed[run] = {name: calls[which] for name, calls in read.items()}
        if model_type == "whisper":  # its encoder's table is of audio frames, not tokens
            del printed[run]["encoder.embed_positions"]
    return printed


def position_ids_all():
    """Writes tests/transformers_position_ids_5_25.json from `position_ids` of every type."""
    printed = entries(
        [(model_type, None) for model_type in sorted(POSITION_TYPES)], lambda t, _: position_ids(t)
    )
    source = (
        f"transformers {transformers.__version__}, torch {torch.__version__}: tools/print_transformers.py"
    )
    POSITION_IDS.write_text(json.dumps({"source": source, "types": printed}, separators=(",", ":")) + "\n")
    lines = [
        f'"""Generated by `tools/print_transformers.py position_ids` from {source.split(",")[0]}: each model',
        "type's config class defaults of the keys `hf_position_ids` reads (`pad_token_id`, and the table's",
        '`max_position_embeddings`, GPT-2\'s `n_positions`). Internal."""',
        "",
        "DEFAULTS = {",
        *(f"    {t!r}: {{'pad_token_id': {e['pad_token_id']!r}, "
          f"'max_position_embeddings': {e['max_position_embeddings']!r}}},"
          for t, e in printed.items() if "error" not in e),
        "}",
    ]  # fmt: skip
    (ROOT / "tf_posenc" / "_hf_position_defaults.py").write_text("\n".join(lines) + "\n")


DEBERTA = TESTS / "transformers_deberta_5_25.json"
# (bucket_size, max_position): DeBERTa-v3's and SEW-D's (256, 512), and pairs at which a float64
# restatement of the log buckets differs from transformers' float32 at some offset.
DEBERTA_BUCKETS = [(256, 512), (256, 256), (16, 128), (64, 128), (512, 4096)]
DEBERTA_OFFSETS = 20000  # offsets -20000 .. 20000


def deberta():
    """DeBERTa-v2's relative positions: for each pair of `DEBERTA_BUCKETS`, the bucket
    `make_log_bucket_position` gives every offset in +-DEBERTA_OFFSETS (SEW-D's the same), as runs
    `[first offset, bucket]`, each lasting until the next one starts; and two whole outputs of
    `build_relative_position`, plain and bucketed, on 5 queries and 9 keys."""
    from transformers.models.deberta_v2 import modeling_deberta_v2 as deberta_v2
    from transformers.models.sew_d import modeling_sew_d as sew_d

    layer = lambda length: torch.zeros(1, length, 4)  # noqa: E731 (only its length is read)
    offsets = torch.arange(-DEBERTA_OFFSETS, DEBERTA_OFFSETS + 1)
    runs = {}
    for bucket_size, max_position in DEBERTA_BUCKETS:
        # The function `build_relative_position` maps each offset with (a (q, k) matrix of
        # every offset in this range would need 6 GB).
        buckets = deberta_v2.make_log_bucket_position(offsets, bucket_size, max_position).long().tolist()
        sew = sew_d.make_log_bucket_position(offsets, bucket_size, max_position).long().tolist()
        if sew != buckets:
            raise RuntimeError(f"SEW-D's buckets differ from DeBERTa-v2's at {bucket_size, max_position}")
        pairs = enumerate(zip(offsets.tolist(), buckets, strict=True))
        starts = [
            [offset, bucket]
            for index, (offset, bucket) in pairs
            if index == 0 or bucket != buckets[index - 1]
        ]
        runs[f"{bucket_size},{max_position}"] = starts
    whole = {
        "plain": deberta_v2.build_relative_position(layer(5), layer(9)).tolist(),
        "bucketed": deberta_v2.build_relative_position(layer(5), layer(9), 4, 8).tolist(),
    }
    source = f"transformers {transformers.__version__}: models.deberta_v2.build_relative_position"
    DEBERTA.write_text(
        json.dumps({"source": source, "runs": runs, "whole": whole}, separators=(",", ":")) + "\n"
    )


DEBERTA_ATTENTION = TESTS / "transformers_deberta_attention_5_25.json"
DEBERTA_SIZES = {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1}
# DisentangledSelfAttention's switches: the terms, shared or separate position projections, the
# table's LayerNorm, log buckets (small, so that 12 tokens reach them and the table's clip) or
# none, an older config's "p2c|c2p", and no relative attention (the scale
# still counts the terms).
DEBERTA_VARIANTS = {
    "v3": {"relative_attention": True, "position_buckets": 4, "max_relative_positions": 16,
           "pos_att_type": ["p2c", "c2p"], "share_att_key": True, "norm_rel_ebd": "layer_norm"},
    "v3_sizes": {"relative_attention": True, "position_buckets": 256, "max_relative_positions": -1,
                 "pos_att_type": "p2c|c2p", "share_att_key": True, "norm_rel_ebd": "layer_norm"},
    "c2p_separate_plain": {"relative_attention": True, "max_relative_positions": 5, "pos_att_type": ["c2p"]},
    "both_separate": {"relative_attention": True, "position_buckets": 6, "max_relative_positions": 20,
                      "pos_att_type": ["c2p", "p2c"], "norm_rel_ebd": "layer_norm"},
    "p2c_shared": {"relative_attention": True, "position_buckets": 4, "max_relative_positions": 16,
                   "pos_att_type": ["p2c"], "share_att_key": True},
    "no_relative": {"relative_attention": False, "pos_att_type": ["c2p", "p2c"]},
}  # fmt: skip
SEW_D_VARIANT = {"position_buckets": 4, "max_position_embeddings": 16}
DEBERTA_LENGTH = 12
DEBERTA_PADDED = 3  # the second example's last tokens are padding


def deberta_input():
    """The hidden states `(2, DEBERTA_LENGTH, 32)` and the padding mask `(2, DEBERTA_LENGTH)`."""
    hidden = np.random.RandomState(11).standard_normal((2, DEBERTA_LENGTH, DEBERTA_SIZES["hidden_size"]))
    mask = np.ones((2, DEBERTA_LENGTH), dtype=np.int64)
    mask[1, -DEBERTA_PADDED:] = 0
    return hidden, mask


def deberta_attention():
    """DeBERTa-v2's and SEW-D's attention, whole: an encoder of one layer built from each variant's
    config, with `module_weights` under its own names, in float64, on `deberta_input`; the output of
    `attention.self` passed through `attention.output.dense` (the residual LayerNorm after it is
    BERT's). And each config class's effective defaults of the keys the attention reads."""
    from transformers import DebertaV2Config, SEWDConfig
    from transformers.models.deberta_v2 import modeling_deberta_v2 as deberta_v2
    from transformers.models.sew_d import modeling_sew_d as sew_d

    hidden, mask = deberta_input()
    cases = {f"deberta-v2:{name}": (DebertaV2Config, deberta_v2.DebertaV2Encoder, variant)
             for name, variant in DEBERTA_VARIANTS.items()}  # fmt: skip
    cases["sew-d:defaults"] = (SEWDConfig, sew_d.SEWDTransformerEncoder, SEW_D_VARIANT)
    printed = {}
    for name, (config_class, encoder_class, variant) in cases.items():
        given = {**DEBERTA_SIZES, **variant}
        config = config_class(**given)
        torch.manual_seed(0)
        with float64_everywhere():
            encoder = encoder_class(config).double().eval()
            shapes = {key: list(value.shape) for key, value in encoder.state_dict().items()}
            encoder.load_state_dict(
                {key: torch.tensor(value) for key, value in module_weights(shapes).items()}
            )
            states = torch.tensor(hidden)
            attention_mask = encoder.get_attention_mask(torch.tensor(mask))
            relative = encoder.get_rel_pos(states)
            table = encoder.get_rel_embedding()
            attention = encoder.layer[0].attention
            with torch.no_grad():
                context = attention.self(states, attention_mask, relative_pos=relative, rel_embeddings=table)[
                    0
                ]
                output = attention.output.dense(context)
        printed[name] = {
            "config": given,
            "shapes": {
                key: value for key, value in shapes.items() if not key.startswith("layer.0.intermediate")
            },
            "output": [float(f"{value:.12g}") for value in output.numpy().ravel()],
        }
    defaults = {}
    for config_class, module in ((DebertaV2Config, deberta_v2), (SEWDConfig, sew_d)):
        config = config_class(hidden_size=32, num_attention_heads=4, relative_attention=True)
        layer = module.DisentangledSelfAttention(config)
        encoder_class = getattr(module, "DebertaV2Encoder", None) or module.SEWDTransformerEncoder
        encoder = encoder_class(config_class(hidden_size=32, num_attention_heads=4, num_hidden_layers=1))
        whole = config_class().to_dict()
        defaults[whole["model_type"]] = {
            "relative_attention": whole["relative_attention"],
            # The config's value (the module's `getattr` default where the class has none), and
            # what the module makes of it.
            "max_relative_positions": whole.get("max_relative_positions", -1),
            "effective_max_relative_positions": layer.max_relative_positions,
            "position_buckets": layer.position_buckets,
            "pos_att_type": whole["pos_att_type"]
            if whole["pos_att_type"] is None
            else list(whole["pos_att_type"]),
            "share_att_key": layer.share_att_key,
            "norm_rel_ebd": "|".join(encoder.norm_rel_ebd),
            "max_position_embeddings": whole["max_position_embeddings"],
            "hidden_size": whole["hidden_size"],
            "num_attention_heads": whole["num_attention_heads"],
            "layer_norm_eps": whole["layer_norm_eps"],
        }
    source = (
        f"transformers {transformers.__version__}: models.deberta_v2.DebertaV2Encoder and "
        "models.sew_d.SEWDTransformerEncoder, layer.0.attention.self then .output.dense"
    )
    DEBERTA_ATTENTION.write_text(
        json.dumps({"source": source, "cases": printed, "defaults": defaults}, separators=(",", ":")) + "\n"
    )


CONFORMER_ATTENTION = TESTS / "transformers_conformer_attention_5_25.json"
CONFORMER_LENGTH, CONFORMER_PADDED = 9, 3  # the second example's last frames are padding
CONFORMER_SIZES = {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1}
# (config class, attention class, its table's class, the config's keys beyond the sizes)
CONFORMER_CASES = {
    "wav2vec2-conformer": ("Wav2Vec2ConformerConfig", "wav2vec2_conformer.Wav2Vec2ConformerSelfAttention",
                           "wav2vec2_conformer.Wav2Vec2ConformerRelPositionalEmbedding", {}),
    "wav2vec2-bert:relative": ("Wav2Vec2BertConfig", "wav2vec2_bert.Wav2Vec2BertSelfAttention",
                               "wav2vec2_bert.Wav2Vec2BertRelPositionalEmbedding",
                               {"position_embeddings_type": "relative"}),
    "seamless_m4t": ("SeamlessM4TConfig", "seamless_m4t.SeamlessM4TConformerSelfAttention",
                     "seamless_m4t.SeamlessM4TConformerRelPositionalEmbedding",
                     {"speech_encoder_attention_heads": 4}),
    "parakeet_encoder": ("ParakeetEncoderConfig", "parakeet.ParakeetEncoderAttention",
                         "parakeet.ParakeetEncoderRelPositionalEncoding", {"num_key_value_heads": 4}),
    "parakeet_encoder:no_bias": ("ParakeetEncoderConfig", "parakeet.ParakeetEncoderAttention",
                                 "parakeet.ParakeetEncoderRelPositionalEncoding",
                                 {"num_key_value_heads": 4, "attention_bias": False}),
    "nemotron_asr_streaming_encoder": (
        "NemotronAsrStreamingEncoderConfig", "nemotron_asr_streaming.NemotronAsrStreamingEncoderAttention",
        "nemotron_asr_streaming.NemotronAsrStreamingEncoderRelPositionalEncoding",
        {"num_key_value_heads": 4}),
    # The rotary path: the hidden states turn before the query and key projections.
    "wav2vec2-conformer:rotary": (
        "Wav2Vec2ConformerConfig", "wav2vec2_conformer.Wav2Vec2ConformerSelfAttention",
        "wav2vec2_conformer.Wav2Vec2ConformerRotaryPositionalEmbedding",
        {"position_embeddings_type": "rotary"}),
    "wav2vec2-bert:rotary": ("Wav2Vec2BertConfig", "wav2vec2_bert.Wav2Vec2BertSelfAttention",
                             "wav2vec2_bert.Wav2Vec2BertRotaryPositionalEmbedding",
                             {"position_embeddings_type": "rotary", "rotary_embedding_base": 500}),
    "seamless_m4t:rotary": ("SeamlessM4TConfig", "seamless_m4t.SeamlessM4TConformerSelfAttention",
                            "seamless_m4t.SeamlessM4TConformerRotaryPositionalEmbedding",
                            {"speech_encoder_attention_heads": 4, "position_embeddings_type": "rotary"}),
}  # fmt: skip


def conformer_input():
    """The hidden states `(2, CONFORMER_LENGTH, 32)` and the padding mask `(2, CONFORMER_LENGTH)`."""
    hidden = np.random.RandomState(13).standard_normal((2, CONFORMER_LENGTH, CONFORMER_SIZES["hidden_size"]))
    mask = np.ones((2, CONFORMER_LENGTH), dtype=bool)
    mask[1, -CONFORMER_PADDED:] = False
    return hidden, mask


def modeling_class(dotted):
    """transformers' class `folder.Class` of `models/folder/modeling_folder.py`."""
    folder, name = dotted.split(".")
    return getattr(importlib.import_module(f"transformers.models.{folder}.modeling_{folder}"), name)


def conformer_attention():
    """The Conformer encoders' self-attention with Transformer-XL's relative positions, whole: each
    case's attention module built from its config with `module_weights` under its own names, in
    float64 (its table too: built under float64 defaults), on `conformer_input`, given its table
    module's output as its encoder gives it, and the padding as its encoder masks it (keys, as
    `create_bidirectional_mask` gives wav2vec2's; queries and keys, as Parakeet's encoder gives
    it; under SDPA, whose softmax stays float64). And each config class's defaults of the keys
    `MultiHeadAttention.from_hf_config` reads."""
    hidden, mask = conformer_input()
    printed = {}
    for name, (config_name, attention_name, table_name, extra) in CONFORMER_CASES.items():
        model_type = name.split(":")[0]
        given = {**CONFORMER_SIZES, **extra}
        config = getattr(transformers, config_name)(**given)
        config._attn_implementation = "sdpa" if model_type.startswith(("parakeet", "nemotron")) else "eager"
        attention_class, table_class = modeling_class(attention_name), modeling_class(table_name)
        torch.manual_seed(0)
        saved = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            with float64_everywhere():
                if model_type == "seamless_m4t":
                    module = attention_class(config, use_position_embeddings=True)
                elif model_type.startswith(("parakeet", "nemotron")):
                    module = attention_class(config, 0)
                else:
                    module = attention_class(config)
                module = module.double().eval()
                shapes = {key: list(value.shape) for key, value in module.state_dict().items()}
                module.load_state_dict({k: torch.tensor(v) for k, v in module_weights(shapes).items()})
                states = torch.tensor(hidden)
                table = table_class(config).double()(states)
                keep = torch.tensor(mask)
                with torch.no_grad():
                    if model_type.startswith(("parakeet", "nemotron")):
                        pairs = (keep[:, None, :] & keep[:, :, None])[:, None]
                        output = module(states, position_embeddings=table, attention_mask=pairs)[0]
                    else:
                        blocked = torch.where(keep[:, None, None, :], 0.0, torch.finfo(torch.float64).min)
                        output = module(states, attention_mask=blocked, relative_position_embeddings=table)[0]
        finally:
            torch.set_default_dtype(saved)
        printed[name] = {
            "config": given,
            "class": attention_class.__name__,
            "shapes": shapes,
            "output": [float(f"{value:.12g}") for value in output.double().numpy().ravel()],
        }
    defaults = {}
    for model_type in ("wav2vec2-conformer", "wav2vec2-bert", "seamless_m4t", "parakeet_encoder",
                       "nemotron_asr_streaming_encoder"):  # fmt: skip
        whole = transformers.CONFIG_MAPPING[model_type]().to_dict()
        keys = ("hidden_size", "num_attention_heads", "speech_encoder_attention_heads", "num_key_value_heads",
                "attention_bias", "position_embeddings_type", "rotary_embedding_base")  # fmt: skip
        defaults[model_type] = {key: whole[key] for key in keys if key in whole}
    source = f"transformers {transformers.__version__}: the attention classes named per case, forward"
    CONFORMER_ATTENTION.write_text(
        json.dumps({"source": source, "cases": printed, "defaults": defaults}, separators=(",", ":")) + "\n"
    )


DETR_SINE = TESTS / "transformers_detr_sine_5_25.json"
DETR_FEATURES = 8  # per axis: d_model 16


def detr_mask():
    """The pixel mask `(2, 5, 7)` of `detr_sine`: the second example padded at the bottom (2 rows)
    and on the right (2 columns)."""
    mask = np.ones((2, 5, 7), dtype=bool)
    mask[1, 3:, :] = False
    mask[1, :, 5:] = False
    return mask


def detr_sine():
    """The detection models' 2-D sine embeddings on `detr_mask`, from their own classes: the
    DETR family's (float64, each class), Table Transformer's, Grounding DINO's and DAB-DETR's
    (float32 whatever the dtype: their code says so), and RT-DETR's and OmDet-Turbo's mask-free
    tables (float64). Channels first, as transformers returns them."""
    from transformers.models.conditional_detr import modeling_conditional_detr as conditional
    from transformers.models.dab_detr import modeling_dab_detr as dab
    from transformers.models.deformable_detr import modeling_deformable_detr as deformable
    from transformers.models.detr import modeling_detr as detr
    from transformers.models.grounding_dino import modeling_grounding_dino as grounding
    from transformers.models.mask2former import modeling_mask2former as mask2former
    from transformers.models.maskformer import modeling_maskformer as maskformer
    from transformers.models.omdet_turbo import modeling_omdet_turbo as omdet
    from transformers.models.oneformer import modeling_oneformer as oneformer
    from transformers.models.rt_detr import modeling_rt_detr as rt_detr
    from transformers.models.sam2 import modeling_sam2 as sam2
    from transformers.models.table_transformer import modeling_table_transformer as table

    mask = torch.tensor(detr_mask())
    shape = torch.Size([2, 2 * DETR_FEATURES, 5, 7])
    pixels = torch.zeros(2, 3, 5, 7, dtype=torch.float64)
    d = 2 * DETR_FEATURES

    def with_shape(module_class, **options):  # the DETR family's call: (shape, device, dtype, mask)
        return lambda: module_class(DETR_FEATURES, **options)(shape, "cpu", torch.float64, mask.clone())

    grounding_config = transformers.GroundingDinoConfig(d_model=d, positional_embedding_temperature=20)
    dab_config = transformers.DabDetrConfig(hidden_size=d, temperature_height=30, temperature_width=10)
    calls = {
        "detr": with_shape(detr.DetrSinePositionEmbedding, normalize=True),
        "detr:no_mask": lambda: detr.DetrSinePositionEmbedding(DETR_FEATURES, normalize=True)(
            shape, "cpu", torch.float64),
        "detr:not_normalized": with_shape(detr.DetrSinePositionEmbedding),
        "conditional_detr": with_shape(conditional.ConditionalDetrSinePositionEmbedding, normalize=True),
        "maskformer": with_shape(maskformer.MaskFormerSinePositionEmbedding, normalize=True),
        "mask2former": with_shape(mask2former.Mask2FormerSinePositionEmbedding, normalize=True),
        "oneformer": with_shape(oneformer.OneFormerSinePositionEmbedding, normalize=True),
        "sam2": with_shape(sam2.Sam2SinePositionEmbedding, normalize=True),
        "deformable_detr": with_shape(deformable.DeformableDetrSinePositionEmbedding, normalize=True),
        "table-transformer": lambda: table.TableTransformerSinePositionEmbedding(
            DETR_FEATURES, normalize=True)(pixels, mask.clone()),
        "grounding-dino": lambda: grounding.GroundingDinoSinePositionEmbedding(grounding_config)(
            pixels, mask.clone()),
        "dab-detr": lambda: dab.DabDetrSinePositionEmbedding(dab_config)(pixels, mask.clone()),
        "rt_detr": lambda: rt_detr.RTDetrSinePositionEmbedding(embed_dim=d, temperature=10000)(
            width=7, height=5, device=torch.device("cpu"), dtype=torch.float64),
        "omdet-turbo": lambda: omdet.OmDetTurboHybridEncoder.build_2d_sincos_position_embedding(
            7, 5, d, 10000.0, device="cpu", dtype=torch.float64),
        "omdet-turbo:square": lambda: omdet.OmDetTurboHybridEncoder.build_2d_sincos_position_embedding(
            6, 6, d, 10000.0, device="cpu", dtype=torch.float64),
    }  # fmt: skip
    printed = {}
    for name, call in calls.items():
        with torch.no_grad():
            output = call()
        printed[name] = {
            "shape": list(output.shape),
            "dtype": str(output.dtype).replace("torch.", ""),
            "output": [float(f"{value:.17g}") for value in output.double().numpy().ravel()],
        }
    source = f"transformers {transformers.__version__}: each model's sine position embedding class, forward"
    DETR_SINE.write_text(json.dumps({"source": source, "cases": printed}, separators=(",", ":")) + "\n")


SAM_ATTENTION = TESTS / "transformers_sam_attention_5_25.json"
SAM_SIZES = {"hidden_size": 32, "num_attention_heads": 2, "image_size": 16, "patch_size": 4,
             "num_hidden_layers": 3, "window_size": 2}  # fmt: skip
# (config, attention class, the module's window_size or input_size argument, the grid of the call)
SAM_CASES = {
    "sam_vision_model:global": ("SamVisionConfig", "sam.SamVisionSdpaAttention", 0, (1, 4, 4)),
    "sam_vision_model:window": ("SamVisionConfig", "sam.SamVisionSdpaAttention", 2, (3, 2, 2)),
    "sam_vision_model:resized": ("SamVisionConfig", "sam.SamVisionSdpaAttention", 0, (1, 5, 6)),
    "sam_vision_model:no_qkv_bias": ("SamVisionConfig", "sam.SamVisionSdpaAttention", 0, (1, 4, 4)),
    "sam_hq_vision_model:global": ("SamHQVisionConfig", "sam_hq.SamHQVisionSdpaAttention", 0, (1, 4, 4)),
    "vitdet:global": ("VitDetConfig", "vitdet.VitDetAttention", (4, 4), (1, 4, 4)),
    "vitdet:resized": ("VitDetConfig", "vitdet.VitDetAttention", (4, 4), (2, 3, 7)),
}  # fmt: skip


def sam_attention():
    """SAM's and ViTDet's vision attention with decomposed relative positions, whole: each case's
    module from its config with `module_weights` under its own names, in float64 (SAM's SDPA
    classes and ViTDet's, whose softmax stays float64), on a grid of random features; and SAM's and
    SAM 2's random Fourier features of points and of the image-wide grid, with a fixed matrix."""
    printed = {}
    for name, (config_name, attention_name, size, grid) in SAM_CASES.items():
        model_type = name.split(":")[0]
        extra = {"qkv_bias": False} if name.endswith("no_qkv_bias") else {}
        if model_type == "vitdet":
            extra["use_relative_position_embeddings"] = True
        config = getattr(transformers, config_name)(**SAM_SIZES, **extra)
        attention_class = modeling_class(attention_name)
        torch.manual_seed(0)
        with float64_everywhere():
            if model_type == "vitdet":
                module = attention_class(config, input_size=size)
            else:
                module = attention_class(config, window_size=size)
            module = module.double().eval()
            shapes = {key: list(value.shape) for key, value in module.state_dict().items()}
            module.load_state_dict({k: torch.tensor(v) for k, v in module_weights(shapes).items()})
            states = torch.tensor(np.random.RandomState(17).standard_normal((*grid, 32)))
            with torch.no_grad():
                output = module(states)
        output = output[0] if isinstance(output, tuple) else output
        printed[name] = {
            "config": {**SAM_SIZES, **extra},
            "size": list(size) if isinstance(size, tuple) else size,
            "grid": list(grid),
            "class": attention_class.__name__,
            "shapes": shapes,
            "output": [float(f"{value:.12g}") for value in output.double().numpy().ravel()],
        }
    fourier = {}
    matrix = torch.tensor(np.random.RandomState(19).standard_normal((2, 8)))
    points = torch.tensor([[[[10.0, 20.0], [1023.5, 0.0], [511.0, 700.25]]]], dtype=torch.float64)
    for name, class_name in (("sam", "sam.SamPositionalEmbedding"), ("sam2", "sam2.Sam2PositionalEmbedding")):
        module_class = modeling_class(class_name)
        config = (transformers.SamVisionConfig(num_pos_feats=8) if name == "sam"
                  else transformers.Sam2PromptEncoderConfig(hidden_size=16))  # fmt: skip
        module = module_class(config).double()
        with torch.no_grad():
            module.positional_embedding.copy_(matrix)
            shifted = module(points + 0.5, (1024, 1024))  # the prompt encoder's pixel centres
            height, width = 3, 5  # `get_image_wide_positional_embeddings`' grid of cell centres
            grid = torch.ones((height, width), dtype=torch.float64)
            y = (grid.cumsum(dim=0) - 0.5) / height
            x = (grid.cumsum(dim=1) - 0.5) / width
            image_wide = module(torch.stack([x, y], dim=-1))
        fourier[name] = {
            "points": shifted.numpy().ravel().tolist(),
            "image_wide": image_wide.numpy().ravel().tolist(),
        }
    version = transformers.__version__
    source = f"transformers {version}: the attention classes named per case, and *PositionalEmbedding"
    SAM_ATTENTION.write_text(
        json.dumps(
            {"source": source, "cases": printed, "fourier": fourier, "matrix": matrix.numpy().tolist()},
            separators=(",", ":"),
        )
        + "\n"
    )


def ports():
    """What the whole ports of docs/porting.md and docs/encoders.md are checked against: each tiny
    decoder of `port_weights` (eager attention, its weights, in float64) generating 8 tokens
    greedily after `TOKENS[:, :6]`; and the tiny BERT's `last_hidden_state` on its padded batch."""
    from port_weights import (
        BERT,
        BERT_SEGMENTS,
        BERT_TOKENS,
        GEMMA3,
        LLAMA,
        PHI3,
        TOKENS,
        bert_weights,
        weights,
    )

    for name, config in (("llama", LLAMA), ("gemma3", GEMMA3), ("phi3", PHI3)):
        # A padding row inside the tiny vocabulary (Phi-3's default, 32000, is not); it only
        # initialises, and the weights are loaded over it.
        whole = AutoConfig.for_model(**{"pad_token_id": 0, **config})
        whole._attn_implementation = "eager"
        model = transformers.AutoModelForCausalLM.from_config(whole)
        named = weights(config)
        if name == "phi3":  # its checkpoints fuse [q; k; v] and [gate; up]
            for index in range(config["num_hidden_layers"]):
                prefix = f"model.layers.{index}."
                named[prefix + "self_attn.qkv_proj.weight"] = np.concatenate(
                    [named.pop(f"{prefix}self_attn.{role}_proj.weight") for role in "qkv"]
                )
                named[prefix + "mlp.gate_up_proj.weight"] = np.concatenate(
                    [named.pop(f"{prefix}mlp.{role}_proj.weight") for role in ("gate", "up")]
                )
        missing, unexpected = model.load_state_dict(
            {key: torch.tensor(value) for key, value in named.items()}, strict=False
        )
        assert not unexpected and missing == (["lm_head.weight"] if config["tie_word_embeddings"] else [])
        model.tie_weights()
        model = model.to(torch.float64).eval()
        with torch.no_grad():
            tokens = model.generate(
                torch.tensor(TOKENS[:, :6], dtype=torch.long), max_new_tokens=8, do_sample=False,
                pad_token_id=0, eos_token_id=None,
            )  # fmt: skip
        print(name, "greedy:", tokens[0, 6:].tolist())
    whole = AutoConfig.for_model(**BERT)
    whole._attn_implementation = "eager"
    model = transformers.BertModel(whole, add_pooling_layer=False)
    model.load_state_dict({key: torch.tensor(value) for key, value in bert_weights(BERT).items()})
    model = model.to(torch.float64).eval()
    with torch.no_grad():
        output = model(
            input_ids=torch.tensor(BERT_TOKENS, dtype=torch.long),
            attention_mask=torch.tensor(BERT_TOKENS != 0, dtype=torch.long),
            token_type_ids=torch.tensor(BERT_SEGMENTS, dtype=torch.long),
        ).last_hidden_state
    print("bert last_hidden_state[:, :, :4]:", np.round(output.numpy()[:, :, :4], 8).tolist())


PLAIN_ATTENTION = TESTS / "transformers_plain_attention_5_25.json"
# The attention modules without positions inside them, by the state-dict names below the layer's
# attention module: BERT's (`self.` holds the projections, `output.dense` projects out and
# `output.LayerNorm` is the residual's, which follows the layer) and DistilBERT's.
PLAIN_LAYOUTS = {
    "bert": {"query", "key", "value", "output.dense"},
    "distilbert": {"q_lin", "k_lin", "v_lin", "out_lin"},
}
PLAIN_SIZES = {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1, "intermediate_size": 37,
               "dim": 32, "n_heads": 4, "n_layers": 1, "hidden_dim": 37, "embedding_size": 32}  # fmt: skip
# Config values a type's class leaves unset or neutral: ESM's vocabulary, and its checkpoints'
# rotary positions (ESM-2's), whose module then rotates.
PLAIN_OVERRIDES = {
    "esm": {"vocab_size": 33, "pad_token_id": 1, "mask_token_id": 32, "position_embedding_type": "rotary"}
}


def config_reads(module_class):
    """The config keys a class's code reads: `config.x`, `self.config.x`, `getattr(config, "x")`."""
    found = re.findall(
        r"config\.(\w+)|getattr\(\s*(?:self\.)?config,\s*\"(\w+)\"", inspect.getsource(module_class)
    )
    return sorted({plain or gotten for plain, gotten in found})


def plain_attention():
    """The encoders `hf_position_ids` reads whose layers' attention module has a plain layout
    (`PLAIN_LAYOUTS`), run whole in float64 with `module_weights` under their names on
    `deberta_input` (a padded batch): the module's projections, softmax and output projection
    (BERT's `self` then `output.dense`). Each type's config-class defaults of the keys read, and
    its module class, whose mechanism may differ from BERT's under the same names."""
    # The generated table alone: the package itself needs Keras, which this environment lacks.
    table = ROOT / "tf_posenc" / "_hf_position_defaults.py"
    namespace = {}
    exec(table.read_text(), namespace)
    hidden, mask = deberta_input()
    printed, refused = {}, {}
    for model_type in sorted(namespace["DEFAULTS"]):
        try:
            config = AutoConfig.for_model(model_type)
            with float64_everywhere():
                for key, value in PLAIN_SIZES.items():
                    if hasattr(config, key):
                        setattr(config, key, value)
                for key, value in PLAIN_OVERRIDES.get(model_type, {}).items():
                    setattr(config, key, value)
                config._attn_implementation = "eager"
                model = transformers.AutoModel.from_config(config).double().eval()
        except Exception as error:
            print(model_type, "not built:", repr(error)[:100], flush=True)
            continue
        found = [
            (name, module)
            for name, module in model.named_modules()
            if re.fullmatch(r"(.*\.)?(encoder|transformer)\.layer\.0\.attention", name)
        ]
        if len(found) != 1:
            continue
        prefix, attention = found[0]
        children = {
            re.sub(r"^self\.", "", name.rsplit(".", 1)[0]) for name, _ in attention.named_parameters()
        }
        # A norm of the residual beside the attention (BERT's `output.LayerNorm`, a pre-norm's
        # `LayerNorm`) is the block's, outside the prefixes the attention is loaded from.
        norms = {child for child in children if re.search(r"(LayerNorm|\bln|layer_norm)$", child)}
        layout = next((name for name, names in PLAIN_LAYOUTS.items() if children - norms == names), None)
        if layout is None:
            refused[model_type] = (
                f"its attention module `{type(attention).__name__}` holds "
                f"{', '.join(f'`{child}`' for child in sorted(children))}, not a plain attention's weights"
            )
            continue
        shapes = {key: list(value.shape) for key, value in attention.state_dict().items()}
        attention.load_state_dict({key: torch.tensor(value) for key, value in module_weights(shapes).items()})
        states = torch.tensor(hidden)
        pairs = torch.tensor(mask[:, None, :, None] & mask[:, None, None, :]).bool()
        additive = torch.zeros(pairs.shape, dtype=torch.float64).masked_fill(
            ~pairs, torch.finfo(torch.float64).min
        )
        rotary = {}
        if getattr(model, "rotary_embeddings", None) is not None:  # ESM's, made once for the model
            ids = torch.arange(states.shape[1])[None]
            with float64_everywhere():  # its `forward` asks for float32 angles by `.float()`
                rotary = {"position_embeddings": model.rotary_embeddings(states, ids)}
        try:
            with torch.no_grad(), float64_everywhere():
                if layout == "bert":
                    output = attention.output.dense(
                        attention.self(states, attention_mask=additive, **rotary)[0]
                    )
                else:
                    output = attention(states, attention_mask=additive)[0]
        except Exception as error:  # a mechanism of its own (BigBird's blocks): refused by it
            print(model_type, layout, "error:", repr(error)[:100], flush=True)
            refused[model_type] = (
                f"its attention module `{type(attention).__name__}` needs more than hidden states and a "
                f"mask ({str(error).splitlines()[0].rstrip('.')})"
            )
            continue
        module_class = type(attention.self if layout == "bert" else attention)
        printed[model_type] = {
            "layout": layout,
            "class": module_class.__name__,
            # What the module's code reads of its config, and what else its forward takes: a key or
            # an argument beyond BERT's is a mechanism the plain layer lacks.
            "reads": config_reads(module_class),
            "arguments": list(inspect.signature(module_class.forward).parameters)[1:],
            "prefix": prefix + ".",
            "config": {
                key: getattr(config, key)
                for key in ("hidden_size", "num_attention_heads", "dim", "n_heads", "position_embedding_type")
                if hasattr(config, key)
            },  # fmt: skip
            "shapes": shapes,
            "output": [float(f"{value:.12g}") for value in output.numpy().ravel()],
        }
        print(model_type, layout, printed[model_type]["class"], flush=True)
    source = f"transformers {transformers.__version__}: tools/print_transformers.py plain_attention"
    PLAIN_ATTENTION.write_text(json.dumps({"source": source, "types": printed}, separators=(",", ":")) + "\n")
    # The package's facts: each type's layout, what its module reads and takes, and its config
    # class's defaults of the sizes.
    rows = []
    for model_type, entry in printed.items():
        whole = AutoConfig.for_model(model_type)
        sizes = {key: getattr(whole, key) for key in ("hidden_size", "num_attention_heads", "dim", "n_heads")
                 if isinstance(getattr(whole, key, None), int)}  # fmt: skip
        if isinstance(getattr(whole, "position_embedding_type", None), str):
            sizes["position_embedding_type"] = whole.position_embedding_type
        row = {key: entry[key] for key in ("layout", "class", "reads", "arguments")}
        rows.append(f"    {model_type!r}: { ({**row, 'defaults': sizes})!r},")
    header = (
        '"""Internal, generated by `python tools/print_transformers.py plain_attention` '
        f"(transformers {transformers.__version__}):\n"
        "the encoders whose attention module has a plain layout (BERT's, DistilBERT's): its class, the\n"
        "config keys its code reads, its forward's arguments, and the config class's default sizes.\n"
        '"""\n\n'
        "# ruff: noqa: E501\n\n"
        "TYPES = {\n"
    )
    target = ROOT / "tf_posenc" / "_hf_plain_defaults.py"
    refusals = "".join(f"    {name!r}: {reason!r},\n" for name, reason in sorted(refused.items()))
    footer = (
        "\n# The encoders of `hf_position_ids` whose layers' attention module is not plain, by what it\n"
        "# does (the texts are long: ruff's line length is off for this file).\n"
        f"REFUSED = {{\n{refusals}}}\n"
    )
    target.write_text(header + "\n".join(rows) + "\n}\n" + footer)  # then `ruff format` it


LATENT = TESTS / "transformers_latent_attention_5_25.json"
# Latent attention at its smallest: every MLA config class takes these (LongCat-Flash's and
# dots.llm3's rotary `head_dim` and Mistral 4's whole head follow from them, `LATENT_OVERRIDES`).
LATENT_SIZES = {
    "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 12,
    "kv_lora_rank": 16, "qk_nope_head_dim": 12, "qk_rope_head_dim": 4, "v_head_dim": 8,
    "num_hidden_layers": 8, "index_n_heads": 4, "index_head_dim": 8, "index_topk": 3,
    "rms_norm_eps": 3e-6,  # apart from every norm's own default, so that `latent_facts` sees which it reads
}  # fmt: skip
LATENT_OVERRIDES = {
    "longcat_flash": {"head_dim": 4},
    "dots3_note": {"head_dim": 16, "swa_num_attention_heads": 2, "swa_num_key_value_heads": 2,
                   "swa_q_lora_rank": 12, "swa_kv_lora_rank": 12, "swa_head_dim": 16,
                   "swa_qk_nope_head_dim": 8, "swa_v_head_dim": 8, "sliding_window": 3},
    "glm5_next": {"qk_rope_head_dim": 0, "index_kpool": 1},
    "hy_v4_vl": {"qk_rope_head_dim": 6,
                 "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default",
                                     "mrope_section": [1, 1, 1]}},
    "mistral_large4": {"index_topk": 3},
}  # fmt: skip
# Each variant's config keys, where the type's config class has them (`rope_interleave`,
# `q_lora_rank=None` where its module builds `q_proj`).
LATENT_VARIANTS = {
    "q_proj": {"q_lora_rank": None},
    "flip": "rope_interleave",
    "yarn": {"rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                 "original_max_position_embeddings": 256, "mscale": 1.0,
                                 "mscale_all_dim": 0.8, "beta_fast": 32.0, "beta_slow": 1.0}},
    "bias": {"attention_bias": True},
}  # fmt: skip


def latent_types():
    """{model type: its text config's type}: every config class of transformers with
    `kv_lora_rank` (DeepSeek's latent attention), found among all config classes."""
    found = {}
    for model_type in sorted(transformers.models.auto.configuration_auto.CONFIG_MAPPING_NAMES):
        try:
            text = AutoConfig.for_model(model_type).get_text_config(decoder=True)
        except Exception:
            continue
        if "kv_lora_rank" in vars(type(text)).get("__annotations__", {}) or hasattr(text, "kv_lora_rank"):
            found.setdefault(text.model_type, model_type)
    return found


@contextlib.contextmanager
def index_ties():
    """The query rows whose `index_topk` keys an indexer's `topk` picks among tied scores (ReLU's
    zeros): torch orders ties as its kernel happens to, so those rows' outputs are no reference."""
    ambiguous = set()
    original = torch.Tensor.topk

    def topk(self, k, *args, **kwargs):
        values = self.sort(dim=-1, descending=True).values
        if values.shape[-1] > k:
            floor = torch.finfo(values.dtype).min / 2
            tied = (values[..., k - 1] == values[..., k]) & (values[..., k] > floor)
            ambiguous.update(int(row) for row in torch.nonzero(tied.reshape(-1, tied.shape[-1]))[:, 1])
        return original(self, k, *args, **kwargs)

    torch.Tensor.topk = topk
    try:
        yield ambiguous
    finally:
        torch.Tensor.topk = original


def latent_config(text_type, parent, switches):
    """The text config of `parent` built with `LATENT_SIZES`, the type's overrides and
    `switches`, through its constructor (whose checks and derived keys run)."""
    text_class = type(AutoConfig.for_model(parent).get_text_config(decoder=True))
    base = {**LATENT_SIZES, **LATENT_OVERRIDES.get(parent, LATENT_OVERRIDES.get(text_type, {}))}
    given = {**base, **switches}
    text = text_class(**given)
    text._attn_implementation = "eager"
    return text, given


def _source(cls, method="forward"):
    return inspect.getsource(getattr(cls, method)) if cls is not None else ""


def _epsilon(norm):
    return float(getattr(norm, "variance_epsilon", getattr(norm, "eps", None)))


def latent_facts(text, layer, printed):
    """What a latent-attention module does, read from its code and from the module built from
    `text` (whose `rms_norm_eps` is apart from every norm's default): its parameters, how its main
    attention and its indexer rotate, its norms' epsilons, its scale attributes."""
    attention = next(
        child for child in layer.modules()
        if type(child).__name__ == printed["class"]
    )  # fmt: skip
    forward = _source(type(attention))
    if "rope_interleave" in forward:
        rotation = "config"  # `rope_interleave` says
    elif re.search(r"apply_rotary_pos_emb_interleave|view_as_complex|apply_rotary_emb\(", forward):
        rotation = "interleave"
    elif "apply_rotary_pos_emb(" in forward:
        rotation = "half"
    else:
        rotation = None  # no rotation at all
    facts = {
        "parameters": sorted(printed["shapes"]),
        "rotation": rotation,
        "latent_eps": _epsilon(attention.kv_a_layernorm),
        "latent_eps_is_config": _epsilon(attention.kv_a_layernorm) == text.rms_norm_eps,
        "scaling": float(attention.scaling),
        # DeepSeek's `yarn_apply_mscale`: YaRN's mscale_all_dim squared in the softmax scale.
        "yarn_mscale": "yarn_apply_mscale" in _source(type(attention), "__init__"),
        # Every other float scale of the module, by the rank whose sqrt(hidden / rank) it is
        # (LongCat-Flash's and dots.llm3's latents), or None.
        "latent_scales": {
            name: next(
                (rank for rank in sorted(("q_lora_rank", "kv_lora_rank"), key=lambda r: r[:-5] not in name)
                 if math.isclose(value, math.sqrt(text.hidden_size / (getattr(attention, rank, 0) or 1)))),
                None,
            )
            for name, value in sorted(vars(attention).items())
            if isinstance(value, float) and "scal" in name and name != "scaling"
        },
        "forward_arguments": list(inspect.signature(type(attention).forward).parameters)[1:],
    }  # fmt: skip
    indexer = getattr(attention, "indexer", None)
    if indexer is not None:
        source = _source(type(indexer))
        facts["indexer"] = {
            "rope_first": bool(re.search(r"split\(\s*q,\s*\[self\.qk_rope_head_dim", source)),
            "rotation": "interleave" if "apply_rotary_pos_emb_interleave" in source else "half",
            "key_eps": _epsilon(indexer.k_norm),
            "key_eps_is_config": _epsilon(indexer.k_norm) == text.rms_norm_eps,
            "arguments": list(inspect.signature(type(indexer).forward).parameters)[1:],
        }
    return facts


def latent_table(printed):
    """`tf_posenc/_hf_latent_defaults.py`: per latent-attention type, its module class, the
    config keys its code reads with the config class's defaults, and `latent_facts`."""
    rows = []
    for key, entry in sorted(printed.items()):
        if "+" in key or "facts" not in entry:
            continue
        # As the class saves them (a per-layer key, such as dots.llm3's heads, at its global value).
        whole = type(AutoConfig.for_model(entry["parent"]).get_text_config(decoder=True))().to_dict()
        defaults = {}
        for name in entry["reads"]:
            value = whole.get(name)
            if name in whole and (value is None or isinstance(value, (bool, int, float, str, list, dict))):
                defaults[name] = value
        row = {"reads": entry["reads"], "defaults": defaults, "layers": entry["facts"]}
        rows.append(f"    {entry['model_type']!r}: {row!r},")
    header = (
        '"""Internal, generated by `python tools/print_transformers.py latent` '
        f"(transformers {transformers.__version__}):\n"
        "every latent-attention type (DeepSeek's MLA): the config keys its modules' code reads, with\n"
        "its config class's defaults, and per attention class and layer type what the module does\n"
        "(its parameters, rotation, norms' epsilons, scale attributes, indexer).\n"
        '"""\n\n'
        "# ruff: noqa: E501\n\n"
        "TYPES = {\n"
    )
    target = ROOT / "tf_posenc" / "_hf_latent_defaults.py"
    target.write_text(header + "\n".join(rows) + "\n}\n")  # then `ruff format` it


def latent():
    """Every latent-attention type's distinct attention modules (by class and layer type), run
    whole by `module_output` in float64 at `LATENT_SIZES` and in each of `LATENT_VARIANTS` its
    config class takes; and what each module's code reads of its config (the attention, indexer,
    norm and rotary classes of its modeling file)."""
    printed = {}
    for text_type, parent in latent_types().items():
        module_name = transformers.models.auto.configuration_auto.model_type_to_module_name(parent)
        try:
            module = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
        except ImportError:  # SarvamMLA: DeepSeek-V3's modules, as `AutoModelForCausalLM` builds them
            built = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[parent]
            module = importlib.import_module(getattr(transformers, built).__module__)
        classes = [
            value for name, value in sorted(vars(module).items())
            if inspect.isclass(value) and value.__module__ == module.__name__
            and "Vision" not in name
            and (re.search(r"(Indexer|RotaryEmbedding|SoftmaxScaling)$", name)
                 or (re.search(r"(Attention|MLA)$", name)
                     and "kv_a_proj_with_mqa" in inspect.getsource(value)))
        ]  # fmt: skip
        reads = sorted({key for cls in classes for key in config_reads(cls)})
        variants = {"base": {}}
        for name, switches in LATENT_VARIANTS.items():
            try:
                if switches == "rope_interleave":
                    default = getattr(latent_config(text_type, parent, {})[0], "rope_interleave", None)
                    if default is None:
                        continue
                    switches = {"rope_interleave": not default}
                latent_config(text_type, parent, switches)
            except Exception:  # a variant the config class refuses (`q_lora_rank` required)
                continue
            variants[name] = switches
        for name, switches in variants.items():
            key = text_type if name == "base" else f"{text_type}+{name}"
            try:
                text, given = latent_config(text_type, parent, switches)
                if name == "q_proj" and not any(
                    "q_proj" in dict(cls(text, 0).named_children())
                    for cls in classes
                    if cls.__name__.endswith(("Attention", "MLA"))
                ):
                    continue  # the module builds `q_a_proj` whatever the config says
                model, layers = text_model(text, module)
            except Exception as error:
                printed[key] = {"model_type": text_type, "error": f"{type(error).__name__}: {error}"[:300]}
                print(key, printed[key]["error"], flush=True)
                continue
            rotary = text_rotary(model, text)
            layer_types = getattr(text, "layer_types", None) or [None] * len(layers)
            # As a config.json holds it: what a user's config gives the reader.
            saved = json.loads(json.dumps(text.to_dict(), default=str))
            entry = {"model_type": text_type, "parent": parent, "given": given, "config": saved,
                     "reads": reads, "layers": {}}  # fmt: skip
            for index, layer in enumerate(layers):
                found = [
                    child for child in layer.modules()
                    if re.search(r"(Attention|MLA)$", type(child).__name__)
                    and hasattr(child, "kv_a_proj_with_mqa")
                ]  # fmt: skip
                for attention in found[:1]:
                    kind = layer_types[index] if index < len(layer_types) else None
                    label = f"{type(attention).__name__}:{kind}"
                    if label in entry["layers"]:
                        continue
                    try:
                        with index_ties() as ambiguous:
                            entry["layers"][label] = module_output(
                                module, text, rotary, attention, index, kind
                            )
                        if ambiguous:
                            entry["layers"][label]["ambiguous_rows"] = sorted(ambiguous)
                    except Exception as error:
                        entry["layers"][label] = {
                            "layer_index": index, "error": f"{type(error).__name__}: {error}"[:300],
                            "class": type(attention).__name__,
                            "shapes": {k: list(v.shape) for k, v in attention.state_dict().items()},
                        }  # fmt: skip
            if name != "base" and any("error" in value for value in entry["layers"].values()):
                print(key, "not run by transformers itself: left out", flush=True)
                continue
            if name == "base":
                entry["facts"] = {
                    label: latent_facts(text, layers[value["layer_index"]], value)
                    for label, value in entry["layers"].items()
                }  # fmt: skip
            printed[key] = entry
            print(
                key, {label: value.get("error", "ok") for label, value in entry["layers"].items()}, flush=True
            )
    versions = f"transformers {transformers.__version__}, torch {torch.__version__}"
    source = f"{versions}: tools/print_transformers.py latent"
    latent_table(printed)
    LATENT.write_text(
        json.dumps({"source": source, "types": printed}, separators=(",", ":"), default=str) + "\n"
    )


if __name__ == "__main__":
    if sys.argv[1] == "rotations":
        rotations(sys.argv[2:])
    elif sys.argv[1] == "modules":
        modules(sys.argv[2:])
    else:
        verbs = {
            "defaults": defaults,
            "windows": windows,
            "inkling": inkling,
            "deepseek_v4_output": deepseek_v4_output,
            "omni": omni,
            "float32_rows": float32_rows,
            "layer_types": layer_types,
            "module_defaults": module_defaults,
            "encoders": encoders,
            "vision": vision,
            "encoder_plans": encoder_plans,
            "deberta": deberta,
            "deberta_attention": deberta_attention,
            "conformer_attention": conformer_attention,
            "detr_sine": detr_sine,
            "sam_attention": sam_attention,
            "speech_plans": speech_plans,
            "position_ids": position_ids_all,
            "plain_attention": plain_attention,
            "ports": ports,
            "latent": latent,
        }
        verbs[sys.argv[1]]()
