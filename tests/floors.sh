#!/usr/bin/env bash
# The core tests (layers, saving, export, numerics, rope types) once more, with the oldest TensorFlow, Keras
# and NumPy that pyproject.toml allows (tests/floors.txt), in an environment of their own.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-floors
.venv-floors/bin/pip install -q -r tests/floors.txt
.venv-floors/bin/pip install -q --no-deps -e .
.venv-floors/bin/python -m pytest -p no:cacheprovider tests/test_layer.py tests/test_ecosystem.py \
    tests/test_eager.py tests/test_hardening.py tests/test_numerics.py tests/test_saving.py tests/test_encoding.py \
    tests/test_rope_types.py \
    --deselect tests/test_rope_types.py::test_rope_types_export_to_saved_model_litert_and_onnx  # converters: test extra
