"""Every ```python block of README.md and docs/*.md runs: page by page, top to bottom, each page in
a namespace and working directory of its own. Pages share one fresh interpreter, except a page
whose first block sets the environment (`os.environ[...]` before Keras is imported: the JAX
backend, tf_keras): that page runs in its world's interpreter (`WORLDS`), with the world's other
checks.

Run as a script with page paths, this module is that interpreter: it runs the pages and prints
one JSON line per page, `{"page": ..., "error": null or the traceback, "seconds": ...}`."""

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time
import traceback

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def python_blocks(page):
    """The page's ```python blocks, in order, with the line each starts on."""
    text = page.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start(1)) + 1, match.group(1))
        for match in re.finditer(r"^```python\n(.*?)^```$", text, re.M | re.S)
    ]


# The pages that set the environment, and the test module whose world interpreter runs each.
WORLDS = {"backends.md": "test_jax.py", "keras2.md": "test_tf_keras.py"}


def page_in_world(name, into):
    """Source for a world's script: runs docs/`name` as `run_page` does and puts its traceback, or
    None, in `into["docs"]`."""
    return (
        f"import pathlib, sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        f"from test_docs import run_page\n"
        f"{into}['docs'] = run_page(pathlib.Path({str(ROOT / 'docs' / name)!r}))\n"
    )


def sets_the_environment(page):
    blocks = python_blocks(page)
    return bool(blocks) and "os.environ[" in blocks[0][1]


def run_page(page):
    """Runs a page's blocks in order in a namespace and directory of its own; the traceback of
    the first failure, or None."""
    namespace = {"__name__": "__main__"}
    previous = os.getcwd()
    with tempfile.TemporaryDirectory() as directory:
        os.chdir(directory)
        try:
            for line, block in python_blocks(page):
                # Compiled at the page's lines, under its path: tracebacks point into the page, and
                # what reads a function's source (autograph) finds it there.
                code = compile("\n" * (line - 1) + block, str(page), "exec")
                exec(code, namespace)
        except BaseException:
            return traceback.format_exc()
        finally:
            os.chdir(previous)
            if "keras" in sys.modules:
                # What a page sets globally does not reach the next page.
                keras = sys.modules["keras"]
                keras.config.set_dtype_policy("float32")
                keras.utils.clear_session()
    return None


def run_in_fresh_interpreter(pages):
    result = subprocess.run(
        [sys.executable, __file__, *map(str, pages)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT)},
    )
    reports = [json.loads(line) for line in result.stdout.splitlines() if line.startswith('{"page"')]
    print(*(f"{report['page']}: {report['seconds']} s" for report in reports), sep="\n")
    assert [report["page"] for report in reports] == [str(page) for page in pages], result.stderr[-4000:]
    return {report["page"]: report["error"] for report in reports}


def test_every_page_has_python_blocks_that_the_test_sees():
    # A block indented in a list, or fenced as ```py, would not run: the pages use neither.
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        fences = re.findall(r"^\s*```(\S*)", text, re.M)
        opening = fences[::2]
        assert set(opening) <= {"python", "bash", "text", "bibtex", "yaml"}, (page, set(opening))
        assert len(re.findall(r"^```python", text, re.M)) == len(python_blocks(page)), page


def test_every_public_name_has_an_api_entry():
    import tf_posenc

    text = "".join(page.read_text(encoding="utf-8") for page in (ROOT / "docs" / "api").glob("*.md"))
    documented = set(re.findall(r"^::: tf_posenc\.(\w+)$", text, re.M))
    assert documented >= set(tf_posenc.__all__) - {"__version__"}


def test_every_page_that_sets_the_environment_runs_in_its_world():
    assert {page.name for page in PAGES if sets_the_environment(page)} == set(WORLDS)
    for name, module in WORLDS.items():
        assert f'page_in_world("{name}"' in (ROOT / "tests" / module).read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_pages_python_blocks_run():
    shared = [page for page in PAGES if python_blocks(page) and not sets_the_environment(page)]
    errors = run_in_fresh_interpreter(shared)
    failed = {page: error for page, error in errors.items() if error}
    assert not failed, "\n\n".join(f"{page}:\n{error}" for page, error in failed.items())
    assert len(errors) >= 11


if __name__ == "__main__":
    for path in sys.argv[1:]:
        start = time.perf_counter()
        error = run_page(pathlib.Path(path))
        report = {"page": path, "error": error, "seconds": round(time.perf_counter() - start, 1)}
        print(json.dumps(report), flush=True)


def test_the_version_is_the_changelogs_newest_release():
    import tf_posenc

    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## (\d+\.\d+\.\d+) — \d{4}-\d{2}-\d{2}$", text, re.MULTILINE)
    assert releases[0] == tf_posenc.__version__
