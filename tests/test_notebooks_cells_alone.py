"""The cells a learner is told to re-run work on their own, in a fresh kernel.

A learner comes back the next day, restarts the kernel and runs only the check cell of
"Your turn" (or the cell that shows the fix once solved): it must not need any cell above
it. Each such cell runs here alone, in a kernel of its own started in notebooks/, as
JupyterLab starts it.
"""
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from loopkata.model import catalogue

ROOT = Path(__file__).resolve().parents[1]
# Whether a cell imports what it calls does not depend on the Python: CI runs this on 3.11 only.
pytestmark = pytest.mark.python_independent
NOTEBOOKS = ["00_start_here.ipynb", *dict.fromkeys(k.notebook for k in catalogue.load())]
# The learner's own cells: a check of their copy, the fix shown once solved, the progress table.
LEARNER_CELL = re.compile(r'^\s*(check\("[^"]+"\)|once_solved\("[^"]+"\)|progress_table\(\))\s*$', re.M)


def _cells():
    for name in NOTEBOOKS:
        nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and LEARNER_CELL.search(cell.source):
                call = LEARNER_CELL.search(cell.source).group(1)
                yield pytest.param(name, i, id=f"{Path(name).stem}-cell-{i}-{call.split('(')[0]}")


@pytest.mark.parametrize("notebook, index", list(_cells()))
def test_a_cell_the_learner_re_runs_works_alone_in_a_fresh_kernel(notebook, index, tmp_path, monkeypatch):
    """a check cell (or the solved-page cell) runs alone after a kernel restart"""
    source = nbformat.read(ROOT / "notebooks" / notebook, as_version=4).cells[index].source
    alone = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path / "state"))
    NotebookClient(alone, timeout=180, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    errors = [f"{o['ename']}: {o['evalue']}" for o in alone.cells[0].outputs if o.get("output_type") == "error"]
    assert not errors, (
        f"{notebook}, cell {index}, run alone in a fresh kernel, raised {errors[0]}; it should import what it "
        f"uses, so a learner who restarts the kernel can run just this cell:\n{source}")
