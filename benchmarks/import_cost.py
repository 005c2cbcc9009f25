"""What `import tf_posenc` adds to `import keras`, on each Keras backend installed: seconds and
resident memory, each in a fresh interpreter, the median of `--runs` (5). On JAX and PyTorch
tf_posenc imports no TensorFlow, which the table shows too.

    python benchmarks/import_cost.py [--runs N] [--torch-python PATH ...]

`--torch-python` names interpreters of a PyTorch environment to measure its backend with; the one
running this script measures the TensorFlow and JAX backends when it has them.
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys

PROBE = """
import json, resource, sys, time
start = time.perf_counter()
import keras
after_keras = time.perf_counter()
keras_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
import tf_posenc
after = time.perf_counter()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"keras": after_keras - start, "added": after - after_keras,
                  "added_mib": (rss - keras_rss) / 1024, "tensorflow": "tensorflow" in sys.modules}))
"""


def measure(python, backend, runs):
    environment = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    results = []
    for _ in range(runs):
        output = subprocess.run(
            [python, "-c", PROBE], env=environment, capture_output=True, text=True, check=True
        ).stdout
        results.append(json.loads(output.strip().splitlines()[-1]))
    return {
        "keras": statistics.median(result["keras"] for result in results),
        "added": statistics.median(result["added"] for result in results),
        "added_mib": statistics.median(result["added_mib"] for result in results),
        "tensorflow": all(result["tensorflow"] for result in results),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--torch-python", action="append", default=[])
    arguments = parser.parse_args()
    targets = [
        (sys.executable, backend) for backend in ("tensorflow", "jax") if importlib.util.find_spec(backend)
    ]
    targets += [(python, "torch") for python in arguments.torch_python]
    columns = (
        "backend",
        "`import keras`",
        "`import tf_posenc` adds",
        "resident memory it adds",
        "TensorFlow imported",
    )
    print("| " + " | ".join(columns) + " |")
    print("|---|---|---|---|---|")
    for python, backend in targets:
        result = measure(python, backend, arguments.runs)
        print(
            f"| {backend} | {result['keras']:.2f} s | {result['added']:.2f} s | "
            f"{result['added_mib']:.0f} MiB | {'yes' if result['tensorflow'] else 'no'} |"
        )


if __name__ == "__main__":
    main()
