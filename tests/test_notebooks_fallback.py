"""A notebook whose kata needs a kernel mechanism runs where the machine lacks it, and says so.

Binder and a JupyterHub give no root: no cgroup, often no PID namespace. There the notebooks of
katas 14-16 must still run from top to bottom, show the fallback, and say in a sentence what is
missing. LOOPKATA_CONTAINER=fallback makes any machine look like that (loopkata.services.containers).
"""
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from loopkata.model import catalogue
from loopkata.services import containers

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.python_independent  # what runs where is decided by the kernel, not the Python
KATAS = [k for k in catalogue.load() if k.mechanisms]


@pytest.mark.parametrize("kata", KATAS, ids=[k.id for k in KATAS])
def test_the_notebook_runs_on_the_fallback_and_says_so(kata, tmp_path, monkeypatch):
    """without the kernel's mechanism the notebook runs to the end and says what is missing"""
    monkeypatch.setenv(containers.FORCE, "fallback")
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path / "state"))
    nb = nbformat.read(ROOT / "notebooks" / kata.notebook, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3", allow_errors=False,
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    shown = "\n".join(
        "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
        + "".join(out.get("data", {}).get("text/html", ""))
        for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", []))
    assert f"{containers.FORCE}=fallback is set" in shown, (
        f"expected {kata.notebook}, run with {containers.FORCE}=fallback, to say why it shows the fallback "
        "(the sentence of containers.missing()), and no cell output says it")
