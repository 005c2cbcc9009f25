import os

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "notebooks")
TUTORIAL = os.path.join(NOTEBOOKS, "positional_encoding_tutorial.ipynb")


@pytest.mark.slow
def test_tutorial_runs_top_to_bottom():
    notebook = nbformat.read(TUTORIAL, as_version=4)
    NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": NOTEBOOKS}}
    ).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert len(images) >= 4


def test_committed_tutorial_carries_its_outputs():
    notebook = nbformat.read(TUTORIAL, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in code_cells)
    rendered = [
        output for cell in code_cells for output in cell.outputs if "image/png" in output.get("data", {})
    ]
    assert len(rendered) >= 4
