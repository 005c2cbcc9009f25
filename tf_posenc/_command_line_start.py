"""Internal: a quiet start for tf_posenc's own command line (`python -m tf_posenc`, `tf-posenc`).

TensorFlow writes its start-up lines (oneDNN, CUDA drivers) to the process's standard error
while it is imported, before any setting of ours could stop them. Only when this process is
tf_posenc's command line, TensorFlow is imported here first with those lines muted; a program
that imports tf_posenc is left as it is.
"""

import contextlib
import os
import sys


def is_command_line():
    """Whether this process is `python -m tf_posenc ...` or the `tf-posenc` script."""
    argv = getattr(sys, "orig_argv", [])
    as_module = "-m" in argv[:-1] and argv[argv.index("-m") + 1] == "tf_posenc"
    return as_module or os.path.basename(sys.argv[0] if sys.argv else "") == "tf-posenc"


@contextlib.contextmanager
def _standard_error_muted():
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def import_tensorflow_quietly():
    if "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with _standard_error_muted():
        import tensorflow  # noqa: F401
