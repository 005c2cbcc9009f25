"""Internal: the base of every tf_posenc layer, in either Keras family."""

import inspect

import keras

from tf_posenc import _eager, _rows, _validation


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


class InputPolicyMixin:
    """The input policy every tf_posenc layer keeps, in either Keras family.

    Automatic casting is off: Keras would round every floating argument to the compute dtype,
    float positions and timesteps included (999.0 is 1000 in bfloat16); the layers cast the
    features or scores they add to or rotate themselves, and nothing else. Ragged and sparse
    inputs, and symbolic tensors of the other Keras family, are refused by name (Keras would fail
    on them with a shape error or "unsupported type Operation"). A layer without weights of its
    own is built at construction, as Keras's stateless layers are.
    """

    def __init__(self, autocast=False, **kwargs):
        _validation.supported_backend(type(self).__name__, self.keras_family)
        if autocast is not False:
            raise ValueError(
                "`autocast` must be False: tf_posenc layers cast their floating features to the "
                "compute dtype themselves, and never positions or timesteps. "
                f"{_validation.received('autocast', autocast)}"
            )
        super().__init__(autocast=False, **kwargs)
        build_at_construction(self)  # its inputs are checked where they are seen: the call and the spec

    def __call__(self, *args, **kwargs):
        if args:
            inputs = args[0]
        else:  # called by keyword, as Keras's harness and functional code may call a layer
            inputs = kwargs.get(next(iter(inspect.signature(self.call).parameters)))
        _validation.dense_inputs(inputs)
        _validation.same_keras_family(inputs, type(self).__name__, self.keras_family)
        return super().__call__(*args, **kwargs)


class SinusoidLayerMixin(InputPolicyMixin):
    """What every tf_posenc layer that adds or rotates rows does, in either Keras family.

    A subclass says what its inputs must be (`_output_shape`, which checks a shape and returns
    the output's, and `_check_input_dtype`); its `call` checks the positions it covers and
    hands them with the inputs to `_run`, which computes their rows (`_rows_for`) and combines
    them with the inputs (`_combine`), compiled once for eager calls.
    """

    inputs_hint = "for example the output of an `Embedding`"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self._eager_paths = _eager.EagerPaths()

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
        through the eager fast paths of `_eager` for eager calls (`kept_axes` are the axes of
        `inputs` whose sizes the steps depend on)."""
        if _eager.is_eager(inputs) and self._compiled_in_eager_calls():
            return self._eager_paths(self, inputs, positions, kept_axes, combine)
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


class PositionLayer(InputPolicyMixin, keras.layers.Layer):
    """The Keras 3 base of tf_posenc's layers that bias attention scores."""

    keras_family = keras


class SinusoidLayer(SinusoidLayerMixin, keras.layers.Layer):
    """The Keras 3 base of tf_posenc's layers that add or rotate rows."""

    keras_family = keras
