#!/usr/bin/env bash
# Keras's PyTorch backend, in an environment of its own (tests/torch.txt: torch's CPU wheel, and the
# test environment's TensorFlow and Keras, pinned): the backend world of tests/backend_world.py.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-torch
.venv-torch/bin/pip install -q -r tests/torch.txt
.venv-torch/bin/pip install -q --no-deps -e .
.venv-torch/bin/python -m pytest -p no:cacheprovider tests/torch_world.py
