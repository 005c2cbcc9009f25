"""Keras's own layer harness on every public layer: `run_layer_test` (keras/src/testing/test_case.py,
in the keras wheel), the checks Keras's and keras-hub's layers pass. It round-trips the config
and the serialization, checks masking support, the weights, a symbolic call, an eager call (and
its values, where given), a training step and a mixed-precision call, and, for the stateless
layers, that they are built at construction."""

import numpy as np
import pytest
import tensorflow as tf
from keras.src.testing import test_case
from layer_cases import CASES
from reference import reference_rotation, reference_table, rope_frequencies

import tf_posenc

# case name: the number of trainable weights (0: a stateless layer, built at construction).
HARNESS_CASES = {
    "encoding-start-index": 0,
    "embedding": 1,
    "rotary-longrope-positions": 0,
    "patch": 0,
    "video": 0,
    "axial-rotary": 0,
    "timestep": 0,
    "alibi-positions": 0,
    "t5-bias": 1,
    "window-bias": 1,
    "continuous-bias": 3,
    "learned-patch": 1,
}

# The layers that pass a mask through (the sequence layers); score biases, timesteps and the
# learned grid table have none to pass.
MASKING_LAYERS = (
    "PositionalEncoding", "PositionalEmbedding", "RotaryEmbedding", "PatchPositionalEncoding",
    "VideoPositionalEncoding", "AxialRotaryEmbedding",
)  # fmt: skip


def expected_outputs(name, inputs):
    """The float64 reference of the cases whose values the harness checks too."""
    if name == "encoding-start-index":
        return inputs + reference_table(4000 + np.arange(inputs.shape[1]), inputs.shape[-1])
    if name == "rotary-longrope-positions":
        # The call reaches position 20, past 8: the long factors for every example, and
        # transformers' LongRoPE scale for the inferred factor 32 / 8.
        long = rope_frequencies(8) / [2.0, 4.0, 8.0, 16.0]
        scale = np.sqrt(1 + np.log(4.0) / np.log(8))
        return scale * reference_rotation(inputs, np.array([[0, 3, 9, 20], [0, 1, 2, 3]]), long)
    return None


def test_every_public_layer_is_in_the_harness():
    tested = {CASES[name][0] for name in HARNESS_CASES} | {"InklingRelativeBias"}
    assert tested == set(tf_posenc.layers.__all__)


# The harness's own training step passes a generator with `shuffle=True`, and trains stateless
# layers too: Keras warns of both.
HARNESS_WARNINGS = (
    pytest.mark.filterwarnings("ignore:`shuffle=True` was passed"),
    pytest.mark.filterwarnings("ignore:The model does not have any trainable weights"),
)


def run_harness(layer_class, arguments, inputs, call_arguments=None, expected=None, trainable=0):
    """Keras's `run_layer_test` on one layer, with what tf_posenc's layers promise."""
    test_case.TestCase("run_layer_test").run_layer_test(
        layer_class,
        init_kwargs=arguments,
        input_data=inputs,
        call_kwargs=call_arguments,
        expected_output=None if expected is None else tf.constant(expected, "float32"),
        expected_num_trainable_weights=trainable,
        expected_num_non_trainable_weights=0,
        supports_masking=layer_class.__name__ in MASKING_LAYERS,
        assert_built_after_instantiation=trainable == 0,
        # Its training step calls the layer without call arguments, which the axial layer needs.
        run_training_check=layer_class.__name__ != "AxialRotaryEmbedding",
    )


@pytest.mark.parametrize("name", list(HARNESS_CASES))
@HARNESS_WARNINGS[0]
@HARNESS_WARNINGS[1]
def test_keras_layer_harness(name):
    class_name, arguments, inputs, call_arguments = CASES[name]
    run_harness(
        getattr(tf_posenc.layers, class_name),
        arguments,
        inputs,
        call_arguments,
        expected_outputs(name, inputs),
        HARNESS_CASES[name],
    )


@HARNESS_WARNINGS[0]
def test_keras_layer_harness_on_inklings_bias():
    # Two inputs, the scores and the hidden states: the harness builds from both shapes, as a
    # Keras 3 call does. (It has no case of `layer_cases`: its float32 matmuls are not the same
    # bits on every backend.)
    test_case.TestCase("run_layer_test").run_layer_test(
        tf_posenc.layers.InklingRelativeBias,
        init_kwargs={"num_heads": 3, "rel_extent": 6, "log_scaling": True, "log_scaling_n_floor": 2},
        input_shape={"attention_scores_shape": (2, 3, 4, 4), "hidden_states_shape": (2, 4, 8)},
        expected_output_shape=(2, 3, 4, 4),
        expected_num_trainable_weights=3,
        expected_num_non_trainable_weights=0,
        supports_masking=False,
        run_training_check=False,  # its model calls the layer with the dict as one argument
    )
