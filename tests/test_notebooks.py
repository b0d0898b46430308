"""The notebooks run top to bottom (outputs are stripped in git, so they can only rot loudly
here)."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_notebooks_are_stored_without_outputs():
    assert len(NOTEBOOKS) == 12
    for path in NOTEBOOKS:
        cells = json.loads(path.read_text())["cells"]
        assert all(
            not c.get("outputs") and c.get("execution_count") is None
            for c in cells
            if c["cell_type"] == "code"
        ), path.name
        assert all(c.get("id") for c in cells), f"{path.name}: a cell without an id (nbformat 4.5)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    errors = [
        o
        for c in notebook.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert errors == []
