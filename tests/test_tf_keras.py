"""tf_keras (Keras 2): the same layers, numbers, errors, masks and saved models as Keras 3.

The first tests use `tf_posenc.tf_keras` next to `tf_posenc.layers` in this process; the
others run where TensorFlow makes `tf.keras` tf_keras (`TF_USE_LEGACY_KERAS=1`), in fresh
interpreters, as a Model Garden or TFX pipeline would.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from bounds import ROW_BOUND
from helpers import MaskProbeBody, run_python
from hf_configs import CONFIGS
from layer_cases import BAD_CALLS, CASES, make_layer
from reference import reference_table
from test_docs import page_in_world

import tf_posenc
from tf_posenc import layers as keras_3
from tf_posenc import tf_keras as keras_2

LEGACY = {"TF_USE_LEGACY_KERAS": "1"}
POLICIES = ["float32", "mixed_float16", "mixed_bfloat16", "float64"]


def pair(name, policy):
    """The Keras 3 and the tf_keras layer of a case, with the same weights."""
    new = make_layer(keras_3, name, policy)
    return new, make_layer(keras_2, name, policy, new.get_weights())


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", CASES)
def test_tf_keras_layers_give_the_keras_3_bits(name, policy):
    _, _, inputs, call_arguments = CASES[name]
    new, old = pair(name, policy)
    expected = keras.ops.convert_to_numpy(new(inputs, **call_arguments))
    got = old(inputs, **call_arguments)
    assert got.dtype == new.compute_dtype == old.compute_dtype
    assert np.array_equal(got.numpy(), expected)


def test_tf_keras_encoding_is_the_documents_table():
    layer = keras_2.PositionalEncoding(50, 512)
    rows = layer(tf.zeros((1, 50, 512))).numpy()[0]
    assert np.abs(rows - reference_table(np.arange(50), 512)).max() <= 0.5001 * ROW_BOUND["float32"]


@pytest.mark.parametrize("name", BAD_CALLS)
def test_tf_keras_layers_raise_the_keras_3_errors(name):
    class_name, arguments, inputs, call_arguments, error, message = BAD_CALLS[name]
    error = getattr(tf.errors, error) if isinstance(error, str) else error
    for family in (keras_3, keras_2):
        with pytest.raises(error) as raised:
            getattr(family, class_name)(**arguments)(inputs, **call_arguments)
        assert message in str(raised.value), family.__name__


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            {"position": 0, "d_model": 4},
            "`position` must be a positive integer. Received: position=0 (of type int)",
        ),
        (
            {"position": 8, "d_model": 4, "max_wavelength": 1},
            "`max_wavelength` must be a finite number greater than 1. "
            "Received: max_wavelength=1 (of type int)",
        ),
        (
            {"position": 8, "d_model": 4, "layout": "zigzag"},
            "`layout` must be one of ('interleave', 'concat')",
        ),
        ({"position": 8, "d_model": 4, "convention": "x"}, "`convention` must be one of ('paper', "),
    ],
    ids=["position-0", "wavelength-1", "layout", "convention"],
)
def test_tf_keras_constructors_raise_the_keras_errors(arguments, message):
    # tf_keras's base class sees the arguments first: its errors must still be ours.
    with pytest.raises(ValueError) as raised:
        keras_2.PositionalEncoding(**arguments)
    assert str(raised.value).startswith(message)


def test_each_family_names_the_other_when_given_its_tensors():
    with pytest.raises(TypeError, match="tf_posenc.tf_keras.PositionalEncoding"):
        keras_3.PositionalEncoding(8, 4)(tf_keras.Input((None, 4)))
    with pytest.raises(TypeError, match="tf_posenc.layers.RotaryEmbedding"):
        keras_2.RotaryEmbedding()(keras.Input((None, 4)))


def test_tf_keras_rotary_embedding_reads_a_hugging_face_config():
    legacy = keras_2.RotaryEmbedding.from_hf_config(CONFIGS["phi-4-mini"], name="rope")
    assert isinstance(legacy, tf_keras.layers.Layer)
    current = keras_3.RotaryEmbedding.from_hf_config(CONFIGS["phi-4-mini"], name="rope")
    assert legacy.get_config()["long_factor"] == current.get_config()["long_factor"]
    x = np.random.default_rng(0).normal(size=(1, 6, 2, 128)).astype("float32")
    for start in (0, 5000):  # the short factors, then the long ones
        np.testing.assert_array_equal(legacy(x, start_index=start), current(x, start_index=start))


def test_tf_keras_rows_plans_and_masks_are_the_keras_3_ones():
    config = {"model_type": "gemma3_text", "num_hidden_layers": 3, "head_dim": 16, "sliding_window": 4,
              "sliding_window_pattern": 3, "rope_local_base_freq": 10000.0,
              "rope_parameters": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}  # fmt: skip
    legacy, current = keras_2.hf_attention_layers(config), tf_posenc.hf_attention_layers(config)
    assert [isinstance(entry.rope, tf_keras.layers.Layer) for entry in legacy] == [True] * 3
    assert [entry[1:] for entry in legacy] == [entry[1:] for entry in current]
    x = tf.constant(np.random.default_rng(0).normal(size=(2, 5, 4, 16)), "float32")
    for old, new in zip(legacy, current, strict=True):
        rows = old.rope.rows(x, start_index=7)
        for table, expected in zip(rows, new.rope.rows(x, start_index=7), strict=True):
            np.testing.assert_array_equal(table.numpy(), expected.numpy())
        np.testing.assert_array_equal(old.rope(x, rows=rows).numpy(), new.rope(x, start_index=7).numpy())

    class Step(tf_keras.Model):  # a tf_keras model that computes its rows and mask once
        def __init__(self):
            super().__init__()
            self.rope = legacy[0].rope

        def call(self, inputs):
            x, positions = inputs
            rows = self.rope.rows(x, positions=positions)
            mask = tf_posenc.attention_mask(positions, positions, sliding_window=legacy[0].sliding_window)
            return self.rope(x, rows=rows), mask

    positions = np.array([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]], "int32")
    rotated, mask = Step().predict([x.numpy(), positions], verbose=0)
    np.testing.assert_array_equal(rotated, current[0].rope(x, positions=positions).numpy())
    np.testing.assert_array_equal(
        mask, tf_posenc.attention_mask(positions, positions, sliding_window=4).numpy()
    )


class Tf_KerasMaskProbe(MaskProbeBody, tf_keras.layers.Layer):
    pass


def test_tf_keras_masks_flow_through_and_merge():
    tokens = tf_keras.Input((None,), dtype="int32")
    embedded = keras_2.PositionalEmbedding(20, 8, 16, mask_zero=True)(tokens)
    encoded = keras_2.PositionalEncoding(16, 8)(embedded)
    rotated = keras_2.RotaryEmbedding()(encoded)
    probe = tf_keras.Model(tokens, Tf_KerasMaskProbe()(rotated))
    ids = np.array([[3, 4, 0, 0], [5, 0, 6, 0]], "int32")
    assert np.array_equal(probe.predict(ids, verbose=0), (ids != 0).astype("float32"))

    # An incoming mask is merged with the layer's own, as in Keras 3.
    features = tf_keras.Input((None, 1))
    masked = tf_keras.layers.Masking(0.0)(features)
    ids_as_features = tf_keras.layers.Lambda(lambda x: tf.cast(x[..., 0], "int32"))(masked)
    merged = keras_2.PositionalEmbedding(20, 8, 16, mask_zero=True)(ids_as_features)
    model = tf_keras.Model(features, Tf_KerasMaskProbe()(merged))
    values = np.array([[[3], [0], [7], [2]]], "float32")
    assert np.array_equal(model.predict(values, verbose=0), [[1, 0, 1, 1]])


@pytest.mark.parametrize("class_name", keras_3.__all__)  # the layers (keras_2 adds a function)
def test_tf_keras_configs_round_trip_through_json(class_name):
    # Inkling's bias is not bit for bit across backends (float32 matmuls), so it has no case.
    arguments = {"num_heads": 3, "rel_extent": 6, "log_scaling": True, "log_scaling_n_floor": 64}
    if class_name != "InklingRelativeBias":
        _, arguments, _, _ = next(case for case in CASES.values() if case[0] == class_name)
    layer = getattr(keras_2, class_name)(**arguments, name="layer")
    serialized = json.loads(json.dumps(tf_keras.saving.serialize_keras_object(layer)))
    restored = tf_keras.saving.deserialize_keras_object(serialized)
    assert type(restored) is type(layer)
    assert restored.get_config() == layer.get_config()


# What a tf_keras user writes: `tf.keras` models, top-level tf_posenc names.
LEGACY_WORLD = """
import json, numpy as np, tensorflow as tf, tf_keras, tf_posenc
assert tf.keras.layers.Dense is tf_keras.layers.Dense
families = sorted({type(getattr(tf_posenc, name)(**arguments)).__module__ for name, arguments in [
    ("PositionalEncoding", {"position": 8, "d_model": 4}),
    ("PositionalEmbedding", {"vocab_size": 9, "d_model": 4, "position": 8}),
    ("RotaryEmbedding", {}), ("PatchPositionalEncoding", {"grid_size": 2, "d_model": 4}),
    ("TimestepEmbedding", {"dim": 4})]})
tf.keras.utils.set_random_seed(0)
tokens = np.random.default_rng(0).integers(1, 50, size=(32, 12)).astype("int32")
targets = (tokens[:, :1] > 25).astype("float32")

def losses(model):
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="binary_crossentropy")
    return model.fit(tokens, targets, epochs=8, batch_size=8, verbose=0).history["loss"]

inputs = tf.keras.Input((None,), dtype="int32")
x = tf_posenc.PositionalEmbedding(50, 16, position=32)(inputs)
x = tf_posenc.PositionalEncoding(32, 16)(x)
x = tf.keras.layers.Reshape((-1, 2, 8))(x)
x = tf_posenc.RotaryEmbedding()(x)
x = tf.keras.layers.Reshape((-1, 16))(x)
pooled = tf.keras.layers.Lambda(lambda t: t[:, 0])(x)
functional = tf.keras.Model(inputs, tf.keras.layers.Dense(1, activation="sigmoid")(pooled))

sequential = tf.keras.Sequential([
    tf.keras.Input((None,), dtype="int32"),
    tf.keras.layers.Embedding(50, 16),
    tf_posenc.PositionalEncoding(32, 16),
    tf.keras.layers.Lambda(lambda t: t[:, 0]),
    tf.keras.layers.Dense(1, activation="sigmoid"),
])

class Subclassed(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.embed = tf_posenc.PositionalEmbedding(50, 16, position=32)
        self.head = tf.keras.layers.Dense(1, activation="sigmoid")

    def call(self, ids):
        return self.head(self.embed(ids)[:, 0])

plan = tf_posenc.hf_attention_layers({"model_type": "mistral", "num_hidden_layers": 2, "head_dim": 8})
result = {"families": families, "plan": [type(plan[0].rope).__module__, plan[1].sliding_window]}
for name, model in [("functional", functional), ("sequential", sequential),
                    ("subclassed", Subclassed())]:
    history = losses(model)
    result[name] = [history[0], history[-1]]

tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
layer = tf_posenc.PositionalEncoding(64, 32)
encoded = layer(tf.zeros((1, 64, 32)))
result["mixed"] = [layer.compute_dtype, encoded.dtype.name]
np.save("mixed.npy", tf.cast(encoded, "float32").numpy()[0])
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def legacy_world(tmp_path_factory):
    """One tf_keras interpreter saves the files the reload test reads, then trains; returns its
    folder and what it reported."""
    folder = tmp_path_factory.mktemp("legacy_world")
    # The documentation's Keras 2 page runs here too, after the world's checks.
    script = SAVE_LEGACY + LEGACY_WORLD.replace(
        "print(json.dumps(result))", page_in_world("keras2.md", "result") + "print(json.dumps(result))"
    )
    result = json.loads(run_python(script, folder, env=LEGACY).splitlines()[-1])
    return folder, result


@pytest.mark.slow
def test_the_keras_2_page_runs_in_tf_keras(legacy_world):
    _, result = legacy_world
    assert result["docs"] is None, result["docs"]


@pytest.mark.slow
def test_legacy_keras_users_get_tf_keras_layers_that_train(legacy_world):
    tmp_path, result = legacy_world
    assert result["families"] == ["tf_posenc.tf_keras"]
    assert result["plan"] == ["tf_posenc.tf_keras", 4096]  # Mistral's default window, on every layer
    for name in ("functional", "sequential", "subclassed"):
        first, last = result[name]
        assert last < first, name
    assert result["mixed"] == ["bfloat16", "bfloat16"]
    expected = keras_3.PositionalEncoding(64, 32, dtype="mixed_bfloat16")(tf.zeros((1, 64, 32)))
    assert np.array_equal(np.load(tmp_path / "mixed.npy"), tf.cast(expected, "float32").numpy()[0])


def test_top_level_names_are_keras_3_layers_without_the_variable():
    assert tf_posenc.PositionalEncoding is keras_3.PositionalEncoding
    assert issubclass(tf_posenc.RotaryEmbedding, keras.layers.Layer)


SAVE_LEGACY = """
import numpy as np, tensorflow as tf, tf_posenc
inputs = tf.keras.Input((None,), dtype="int32")
x = tf_posenc.PositionalEmbedding(100, 16, position=64, mask_zero=True)(inputs)
x = tf_posenc.PositionalEncoding(64, 16, convention="tensor2tensor")(x)
x = tf.keras.layers.Reshape((-1, 2, 8))(x)
x = tf_posenc.RotaryEmbedding(layout="interleave")(x)
x = tf.keras.layers.Reshape((-1, 16))(x)
model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(x))
tokens = np.random.default_rng(1).integers(1, 100, size=(4, 64)).astype("int32")
np.save("tokens.npy", tokens)
np.save("expected.npy", model.predict(tokens, verbose=0))
model.save("model.keras")
model.save("model.h5")
model.save("tf_keras_saved_model")
tf.saved_model.save(model, "saved_model")
"""

LOAD_LEGACY = """
import numpy as np, tensorflow as tf, tf_posenc
tokens, expected = np.load("tokens.npy"), np.load("expected.npy")
for path in ("model.keras", "model.h5", "tf_keras_saved_model"):
    model = tf.keras.models.load_model(path)
    kinds = sorted(type(layer).__name__ for layer in model.layers
                   if type(layer).__module__ == "tf_posenc.tf_keras")
    print(path, np.array_equal(model.predict(tokens, verbose=0), expected), *kinds)
"""

SERVE_LEGACY = """
import sys
sys.modules["tf_posenc"] = None
import numpy as np, tensorflow as tf
tokens, expected = np.load("tokens.npy"), np.load("expected.npy")
for path in ("tf_keras_saved_model", "saved_model"):
    serve = tf.saved_model.load(path).signatures["serving_default"]
    for seq_len in (1, 17, 64):
        served = list(serve(tf.constant(tokens[:, :seq_len])).values())[0].numpy()
        print(path, seq_len, float(np.abs(served - expected[:, :seq_len]).max()))
"""


@pytest.mark.slow
def test_legacy_saved_models_reload_and_serve_without_tf_posenc(legacy_world):
    tmp_path = legacy_world[0]
    loaded = run_python(LOAD_LEGACY, tmp_path, env=LEGACY).splitlines()[-3:]
    kinds = ["PositionalEmbedding", "PositionalEncoding", "RotaryEmbedding"]
    assert [line.split() for line in loaded] == [
        [path, "True", *kinds] for path in ("model.keras", "model.h5", "tf_keras_saved_model")
    ]
    served = [line.split() for line in run_python(SERVE_LEGACY, tmp_path, env=LEGACY).splitlines()[-6:]]
    assert [(path, seq_len) for path, seq_len, _ in served] == [
        (path, seq_len) for path in ("tf_keras_saved_model", "saved_model") for seq_len in ("1", "17", "64")
    ]
    # Served rows at a shorter length are the same rows; only the dense layer's sums may differ.
    assert max(float(difference) for _, _, difference in served) <= 1e-6
