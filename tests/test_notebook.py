import os
import re

import nbformat
import pytest
from nbclient import NotebookClient

import tf_posenc

NOTEBOOKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "notebooks")
# Each notebook with the fewest plots it must render.
PLOTS = {
    "positional_encoding_tutorial.ipynb": 6,
    "rotary_and_relative_positions.ipynb": 7,
    "tf_posenc_in_practice.ipynb": 2,
}
LEARNER = "positional_encoding_tutorial.ipynb"
# What TensorFlow's and CUDA's C++ start-up log lines look like.
LOG_LINE = re.compile(r"^[IWEF]\d{4} |absl::InitializeLog|cuda|oneDNN", re.MULTILINE)


def _code_cells(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def _images(notebook):
    return [
        output
        for cell in _code_cells(notebook)
        for output in cell.outputs
        if "image/png" in output.get("data", {})
    ]


def _log_lines(notebook):
    return [
        output["text"]
        for cell in _code_cells(notebook)
        for output in cell.outputs
        if output.output_type == "stream" and LOG_LINE.search(output["text"])
    ]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLOTS))
def test_notebook_runs_top_to_bottom(name):
    notebook = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": NOTEBOOKS}}
    ).execute()
    outputs = [output for cell in _code_cells(notebook) for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    assert len(_images(notebook)) >= PLOTS[name]
    assert not _log_lines(notebook)


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_committed_notebook_carries_its_outputs(name):
    notebook = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    code_cells = _code_cells(notebook)
    assert [cell.execution_count for cell in code_cells] == list(range(1, len(code_cells) + 1))
    assert len(_images(notebook)) >= PLOTS[name]
    assert not _log_lines(notebook)
    streams = [output for cell in code_cells for output in cell.outputs if output.output_type == "stream"]
    printed = "".join(output["text"] for output in streams)
    assert f"tf_posenc {tf_posenc.__version__} |" in printed  # run with this version, not an older one


def _read(name):
    return nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)


def test_notebooks_link_each_other_and_name_their_sources():
    text = {name: "".join(cell.source for cell in _read(name).cells) for name in PLOTS}
    for name, others in (
        (LEARNER, ("rotary_and_relative_positions.ipynb", "tf_posenc_in_practice.ipynb")),
        ("rotary_and_relative_positions.ipynb", (LEARNER, "tf_posenc_in_practice.ipynb")),
        ("tf_posenc_in_practice.ipynb", (LEARNER,)),
    ):
        assert all(other in text[name] for other in others), name
    references = text[LEARNER][text[LEARNER].index("## References") :]
    for source in ("arxiv.org/abs/1706.03762", "arxiv.org/abs/2104.09864", "tensorflow.org/text/tutorials"):
        assert source in references


def test_the_learners_notebook_is_short_with_small_cells_and_tasks_it_checks():
    notebook = _read(LEARNER)
    cells = notebook.cells
    words = sum(len(re.findall(r"\S+", cell.source)) for cell in cells if cell.cell_type == "markdown")
    assert words <= 3500
    assert max(len(cell.source.splitlines()) for cell in _code_cells(notebook)) <= 25
    # Each "your turn" task is a code cell holding the learner's answer, and the next cell checks it.
    tasks = [index for index, cell in enumerate(cells) if cell.source.startswith("# Your turn")]
    assert len(tasks) >= 2
    for index in tasks:
        assert cells[index].cell_type == "code" and "assert " in cells[index + 1].source
