import os
import re
from typing import NamedTuple

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
# What a check prints while its task still holds the placeholder `...`.
NOT_ANSWERED = "not answered yet: replace the ... in the cell above with your answer and run both cells\n"
# Wrong answers to each task, by the name the task assigns first: each must fail its check with a hint.
WRONG_ANSWERS = {
    "your_row": ["your_row = np.sin(3 / 10000 ** (np.arange(4) / 4))"],  # sines only, no pairing
    "move": [
        "def move(row, k):\n    return rows16[17]",  # the lookup the task forbids: right at one row only
        "def move(row, k):\n    return tf_posenc.shift_matrix(-k, 16) @ row",  # the wrong way round
    ],
    "alibi": [
        # a power of two's slopes, cut to the head count: right for 8 heads and 4, wrong for 6
        "def alibi(num_heads, length):\n    positions = np.arange(length)\n"
        "    return tf_posenc.AlibiBias(num_heads=8).bias(positions, positions).numpy()[0, :num_heads]",
    ],
    "ntk_base": [
        "def ntk_base(d, base, s):\n    return base * s",  # the base scaled like the frequencies
        "def ntk_base(d, base, s):\n    return 10000 * 4.0 ** (128 / 126)",  # the one case's number
    ],
    "rope": [
        "def rope(x, position):\n    return x",  # turns nothing
        # each feature scaled by its pair's cosine, the sine's part left out
        "def rope(x, position):\n    d = len(x)\n"
        "    return x * np.cos(position * 10000 ** -(np.arange(d) // 2 * 2 / d))",
    ],
    "rotate_pairs": ["rotate_pairs = lambda x: np.concatenate([-x[..., 4:], x[..., :4]], axis=-1)"],
    "mixed": [
        "mixed = OrderClassifier('learned')",  # untrained: a coin flip on the far set
        "mixed = dict.fromkeys(evaluations, 0.9)",  # numbers typed in, not a model
    ],
}
# A task's solution: the code of the first folded `<details>` block after its check.
SOLUTION = re.compile(r"<details>.*?```python\n(.*?)```", re.DOTALL)


class Task(NamedTuple):
    index: int  # of the cell that holds the answer; its check is the next cell
    answer: str  # the name the task assigns first
    check: str
    solution: str


def _tasks(notebook):
    cells, tasks = notebook.cells, []
    for index, cell in enumerate(cells):
        if cell.cell_type == "code" and cell.source.startswith("# Your turn"):
            # A value (`name = ...`) or a function to complete (`def name(...):` then `...`).
            found = re.search(r"^(\w+) = \.\.\.$|^def (\w+)\(", cell.source, re.MULTILINE)
            answer = found.group(1) or found.group(2)
            blocks = (
                SOLUTION.search(later.source) for later in cells[index + 2 :] if later.cell_type == "markdown"
            )
            solution = next(block for block in blocks if block).group(1)
            tasks.append(Task(index, answer, cells[index + 1].source, solution))
    return tasks


def _expect_rejection(wrong, check):
    body = "\n".join("    " + line for line in check.splitlines())
    return (
        f"{wrong}\ntry:\n{body}\nexcept AssertionError as error:\n    print('rejected:', error)\nelse:\n"
        "    raise RuntimeError('a wrong answer passed its check')"
    )


def _read(name):
    return nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)


def _execute(notebook):
    NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": NOTEBOOKS}}
    ).execute()


def _unanswered(task):
    return NOT_ANSWERED * task.check.count("check_answer(")


def _printed(cell):
    outputs = cell.get("outputs", [])
    return "".join(output["text"] for output in outputs if output.output_type == "stream")


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
    notebook = _read(name)
    tasks = _tasks(notebook)
    committed = len(notebook.cells)
    # After the notebook as committed, each task's solution and check run, then each wrong answer
    # and the check again. The second notebook's tasks are its last code cells, so there this is
    # the notebook with its solutions filled in; the first notebook's also run in place, below.
    for task in tasks:
        notebook.cells.append(nbformat.v4.new_code_cell(task.solution))
        notebook.cells.append(nbformat.v4.new_code_cell(task.check))
        for wrong in WRONG_ANSWERS[task.answer]:
            notebook.cells.append(nbformat.v4.new_code_cell(_expect_rejection(wrong, task.check)))
    _execute(notebook)
    outputs = [output for cell in _code_cells(notebook) for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    assert len(_images(notebook)) >= PLOTS[name]
    assert not _log_lines(notebook)
    printed = [_printed(cell) for cell in notebook.cells]
    assert [printed[task.index + 1] for task in tasks] == [_unanswered(task) for task in tasks]
    appended = iter(printed[committed:])
    for task in tasks:
        next(appended)  # the solution
        assert next(appended) == "right\n" * task.check.count("check_answer(")
        for _ in WRONG_ANSWERS[task.answer]:
            assert "rejected: not right yet. Hint: " in next(appended), task.answer


@pytest.mark.slow
def test_the_learners_tasks_pass_with_their_solutions_in_place():
    notebook = _read(LEARNER)
    tasks = _tasks(notebook)
    for task in tasks:
        notebook.cells[task.index].source = task.solution
    _execute(notebook)
    outputs = [output for cell in _code_cells(notebook) for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    assert [_printed(notebook.cells[task.index + 1]) for task in tasks] == ["right\n"] * len(tasks)


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_committed_notebook_carries_its_outputs(name):
    notebook = _read(name)
    code_cells = _code_cells(notebook)
    assert [cell.execution_count for cell in code_cells] == list(range(1, len(code_cells) + 1))
    assert len(_images(notebook)) >= PLOTS[name]
    assert not _log_lines(notebook)
    streams = [output for cell in code_cells for output in cell.outputs if output.output_type == "stream"]
    printed = "".join(output["text"] for output in streams)
    assert f"tf_posenc {tf_posenc.__version__} |" in printed  # run with this version, not an older one
    # Before the first section, the set-up prints one line (the versions) and shows nothing else.
    first = next(index for index, cell in enumerate(notebook.cells) if cell.source.startswith("## "))
    shown = [output for cell in notebook.cells[:first] if cell.cell_type == "code" for output in cell.outputs]
    assert len(shown) <= 1 and all(output.output_type == "stream" for output in shown), shown


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
    assert len(_tasks(notebook)) >= 3


@pytest.mark.parametrize("name", [LEARNER, "rotary_and_relative_positions.ipynb"])
def test_tasks_arrive_unanswered_with_a_check_and_a_folded_solution(name):
    notebook = _read(name)
    tasks = _tasks(notebook)  # each finds its solution in a `<details>` block after its check
    assert len(tasks) >= {LEARNER: 2}.get(name, 4)
    for task in tasks:
        lines = [line for line in notebook.cells[task.index].source.splitlines() if not line.startswith("#")]
        placeholder = r"\w+ = \.\.\.|def \w+\([\w, ]*\): \.\.\."
        assert all(re.fullmatch(placeholder, line) for line in lines), lines  # placeholders only
        assert "check_answer(" in task.check
        assert _printed(notebook.cells[task.index + 1]) == _unanswered(task)  # committed so
        assert task.answer in task.solution
