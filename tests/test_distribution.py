"""Training under tf.distribute: MirroredStrategy on two logical CPUs, and two local workers."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
from helpers import run_python

pytestmark = pytest.mark.slow

MODEL = """
import keras, numpy as np, tf_posenc
keras.utils.set_random_seed(0)

def build_model():
    tokens = keras.Input((None,), dtype="int32")
    x = tf_posenc.PositionalEmbedding(20, 8, position=16, mask_zero=True)(tokens)
    x = tf_posenc.PositionalEncoding(16, 8, name="second_encoding")(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(tokens, keras.layers.Dense(1)(x))

rng = np.random.default_rng(0)
data = rng.integers(1, 20, size=(64, 12)).astype("int32")
targets = rng.normal(size=(64, 1)).astype("float32")
"""

MIRRORED = (
    """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
"""
    + MODEL
    + """
import json
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = build_model()
    model.compile(optimizer="adam", loss="mse")
before = [w.copy() for w in model.get_weights()]
history = model.fit(data, targets, epochs=3, batch_size=16, verbose=0)
single = build_model()
single.set_weights(model.get_weights())
print(json.dumps({
    "replicas": strategy.num_replicas_in_sync,
    "loss": history.history["loss"],
    "changed": any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights())),
    "difference": float(np.abs(model.predict(data, verbose=0) - single.predict(data, verbose=0)).max()),
}))
"""
)


def test_mirrored_strategy_on_two_devices_matches_one_device(tmp_path):
    result = json.loads(run_python(MIRRORED, tmp_path).strip().splitlines()[-1])
    assert result["replicas"] == 2
    assert result["changed"]
    assert result["loss"][-1] < result["loss"][0]
    assert result["difference"] < 1e-5


# Keras 3's `fit` does not run under MultiWorkerMirroredStrategy yet (keras-team/keras#20585),
# so each worker trains with a custom loop: strategy.run over a distributed dataset.
WORKER = (
    MODEL
    + """
import json, sys
import tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = build_model()
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)
dataset = tf.data.Dataset.from_tensor_slices((data, targets)).batch(16)
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
distributed = strategy.experimental_distribute_dataset(dataset.with_options(options))

@tf.function
def train_step(batch):
    def step(tokens, expected):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(tokens, training=True) - expected) ** 2)
            scaled = loss / strategy.num_replicas_in_sync
        gradients = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss
    losses = strategy.run(step, args=batch)
    return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

losses = [float(np.mean([train_step(batch) for batch in distributed])) for _ in range(10)]
np.savez(sys.argv[1], *model.get_weights())
print(json.dumps({"workers": strategy.num_replicas_in_sync, "losses": losses}))
"""
)


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for handle in sockets:
        handle.bind(("127.0.0.1", 0))
    ports = [handle.getsockname()[1] for handle in sockets]
    for handle in sockets:
        handle.close()
    return ports


def test_multi_worker_mirrored_strategy_with_two_local_workers(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    workers = []
    for index in range(2):
        env = {
            **os.environ,
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "PYTHONWARNINGS": "ignore",
            "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
        }
        workers.append(
            subprocess.Popen(
                [sys.executable, str(script), str(tmp_path / f"weights{index}.npz")],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = []
    try:
        for worker in workers:
            stdout, stderr = worker.communicate(timeout=240)
            assert worker.returncode == 0, stderr[-3000:]
            results.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for worker in workers:
            worker.kill()
    assert [result["workers"] for result in results] == [2, 2]
    assert results[0]["losses"] == results[1]["losses"]
    assert results[0]["losses"][-1] < results[0]["losses"][0]
    first, second = np.load(tmp_path / "weights0.npz"), np.load(tmp_path / "weights1.npz")
    assert len(first.files) == 3
    for name in first.files:
        np.testing.assert_array_equal(first[name], second[name])
