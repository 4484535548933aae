"""A notebook stays true after its kata is solved.

Each notebook is run again in a copy of the project whose katas/ hold the
reference fixes, as a learner's checkout does once every kata is solved. Every
cell that reproduces the naive code must print what the stored notebook prints
(it runs the pristine starter, never the learner's file); only the cells that
grade the learner's copy, or open once it is solved, may differ.
"""
import ast
import configparser
import re
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from loopkata.model import catalogue

ROOT = Path(__file__).resolve().parents[1]
# Whether a cell reads the learner's file is a property of the notebook's code, not of the Python:
# CI runs this on 3.11 only; nbval compares every cell's output on every Python.
pytestmark = pytest.mark.python_independent
KATAS = catalogue.load()
# Cells that look at the learner's own copy or progress: they are meant to change once it is solved.
LEARNER_CELLS = re.compile(r'\bcheck\("[^"]+"\)\s*$|once_solved\(|progress_table\(', re.M)


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names a cell binds, names it reads from earlier cells); a cell Python cannot parse (a magic)
    binds nothing.

    Only what the cell binds at its top level counts (a function's locals are its own), and a name
    the cell binds itself is not read from an earlier cell: every cell imports what it calls, and
    `for run in ...` makes its own `run`. A cell that reads a name before binding it (`x = x + 1`)
    would then be run without the cell that made it, and fail with NameError: loudly, not wrongly."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set()
    binds, reads = set(), set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds.add(node.name)
            # what it reads from the cell's namespace: every name loaded in it (decorators, defaults, body)
            reads |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            binds |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
            continue
        if isinstance(node, ast.Name):
            (reads if isinstance(node.ctx, ast.Load) else binds).add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return binds, reads - binds


def compared(source: str) -> bool:
    """Whether this test compares the cell's output with the stored notebook's."""
    return not (LEARNER_CELLS.search(source) or "NBVAL_IGNORE_OUTPUT" in source)


def not_needed(sources: list[str]) -> set[int]:
    """The cells this test need not run: output not compared, and nothing they bind is read by a
    cell that is run after them (walked from the last cell back). Such a cell can change what a
    compared cell prints only through a name, which this follows; a check cell, a figure of many
    runs or a decoy graded for show costs a stay-true run its time and proves nothing here."""
    wanted, skip = set(), set()
    for i in reversed(range(len(sources))):
        binds, reads = _names(sources[i])
        if compared(sources[i]) or binds & wanted:
            wanted |= reads
        else:
            skip.add(i)
    return skip


def sanitizers() -> list[tuple[re.Pattern, str]]:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "notebooks" / "sanitize.cfg")
    return [(re.compile(cfg[s]["regex"]), cfg[s]["replace"]) for s in cfg.sections()]


def text_of(outputs, rules) -> str:
    # A stream may arrive in several messages, split anywhere: join streams as one text,
    # as nbval does, and put every other output on its own lines.
    text = ""
    for out in outputs:
        if out.get("output_type") == "stream":
            text += "".join(out["text"]) if isinstance(out["text"], list) else out["text"]
        elif out.get("output_type") in ("execute_result", "display_data"):
            plain = out.get("data", {}).get("text/plain", "")
            text += ("".join(plain) if isinstance(plain, list) else plain) + "\n"
        elif out.get("output_type") == "error":
            text += f"{out['ename']}: {out['evalue']}\n"
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    return text


@pytest.fixture(scope="module")
def solved_project():
    """A copy of the project with every kata solved (solutions/ copied over katas/).

    Not under pytest's own temporary folder: any pytest process that starts (a check's
    grading run, say) takes group and other access off /tmp/pytest-of-<user>, and the
    PostgreSQL a notebook starts in the copy runs as another user when we are root: it
    would lose its own data folder in the middle of a query (PANIC, "Permission denied")."""
    with tempfile.TemporaryDirectory(prefix="loopkata-solved-", ignore_cleanup_errors=True) as tmp:
        yield _solved_copy(Path(tmp) / "project")


def _solved_copy(root: Path) -> Path:
    """Copy the project to `root`, with each kata's reference fix in katas/."""
    for part in ("katas", "solutions", "tests", "notebooks"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    if (ROOT / ".git").exists():
        shutil.copytree(ROOT / ".git", root / ".git")  # the shipped starters are found by their git blob ids
    for kata in KATAS:
        target = root / "katas" / kata.path
        if target.is_dir():
            shutil.rmtree(target)
            shutil.copytree(root / "solutions" / kata.path, target)
        else:
            shutil.copy2(root / "solutions" / kata.path, target)
    return root


@pytest.mark.parametrize("kata", KATAS, ids=[k.id for k in KATAS])
def test_reproductions_still_show_the_bug_once_the_kata_is_solved(kata, solved_project, tmp_path, monkeypatch):
    """a solved kata leaves the notebook's reproductions of the naive code unchanged"""
    stored = nbformat.read(ROOT / "notebooks" / kata.notebook, as_version=4)
    fresh = nbformat.read(solved_project / "notebooks" / kata.notebook, as_version=4)
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path / "state"))
    monkeypatch.delenv("LOOPKATA_ROOT", raising=False)
    code = [cell for cell in fresh.cells if cell.cell_type == "code"]
    for i in not_needed([cell.source for cell in code]):
        code[i].source = "pass  # not run here: see not_needed"
    NotebookClient(fresh, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(solved_project / "notebooks")}}).execute()
    rules = sanitizers()
    for i, (before, after) in enumerate(zip(stored.cells, fresh.cells)):
        if before.cell_type != "code" or not compared(before.source):
            continue
        was, now = text_of(before.get("outputs", []), rules), text_of(after.get("outputs", []), rules)
        assert now == was, (
            f"{kata.notebook}, cell {i}: with the kata solved, this cell prints something else than the "
            f"stored notebook, so it depends on the learner's file (use pristine_starter(\"{kata.id}\")).\n"
            f"--- stored\n{was[:1500]}\n--- with the kata solved\n{now[:1500]}"
        )
