"""Internal: the eager fast paths of every backend, behind one key.

Run op by op, the exact route dispatches a few hundred small operations; compiled, it is one
call. Eager calls of a layer (`EagerPaths.__call__`) therefore run compiled on TensorFlow and
JAX, and reuse kept rows on PyTorch, whose compiler takes half a minute to trace the route.
Inside a graph (an outer `tf.function`, XLA, a SavedModel or a converter, `jax.jit`,
`torch.compile` or an export's trace) the layers run the steps as they are, so exported graphs
hold the route's operations themselves.

What is kept between calls is keyed by everything the result depends on (`CallKey`): the
combination (a call's add or rotation, or `RotaryEmbedding.rows`), the layer's dtype policy, the
device the rows are made on, PyTorch's inference mode, the inputs' dtype and rank and the sizes
the layer depends on (`kept_axes`). A changed policy, a device scope or an inference-mode call
thus gets what a fresh layer gets. Each store is bounded and guarded by a lock (what else is kept,
per configuration and per graph, is in `_kept`):

- TensorFlow: one traced function per key, traced with every other size left open (every
  length and offset reuses it); at most `KEPT_FUNCTIONS`, the least recently used let go.
- JAX: per key, `jax.jit` of the rows and of their combination, compiled apart so that the rows
  are computed once, not again for every example the add or rotation covers (as XLA's fusion of
  one program would do). `jax.jit` compiles once per shape; a contiguous range's rows are computed
  for its length rounded up to a power of two (at least one block) and sliced, so new lengths pay
  a compile of the route only at each new power of two, and a small one of the combination.
- PyTorch: the rows of block-aligned windows of positions, each one tensor (or one per table),
  as the combination takes them (`_tables`: a rotation's spread cosines and signed sines), in an
  LRU of at most `KEPT_WINDOWS` windows and `KEPT_BYTES` bytes per layer, every kept copy counted.
  A call inside a window slices it; a call outside grows the most recently used window that can
  hold it within the byte cap, by the blocks it lacks and up to `FILLED_BLOCKS` between them
  (decoding steps, ranges that come back: a few calls grow one window over them); any other call
  computes its own blocks. A window larger than the cap is used once and not kept. Rows have the
  same bits however they are asked for, so a kept window holds the call's own rows.

The stores live outside the layer's attributes on purpose: SavedModel export saves the
`tf.function` attributes of a layer, and these are for eager calls only.
"""

import dataclasses
import math
import threading
import types

import keras

from tf_posenc import _kept, _positions, _rows
from tf_posenc._positions import Positions
from tf_posenc._tensorflow import tf

KEPT_FUNCTIONS = 16  # TensorFlow: traced functions per layer (JAX: jitted pairs)
KEPT_BYTES = 8 * 2**20  # PyTorch: bytes of rows per layer, every window counted
KEPT_WINDOWS = 16  # PyTorch: windows per layer, so that a call's search stays short
FILLED_BLOCKS = 8  # PyTorch: blocks a call may compute beyond its own to grow a window


def is_eager(inputs):
    """Whether a layer's call on `inputs` runs eagerly (not traced by any backend's compiler)."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return not isinstance(inputs, jax.core.Tracer)
    if backend == "torch":
        return _positions.values_at_hand()  # not under `torch.compile` or an export's trace
    return tf.executing_eagerly()


@dataclasses.dataclass(frozen=True)
class CallKey:
    """Everything an eager call's result depends on but its positions' values and the sizes of
    the axes not in `kept_sizes`: what the kept functions and rows are found by."""

    combine: str  # the layer method combining rows with the inputs, or "rows"
    kind: str | None  # the positions: None, "start" or "values"
    policy: str  # the layer's dtype policy
    dtype: str  # the inputs'
    device: str  # where the rows are made
    inference_mode: bool  # PyTorch's: its tensors cannot be saved for a backward pass
    rank: int
    kept_sizes: tuple  # (axis, size) of each axis the rows depend on
    positions_spec: tuple = ()  # TensorFlow: the positions' dtype and rank, one function for every shape

    @property
    def sizes(self):
        """The size of each kept axis, by axis."""
        return dict(self.kept_sizes)


def call_key(layer, inputs, kept_axes, combine, kind):
    """The `CallKey` of an eager call of `layer` on `inputs`."""
    rank = len(inputs.shape)
    kept = sorted(axis % rank for axis in kept_axes)
    return CallKey(
        combine=combine,
        kind=kind,
        policy=layer.dtype_policy.name,
        dtype=keras.backend.standardize_dtype(inputs.dtype),
        device=_kept.device(),
        inference_mode=_kept.inference_mode(),
        rank=rank,
        kept_sizes=tuple((axis, inputs.shape[axis]) for axis in kept),
    )


def rounded_length(length):
    """The length JAX computes a contiguous range's rows for: a power of two, at least a block."""
    return max(_rows.STEP, 1 << (length - 1).bit_length())


def _sliced(tables, begin, end):
    """Positions `begin:end` of PyTorch rows or tables (a tuple of them), along their first axis."""
    if isinstance(tables, tuple):
        return tuple(table[begin:end] for table in tables)
    return tables[begin:end]


def _joined(parts):
    """PyTorch rows or tables (tuples of them) of consecutive ranges, as one."""
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], tuple):
        return tuple(keras.ops.concatenate(tables, axis=0) for tables in zip(*parts, strict=True))
    return keras.ops.concatenate(parts, axis=0)


def _bytes(tables):
    tables = tables if isinstance(tables, tuple) else (tables,)
    return sum(table.numel() * table.element_size() for table in tables)


class _Window:
    """Blocks `first .. last` of rows under one key, as one tensor (or a tuple of tensors);
    compared by identity."""

    __slots__ = ("key", "first", "last", "tables", "bytes")

    def __init__(self, key, first, last, tables):
        self.key, self.first, self.last, self.tables = key, first, last, tables
        self.bytes = _bytes(tables)


class EagerPaths:
    """A layer's eager fast paths (see the module docstring); `traces` counts how often the
    route was traced or compiled, `kept_functions`, `kept_windows` and `kept_bytes` what is kept."""

    def __init__(self):
        self._lock = threading.Lock()
        # TensorFlow and JAX: key -> compiled (counted, not measured: a traced function's bytes
        # are TensorFlow's and JAX's to know).
        self._functions = _kept.Store(entries=KEPT_FUNCTIONS, max_bytes=math.inf, size=lambda function: 0)
        self._windows = []  # PyTorch: the kept windows, the least recently used first
        self.traces = 0

    def __deepcopy__(self, memo):
        return EagerPaths()

    @property
    def kept_functions(self):
        return len(self._functions)

    @property
    def kept_windows(self):
        return len(self._windows)

    @property
    def kept_bytes(self):
        return sum(window.bytes for window in self._windows)

    def __call__(self, layer, inputs, positions, kept_axes, combine):
        kind = None if positions is None else ("start" if positions.values is None else "values")
        key = call_key(layer, inputs, kept_axes, combine, kind)
        backend = keras.backend.backend()
        if backend == "jax":
            return self._jax(layer, inputs, positions, key, combine)
        if backend == "torch":
            return self._torch(layer, inputs, positions, key, combine)
        return self._tensorflow(layer, inputs, positions, key, combine)

    def _tensorflow(self, layer, inputs, positions, key, combine):
        kind, rank, kept = key.kind, key.rank, key.sizes
        arguments = [inputs]
        if kind == "start":
            arguments.append(tf.convert_to_tensor(positions.start, tf.int32))
        elif kind == "values":
            arguments.append(positions.values)

        def make():
            specs = [tf.TensorSpec([kept.get(axis) for axis in range(rank)], inputs.dtype)]
            if kind:
                specs.append(tf.TensorSpec([None] * arguments[1].shape.rank, arguments[1].dtype))

            def traced(inputs, where=None):
                self.traces += 1
                positions = None if kind is None else Positions(**{kind: where})
                return getattr(layer, combine)(inputs, layer._rows_for(inputs, positions))

            # The concrete function: calling it skips the signature matching of a `tf.function`.
            # Without AutoGraph: the rows' code branches in Python only, and converting it
            # doubled the cost of a layer's first eager call.
            return tf.function(traced, input_signature=specs, autograph=False).get_concrete_function()

        if kind:  # one function for every shape of positions of a dtype and rank
            key = dataclasses.replace(key, positions_spec=(arguments[1].dtype.name, arguments[1].shape.rank))
        return self._functions.get(key, make)(*arguments)

    def _jax(self, layer, inputs, positions, key, combine):
        import jax

        def make():
            def rows(shape, dtype, positions):
                self.traces += 1
                return layer._rows_for(types.SimpleNamespace(shape=shape, dtype=dtype), positions)

            def combined(inputs, rows, length):
                if length is not None:  # rows of a longer range: the call's are its first
                    rows = rows[..., :length, :]
                return getattr(layer, combine)(inputs, rows)

            return jax.jit(rows, static_argnums=(0, 1)), jax.jit(combined, static_argnums=(2,))

        rows, combined = self._functions.get(key, make)
        shape, rank = tuple(inputs.shape), len(inputs.shape)
        follows = positions is not None and layer._rows_follow_positions()
        axis = layer._sequence_axis(rank) if follows else None
        if not (follows and shape[axis]):
            return combined(inputs, rows(shape, inputs.dtype, positions), None)
        length = shape[axis]
        # The rows of the range rounded up, sliced where they are combined (one compile per new
        # length, of the combination only): the route compiles once per power of two.
        rounded = rounded_length(length)
        kept = key.sizes
        stand_in = tuple(rounded if i == axis else kept.get(i, 1) for i in range(rank))
        if positions.values is not None:
            padding = [(0, 0)] * (len(positions.values.shape) - 1) + [(0, rounded - length)]
            positions = Positions(values=jax.numpy.pad(positions.values, padding))
        return combined(inputs, rows(stand_in, inputs.dtype, positions), length)

    def _torch(self, layer, inputs, positions, key, combine):
        if positions is None or positions.values is not None or not layer._rows_follow_positions():
            return getattr(layer, combine)(inputs, layer._rows_for(inputs, positions))
        shape, axis = tuple(inputs.shape), layer._sequence_axis(len(inputs.shape))
        start, length = int(positions.start), shape[axis]
        if not length:
            return getattr(layer, combine)(inputs, layer._rows_for(inputs, positions))
        first, last = start // _rows.STEP, (start + length - 1) // _rows.STEP
        window = self._window(layer, inputs, key, combine, first, last)
        begin = start - window.first * _rows.STEP
        part = _sliced(window.tables, begin, begin + length)
        if combine == "_combine":
            return layer._combine_tables(inputs, part)
        return getattr(layer, combine)(inputs, part)

    def _window(self, layer, inputs, key, combine, first, last):
        """A window of `key` holding blocks `first .. last`: a kept one, the most recently used
        one that can grow to hold them within the byte budget, at most `FILLED_BLOCKS` blocks
        between them filled in, or a new one; kept within the budgets."""
        with self._lock:
            windows = [window for window in self._windows if window.key == key]
            for window in reversed(windows):
                if window.first <= first and last <= window.last:
                    self._windows = [kept for kept in self._windows if kept is not window] + [window]
                    return window
            joined = None
            for window in reversed(windows):
                low, high = min(first, window.first), max(last, window.last)
                block_bytes = window.bytes // (window.last + 1 - window.first)
                gap = max(window.first - last - 1, first - window.last - 1, 0)
                if gap <= FILLED_BLOCKS and (high + 1 - low) * block_bytes <= KEPT_BYTES:
                    joined = window
                    break
        if joined is None:
            low, high, parts = first, last, [self._blocks(layer, inputs, combine, first, last)]
        else:
            parts = [joined.tables]
            if low < joined.first:
                parts.insert(0, self._blocks(layer, inputs, combine, low, joined.first - 1))
            if high > joined.last:
                parts.append(self._blocks(layer, inputs, combine, joined.last + 1, high))
        window = _Window(key, low, high, _joined(parts))
        with self._lock:
            self._windows = [kept for kept in self._windows if kept is not joined]
            if window.bytes <= KEPT_BYTES:
                self._windows.append(window)
            while len(self._windows) > KEPT_WINDOWS or self.kept_bytes > KEPT_BYTES:
                self._windows.pop(0)  # the least recently used
        return window

    def _blocks(self, layer, inputs, combine, first, last):
        """The rows of blocks `first .. last`, as `combine` takes them, in one run of the route."""
        shape, axis = tuple(inputs.shape), layer._sequence_axis(len(inputs.shape))
        run_shape = shape[:axis] + ((last + 1 - first) * _rows.STEP,) + shape[axis + 1 :]
        self.traces += 1
        rows = layer._rows_for(
            types.SimpleNamespace(shape=run_shape, dtype=inputs.dtype), Positions(start=first * _rows.STEP)
        )
        return layer._tables(rows, len(shape)) if combine == "_combine" else rows
