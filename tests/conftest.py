import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Run by hand in an environment with transformers and torch (its docstring), not collected.
collect_ignore = ["print_transformers.py"]

# The files that take longest, first: `--dist loadfile` hands files to the two workers in the
# order they are collected, and a long file collected last leaves one worker idle.
LONGEST_FIRST = (
    "test_jax.py",
    "test_tf_keras.py",
    "test_notebook.py",
    "test_rope_types.py",
    "test_packing.py",
    "test_runtimes.py",
    "test_attention.py",
    "test_keras_hub.py",
)


def pytest_collection_modifyitems(items):
    def rank(item):
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a file, and of the other files, is kept
