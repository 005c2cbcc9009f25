import os
import subprocess
import sys


def run_python(code, cwd, timeout=300):
    """Runs `code` in a fresh interpreter in `cwd` and returns its stdout; fails on a non-zero exit."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONWARNINGS": "ignore"}
    completed = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env,
                               capture_output=True, text=True, timeout=timeout)
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed.stdout
