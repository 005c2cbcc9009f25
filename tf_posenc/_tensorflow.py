"""Internal: TensorFlow, imported at its first use.

On Keras's JAX and PyTorch backends the layers never reach TensorFlow, so importing tf_posenc
there imports none (it costs seconds and hundreds of MiB, and TensorFlow 2.21 crashes a process
that loads triton after it). The modules that use it on the TensorFlow backend name it `tf`.
"""

import importlib
import sys


class _TensorFlow:
    """`tensorflow`'s attributes, the module imported at the first one read."""

    def __getattr__(self, name):
        return getattr(importlib.import_module("tensorflow"), name)


tf = _TensorFlow()


def loaded():
    """TensorFlow if this process has imported it, else None: without it no value is a
    TensorFlow tensor."""
    return sys.modules.get("tensorflow")
