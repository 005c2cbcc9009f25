"""Internal: everything tf_posenc keeps between calls, in one place.

Every store is one of two kinds defined here (`Store`, `PerGraph`), keyed by a named record (a
frozen dataclass) of everything its values depend on, bounded, and guarded by a lock:

- `PROVIDERS` (`Store`, by `ColumnsKey`): each layer configuration's row provider
  (`_rows.RowProvider`, its per-column constants); at most 64, `PROVIDER_BYTES` in all.
- `STEP_PIECES` (`Store`, by `StepsKey`): for eager PyTorch calls, a configuration's 64 steps'
  pieces made on one device in one inference mode; at most `STEP_PIECES_BYTES` in all.
- `SHARED_ROWS`, `CHECKED_STARTS`, `SHARED_BIASES` (`PerGraph`, by `SharedRowsKey`,
  `CheckedStartKey`, `SharedBiasKey`): while a TensorFlow graph is traced, the rows, the start
  check and the attention bias that the graph's layers share at one start tensor; at most
  `PerGraph.PER_GRAPH` of each a graph, gone with the graph.
- Each layer's `_eager.EagerPaths` (by `_eager.CallKey`): its eager fast paths, traced functions
  (TensorFlow), jitted pairs (JAX) in a `Store`, windows of rows (PyTorch); bounds in `_eager`.

The eager paths are the one store per layer rather than per configuration: they hold the
layer's own combination traced (its layout, scale and weights), which layers of one
configuration do not share. What is kept for rows is found through the configuration's key: a
layer asks its provider for rows, and the provider finds its step pieces and shared rows. The
start checks and attention biases are the positions' and the attention layers' (`_positions`,
`layers/multi_head_attention.py`).
"""

import collections
import dataclasses
import threading
import weakref

import keras

from tf_posenc import _tensorflow
from tf_posenc._tensorflow import tf

PROVIDER_BYTES = 16 * 2**20  # the constants of 64 configurations 1024 columns wide take 2 MiB
STEP_PIECES_BYTES = 64 * 2**20  # 2 KiB a column: 32 configurations 1024 columns wide


def device():
    """The device what a call makes is placed on: Keras's device scope (a TensorFlow graph's
    device scope while one is traced), else the backend's default."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return str(jax.config.jax_default_device)  # `keras.device` sets it
    return str(keras.ops.zeros((), "int32").device if backend == "torch" else tf.constant(0).device)


def inference_mode():
    """PyTorch's inference mode: tensors made under it cannot be saved for a backward pass."""
    if keras.backend.backend() != "torch":
        return False
    import torch

    return torch.is_inference_mode_enabled()


@dataclasses.dataclass(frozen=True)
class ColumnsKey:
    """A layer configuration's columns: what its constants depend on."""

    frequencies: tuple  # float64, per column
    quarter_turns: tuple  # 0 for a sine column, 1 for a cosine
    fractions: bool = False  # whether fractional timesteps' constants are built too
    _hash: int = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        # Hashed once: keys holding this one are hashed at every eager PyTorch call that
        # computes rows, and a 1024-wide layer's key has 2048 entries.
        object.__setattr__(self, "_hash", hash((self.frequencies, self.quarter_turns, self.fractions)))

    def __hash__(self):
        return self._hash


@dataclasses.dataclass(frozen=True)
class StepsKey:
    """The 64 steps' pieces of one configuration, made on `device` in PyTorch's `inference_mode`
    or not (a tensor made under it cannot be saved for a training call's backward pass)."""

    columns: ColumnsKey
    device: str
    inference_mode: bool


@dataclasses.dataclass(frozen=True)
class SharedRowsKey:
    """Rows a graph's layers share at one start tensor."""

    columns: ColumnsKey
    length: int
    dtype: str
    scale: float
    device: str


@dataclasses.dataclass(frozen=True)
class CheckedStartKey:
    """The check of one start tensor for calls of one length against one limit."""

    limit: tuple  # `_positions.Limit`: the bound and the argument that sets it
    seq_len: int
    device: str


@dataclasses.dataclass(frozen=True)
class SharedBiasKey:
    """The bias of one bias layer (held: its id cannot be reused) at one start tensor."""

    bias_layer: object
    policy: str
    shape: tuple
    device: str


def _named(key):
    if not (dataclasses.is_dataclass(key) and type(key).__dataclass_params__.frozen):
        raise TypeError(f"A kept value's key must be a frozen dataclass. Received: key={key!r}")
    return key


class Store:
    """An LRU map from named keys to values, at most `entries` of them and `max_bytes` bytes as
    `size(value)` counts them, under a lock. A value larger than `max_bytes` is returned and not
    kept; two threads computing one key's value at once keep the first."""

    def __init__(self, entries, max_bytes, size):
        self.entries, self.max_bytes, self._size = entries, max_bytes, size
        self._values = collections.OrderedDict()  # key -> (value, bytes)
        self._lock = threading.Lock()

    def get(self, key, compute):
        """The value kept for `key`, or `compute()`'s result (kept within the bounds)."""
        _named(key)
        with self._lock:
            kept = self._values.get(key)
            if kept is not None:
                self._values.move_to_end(key)
                return kept[0]
        value = compute()
        size = self._size(value)
        if size > self.max_bytes:
            return value
        with self._lock:
            value = self._values.setdefault(key, (value, size))[0]  # another thread's, if first
            self._values.move_to_end(key)
            while len(self._values) > self.entries or self.kept_bytes > self.max_bytes:
                self._values.popitem(last=False)
        return value

    @property
    def kept_bytes(self):
        return sum(size for _, size in self._values.values())

    def __len__(self):
        return len(self._values)

    def __contains__(self, key):
        return key in self._values

    def clear(self):
        with self._lock:
            self._values.clear()


class PerGraph:
    """What is computed from a tensor of a graph being traced, kept for the rest of the trace:
    layers that work at one `start_index` in one graph (every attention layer of a decoding
    step) share its check and its rows. Each check's `Assert` is stateful, so without this
    every call kept its own copy of the rows, which Grappler merges in a graph but XLA does
    not across keras-hub's `generate` loop.

    Kept by the graph being traced (the default graph: a `while_loop` body or a `cond` branch
    is a graph of its own), the tensor's identity and a named `key` of everything else the
    value depends on, the device scope included (objects in it are held, so their ids cannot
    be reused). Held weakly (the graph, and the tensors, which the graph keeps alive: gone with
    it), at most `PER_GRAPH` values a graph, under a lock.
    """

    PER_GRAPH = 64

    def __init__(self):
        self._graphs = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, tensor, key, compute):
        """The value `compute()` gave for `tensor` and `key` earlier in this graph, or its
        result now (kept for later calls)."""
        graph = tf.compat.v1.get_default_graph()
        key = (id(tensor), _named(key))
        with self._lock:
            kept = self._graphs.setdefault(graph, {})
            given, value = kept.get(key, (lambda: None, lambda: None))
            if given() is tensor and value() is not None:
                return value()
        result = compute()
        with self._lock:
            if len(kept) < self.PER_GRAPH:
                kept[key] = (weakref.ref(tensor), weakref.ref(result))
        return result


def in_graph(tensor):
    """Whether `tensor` is a TensorFlow tensor of a graph being traced (a `tf.function`, a
    Keras graph or XLA step), where `PerGraph` applies."""
    tensorflow = _tensorflow.loaded()  # (without TensorFlow loaded, no tensor is one of its graph's)
    return (
        tensorflow is not None
        and isinstance(tensor, tensorflow.Tensor)
        and not tensorflow.executing_eagerly()
        and hasattr(tensor, "graph")
    )


def _nbytes(value):
    """The bytes of a provider's NumPy constants, or of PyTorch step pieces."""
    if hasattr(value, "nbytes"):
        return int(value.nbytes)
    return value.numel() * value.element_size()


PROVIDERS = Store(entries=64, max_bytes=PROVIDER_BYTES, size=_nbytes)
STEP_PIECES = Store(entries=256, max_bytes=STEP_PIECES_BYTES, size=_nbytes)
SHARED_ROWS = PerGraph()
CHECKED_STARTS = PerGraph()
SHARED_BIASES = PerGraph()
