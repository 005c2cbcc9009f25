#!/usr/bin/env bash
# Keras's PyTorch backend, in an environment of its own (tests/torch.txt: torch's CPU wheel, and the
# test environment's TensorFlow and Keras, pinned): the backend world of tests/backend_world.py; then
# with triton added (torch's default wheel brings it), tests/triton_world.py.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-torch
.venv-torch/bin/pip install -q -r tests/torch.txt
# The world's own process holds TensorFlow, which aborts a process that then loads triton.
.venv-torch/bin/pip uninstall -q -y triton
.venv-torch/bin/pip install -q --no-deps -e .
.venv-torch/bin/python -m pytest -p no:cacheprovider tests/torch_world.py
.venv-torch/bin/pip install -q triton==3.9.0
.venv-torch/bin/python -m pytest -p no:cacheprovider tests/triton_world.py
