"""A notebook stays true after its kata is solved.

The suite's nbval runs every notebook in a copy of the project whose katas/ hold the reference
fixes, as a learner's checkout is once every kata is solved (conftest.py, `--notebook-katas=solved`,
the default), and compares every cell with the stored notebook but the ones that look at the
learner's own copy or progress. A reproduction that read the learner's file instead of
`pristine_starter(...)` would print something else there, and fail. This test proves that
the suite's default run catches such a cell, and that the same cell passes as shipped.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.python_independent
KATA = "01_bound_semaphore.py"


def probe_project(tmp_path: Path, source: str, stored: str) -> Path:
    """A project with the suite's conftest, the katas and their fixes, and one notebook."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy2(ROOT / name, project / name)
    for part in ("katas", "solutions"):
        shutil.copytree(ROOT / part, project / part, ignore=shutil.ignore_patterns("__pycache__"))
    (project / "notebooks").mkdir()
    shutil.copy2(ROOT / "notebooks" / "sanitize.cfg", project / "notebooks" / "sanitize.cfg")
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                                           "language": "python"}})
    cell = nbformat.v4.new_code_cell(source, execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored)]
    nb.cells.append(cell)
    nbformat.write(nb, project / "notebooks" / "probe.ipynb")
    return project


def nbval(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "notebooks/probe.ipynb", *args],
                          cwd=project, capture_output=True, text=True, timeout=180)


def test_a_cell_that_reads_the_learners_file_fails_once_the_kata_is_solved(tmp_path):
    """a notebook cell that reads the learner's kata file passes as shipped and fails in the suite's run"""
    shipped = len((ROOT / "katas" / KATA).read_text())
    assert shipped != len((ROOT / "solutions" / KATA).read_text())
    project = probe_project(tmp_path, f"import pathlib\nprint(len(pathlib.Path('../katas/{KATA}').read_text()))",
                            f"{shipped}\n")
    as_shipped = nbval(project, "--notebook-katas=shipped")
    assert as_shipped.returncode == 0, f"expected the probe to pass as shipped:\n{as_shipped.stdout[-3000:]}"
    solved = nbval(project)
    assert solved.returncode == 1 and "1 failed" in solved.stdout, (
        f"expected the suite's default run (katas solved) to fail the probe, which reads katas/{KATA}:\n"
        f"{solved.stdout[-3000:]}")


def test_a_check_cell_may_differ_once_the_kata_is_solved(tmp_path):
    """the learner's own cells (a check, the fix once solved, the progress table) are not compared"""
    project = probe_project(tmp_path, 'print("not solved")  # stands for check("bound-semaphore")\n'
                            'check = print\ncheck("bound-semaphore")', "something else\n")
    assert nbval(project).returncode == 0
