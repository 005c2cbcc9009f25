"""Word order matters: a tiny attention model with and without the encoding.

Every sentence holds the same bag of words, "dog", "couch" and filler words, and the
label says whether "dog" comes before "couch" ("dog sat on couch") or after it
("couch sat on dog"). Self-attention followed by average pooling is blind to order,
so without positions the best a model can do is guess; with the encoding added it
can read the order off the sums.
"""

import os
import tempfile

import keras
import numpy as np
import tensorflow as tf

from tf_posenc.layers import PositionalEncoding

WORDS = ["<pad>", "dog", "couch", "sat", "on", "the", "a", "old", "soft", "big", "red", "quietly"]
DOG, COUCH = WORDS.index("dog"), WORDS.index("couch")
FIRST_FILLER = WORDS.index("sat")


def make_sentences(count, seq_len, rng):
    """Filler words with one "dog" and one "couch" at random places; label 1 when "dog" is first."""
    tokens = rng.integers(FIRST_FILLER, len(WORDS), size=(count, seq_len))
    places = np.argsort(rng.random((count, seq_len)), axis=1)[:, :2]
    rows = np.arange(count)
    tokens[rows, places[:, 0]] = DOG
    tokens[rows, places[:, 1]] = COUCH
    labels = (places[:, 0] < places[:, 1]).astype("float32")
    return tokens.astype("int32"), labels


def build_model(seq_len, d_model, with_encoding):
    tokens = keras.Input((None,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(len(WORDS), d_model)(tokens)
    if with_encoding:
        x = PositionalEncoding(position=seq_len, d_model=d_model)(x)
    attended = keras.layers.MultiHeadAttention(num_heads=2, key_dim=d_model // 2)(x, x)
    x = keras.layers.LayerNormalization()(x + attended)
    x = keras.layers.Dense(d_model, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    outputs = keras.layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model(tokens, outputs, name="with_encoding" if with_encoding else "without")
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="binary_crossentropy", metrics=["accuracy"])
    return model


def _serve_from_saved_model(model, tokens):
    """Exports `model` as a SavedModel, loads it back with plain TensorFlow and serves `tokens`."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "order_model")
        model.export(path, verbose=False)
        served = tf.saved_model.load(path)
        return served.serve(tf.constant(tokens)).numpy()


def run(seed=0, seq_len=8, d_model=32, epochs=12, train_size=4000, test_size=1000, verbose=1):
    """Trains both models and returns their held-out accuracies and the export check."""
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    train_x, train_y = make_sentences(train_size, seq_len, rng)
    test_x, test_y = make_sentences(test_size, seq_len, rng)
    results = {"seed": seed, "seq_len": seq_len, "d_model": d_model, "epochs": epochs}
    trained = {}
    for with_encoding in (True, False):
        model = build_model(seq_len, d_model, with_encoding)
        if verbose:
            print(f"\nTraining the model {'with' if with_encoding else 'without'} PositionalEncoding")
        model.fit(train_x, train_y, epochs=epochs, batch_size=64, verbose=verbose)
        _, accuracy = model.evaluate(test_x, test_y, verbose=0)
        key = "with_encoding" if with_encoding else "without_encoding"
        results[f"accuracy_{key}"] = float(accuracy)
        trained[key] = model
    predictions = trained["with_encoding"].predict(test_x, verbose=0)
    served = _serve_from_saved_model(trained["with_encoding"], test_x)
    results["saved_model_max_difference"] = float(np.abs(served - predictions).max())
    results["saved_model_serves_same_predictions"] = bool(
        np.array_equal(served > 0.5, predictions > 0.5) and results["saved_model_max_difference"] < 1e-5
    )
    return results


def format_table(results):
    rows = [
        ("with PositionalEncoding", results["accuracy_with_encoding"]),
        ("without (bag of words)", results["accuracy_without_encoding"]),
    ]
    lines = ["| model | held-out accuracy |", "|---|---|"]
    lines += [f"| {name} | {accuracy:.3f} |" for name, accuracy in rows]
    served = "yes" if results["saved_model_serves_same_predictions"] else "NO"
    lines.append(
        f"\nSavedModel reloaded with tf.saved_model.load serves the same predictions: {served} "
        f"(max difference {results['saved_model_max_difference']:.2e})"
    )
    return "\n".join(lines)
