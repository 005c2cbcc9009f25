import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Run by hand in an environment with transformers and torch (its docstring), not collected.
collect_ignore = ["print_transformers.py"]
