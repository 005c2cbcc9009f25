"""Internal: the base of every tf_posenc layer, in either Keras family."""

import collections
import types

import keras
import tensorflow as tf

from tf_posenc import _positions, _rows, _validation
from tf_posenc._positions import Positions


def config_entries(layer, *names):
    """`get_config`'s entries of the constructor arguments `names`: each attribute of that name,
    tuples as JSON lists."""
    values = {name: getattr(layer, name) for name in names}
    return {name: list(value) if isinstance(value, tuple) else value for name, value in values.items()}


def build_at_construction(layer):
    """Marks `layer` built when no class of its own defines `build`, as Keras's stateless layers
    are marked: a layer with a `build` of its own (weights to make) is built by it."""
    for klass in type(layer).__mro__:
        if "build" in vars(klass):
            if klass.__name__ == "Layer" and klass.__module__.split(".")[0] in ("keras", "tf_keras"):
                layer.built = True
            return


def _is_eager(inputs):
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return not isinstance(inputs, jax.core.Tracer)
    if backend == "torch":
        return _positions.values_at_hand()  # not under `torch.compile` or an export's trace
    return tf.executing_eagerly()


# Eager PyTorch keeps at most this many bytes of rows per layer and input structure (its
# last four structures): 32 blocks of a 512-wide encoding, 64 of a 128-wide head's tables.
_KEPT_BYTES = 4 * 2**20


def _sliced(tables, begin, end, copy=False):
    """Positions `begin:end` of PyTorch rows or tables (a tuple of them), along their first
    axis; with `copy`, in memory of their own (a view would keep the whole tensor it slices)."""
    if isinstance(tables, tuple):
        return tuple(_sliced(table, begin, end, copy) for table in tables)
    return tables[begin:end].clone() if copy else tables[begin:end]


def _bytes(tables):
    """The bytes PyTorch rows or tables (a tuple of them) take."""
    tables = tables if isinstance(tables, tuple) else (tables,)
    return sum(table.numel() * table.element_size() for table in tables)


class _EagerFunctions:
    """A layer's rows and their combination with the inputs, compiled for eager calls.

    The combination is a method of the layer, named by the caller: `_combine` for a call, and
    for `RotaryEmbedding.rows` the method that hands the rows out as they are.

    Run op by op, the route dispatches a few hundred small operations; compiled, it is one
    call. On TensorFlow, one `tf.function` per input structure (rank, dtype, the sizes the
    layer depends on) computes the rows and combines them, traced with every other size left
    open, so every length and offset reuses it. On JAX, `jax.jit` (which traces once per shape,
    with offsets and positions as traced values) compiles the two steps apart, so that the rows
    are computed once, not again for every example the add or rotation covers (as XLA's fusion
    of one program would do). On PyTorch, whose compiler takes half a minute to trace the route,
    the steps run op by op, and the rows of a contiguous range are kept per 64-position block
    (`_torch`). Inside a graph (an outer `tf.function`, XLA, a SavedModel or a converter,
    `torch.compile` or an export's trace) the layers run the steps as they are, so exported
    graphs hold the route's operations themselves.

    Kept out of the layer's own attributes on purpose: SavedModel export saves the
    `tf.function` attributes of a layer, and these are for eager calls only.
    """

    def __init__(self):
        self._functions = {}
        self._blocks = {}  # PyTorch: by input structure, the kept blocks of rows (`_torch`)
        self._joined = {}  # PyTorch: the blocks the last call joined, and their concatenation
        self.traces = 0  # how often the steps were traced: a test counts them

    def __deepcopy__(self, memo):
        return _EagerFunctions()

    def __call__(self, layer, inputs, positions, kept_axes, combine):
        backend = keras.backend.backend()
        if backend == "jax":
            return self._jax(layer, inputs, positions, combine)
        if backend == "torch":
            return self._torch(layer, inputs, positions, kept_axes, combine)
        return self._tensorflow(layer, inputs, positions, kept_axes, combine)

    def _torch(self, layer, inputs, positions, kept_axes, combine):
        """An eager PyTorch call. PyTorch runs the route op by op (compiling it with
        `torch.compile` takes half a minute on a CPU), so a contiguous range's rows are computed
        for the whole 64-position blocks that hold it and kept per block, as what the
        combination takes (`_tables`: a rotation's spread cosines and signed sines), the
        blocks used last first, up to `_KEPT_BYTES` per input structure: the next decoding
        steps in a block, a range called again, or ranges that come back (several sequences
        decoded in turn, random offsets in training) slice them, and a call computes only
        the blocks it does not find, in one run. Rows have the same bits however they are
        asked for, so the kept blocks are the call's own rows."""
        if positions is None or positions.values is not None or not layer._rows_follow_positions():
            return getattr(layer, combine)(inputs, layer._rows_for(inputs, positions))
        shape, axis = tuple(inputs.shape), layer._sequence_axis(len(inputs.shape))
        start, length = int(positions.start), shape[axis]
        if not length:
            return getattr(layer, combine)(inputs, layer._rows_for(inputs, positions))
        rank = len(shape)
        key = (
            combine,
            inputs.dtype,
            str(inputs.device),
            rank,
            *((i, shape[i]) for i in sorted(a % rank for a in kept_axes)),
        )
        blocks = self._blocks.pop(key, None) or collections.OrderedDict()  # block number -> tables
        self._blocks = {**dict(list(self._blocks.items())[-3:]), key: blocks}
        first, last = start // _rows.STEP, (start + length - 1) // _rows.STEP
        missing = [block for block in range(first, last + 1) if block not in blocks]
        if missing:
            low, high = missing[0], missing[-1] + 1
            run_shape = shape[:axis] + ((high - low) * _rows.STEP,) + shape[axis + 1 :]
            rows = layer._rows_for(
                types.SimpleNamespace(shape=run_shape, dtype=inputs.dtype), Positions(start=low * _rows.STEP)
            )
            tables = layer._tables(rows, rank) if combine == "_combine" else rows
            for block in range(low, high):
                offset = (block - low) * _rows.STEP
                blocks[block] = _sliced(tables, offset, offset + _rows.STEP, copy=True)
        for block in range(first, last + 1):
            blocks.move_to_end(block)
        kept = max(last + 1 - first, _KEPT_BYTES // _bytes(blocks[first]))
        while len(blocks) > kept:
            blocks.popitem(last=False)  # the block used longest ago
        parts = [blocks[block] for block in range(first, last + 1)]
        joined_parts, joined = self._joined.get(key, ((), None))
        if list(map(id, joined_parts)) != list(map(id, parts)):  # not the blocks the last call joined
            if len(parts) == 1:
                joined = parts[0]
            elif isinstance(parts[0], tuple):
                joined = tuple(keras.ops.concatenate(tables, axis=0) for tables in zip(*parts, strict=True))
            else:
                joined = keras.ops.concatenate(parts, axis=0)
            self._joined = {key: (parts, joined)}
        begin = start - first * _rows.STEP
        part = _sliced(joined, begin, begin + length)
        if combine == "_combine":
            return layer._combine_tables(inputs, part)
        return getattr(layer, combine)(inputs, part)

    def _jax(self, layer, inputs, positions, combine):
        import jax

        if "rows" not in self._functions:

            def rows(inputs, positions):
                self.traces += 1
                return layer._rows_for(inputs, positions)

            self._functions["rows"] = jax.jit(rows)
        if combine not in self._functions:
            self._functions[combine] = jax.jit(getattr(layer, combine))
        return self._functions[combine](inputs, self._functions["rows"](inputs, positions))

    def _tensorflow(self, layer, inputs, positions, kept_axes, combine):
        rank = len(inputs.shape)
        kept = sorted(axis % rank for axis in kept_axes)
        arguments, kind = [inputs], None
        if positions is not None:
            kind = "start" if positions.values is None else "values"
            arguments.append(
                tf.convert_to_tensor(positions.start, tf.int32) if kind == "start" else positions.values
            )
        key = (
            combine,
            kind,
            inputs.dtype,
            rank,
            tuple((axis, inputs.shape[axis]) for axis in kept),
            *((arguments[1].dtype, arguments[1].shape.rank) if kind else ()),
        )
        function = self._functions.get(key)
        if function is None:
            specs = [
                tf.TensorSpec(
                    [size if axis in kept else None for axis, size in enumerate(inputs.shape)], inputs.dtype
                )
            ]
            if kind:
                specs.append(tf.TensorSpec([None] * arguments[1].shape.rank, arguments[1].dtype))

            def traced(inputs, where=None):
                self.traces += 1
                positions = None if kind is None else Positions(**{kind: where})
                return getattr(layer, combine)(inputs, layer._rows_for(inputs, positions))

            # The concrete function: calling it skips the signature matching of a `tf.function`.
            function = tf.function(traced, input_signature=specs).get_concrete_function()
            self._functions[key] = function
        return function(*arguments)


class SinusoidLayerMixin:
    """What every tf_posenc layer does, in either Keras family.

    Ragged and sparse inputs, and symbolic tensors of the other Keras family, are refused by
    name (Keras would fail on them with a shape error or "unsupported type Operation").
    Automatic casting is off: Keras would round every floating argument to the compute
    dtype, float positions and timesteps included (999.0 is 1000 in bfloat16); the layers
    cast the features they add to or rotate themselves, and nothing else.

    A subclass says what its inputs must be (`_output_shape`, which checks a shape and returns
    the output's, and `_check_input_dtype`); its `call` checks the positions it covers and
    hands them with the inputs to `_run`, which computes their rows (`_rows_for`) and combines
    them with the inputs (`_combine`), compiled once for eager calls.
    """

    inputs_hint = "for example the output of an `Embedding`"

    def __init__(self, autocast=False, **kwargs):
        _validation.supported_backend(type(self).__name__, self.keras_family)
        if autocast is not False:
            raise ValueError(
                "`autocast` must be False: tf_posenc layers cast their floating features to the "
                "compute dtype themselves, and never positions or timesteps. "
                f"{_validation.received('autocast', autocast)}"
            )
        super().__init__(autocast=False, **kwargs)
        self.supports_masking = True
        self._eager_functions = _EagerFunctions()
        build_at_construction(self)  # its inputs are checked where they are seen: the call and the spec

    def __call__(self, inputs, *args, **kwargs):
        _validation.dense_inputs(inputs)
        _validation.same_keras_family(inputs, type(self).__name__, self.keras_family)
        return super().__call__(inputs, *args, **kwargs)

    def compute_output_shape(self, input_shape):
        return self._output_shape(tuple(input_shape))

    def compute_output_spec(self, inputs, *args, **kwargs):
        self._check_input_dtype(inputs.dtype)
        return keras.KerasTensor(self.compute_output_shape(inputs.shape), dtype=self.compute_dtype)

    def _output_shape(self, input_shape):
        return input_shape

    def _check_input_dtype(self, dtype):
        _validation.floating_inputs(dtype, self.inputs_hint)

    def _checked_inputs(self, inputs):
        """`inputs` after the checks of their shape and dtype that `build` and the spec make."""
        self._output_shape(tuple(inputs.shape))
        self._check_input_dtype(inputs.dtype)
        return inputs

    def _run(self, inputs, positions=None, kept_axes=(-1,), combine="_combine"):
        """The rows of `positions` combined with `inputs` by the method named `combine`,
        compiled once for eager calls (`kept_axes` are the axes of `inputs` whose sizes the
        steps depend on)."""
        if _is_eager(inputs) and self._compiled_in_eager_calls():
            return self._eager_functions(self, inputs, positions, kept_axes, combine)
        return getattr(self, combine)(inputs, self._rows_for(inputs, positions))

    def _rows_follow_positions(self):
        """Whether a call's rows depend on its positions alone (not on their extent), so that
        eager PyTorch calls may reuse rows computed for the blocks around them."""
        return False

    def _compiled_in_eager_calls(self):
        """Whether eager calls run compiled (a layer whose constants follow each call's values
        runs them op by op)."""
        return True

    def _combine(self, inputs, rows):
        return _rows.cast(inputs, self.compute_dtype) + rows

    def _tables(self, rows, rank):
        """What `_combine_tables` combines with rank-`rank` inputs, from their rows: what eager
        PyTorch calls keep per block (the rows themselves, unless a layer arranges them)."""
        return rows

    def _combine_tables(self, inputs, tables):
        return self._combine(inputs, tables)


class SinusoidLayer(SinusoidLayerMixin, keras.layers.Layer):
    """The Keras 3 base of tf_posenc's layers."""

    keras_family = keras
