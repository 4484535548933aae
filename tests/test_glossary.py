"""The glossary and the notebooks agree.

- every glossary term a notebook uses is a link to its entry at its first use
  (first use: see loopkata/authoring/glossary.py; `python -m loopkata.authoring.glossary --write` adds the links);
- every link to glossary.md points at an entry that exists;
- every entry is short, and its "Shown in" links open notebooks that exist, by their titles;
- the rules that decide a first use, and `--write`, on a notebook made for the purpose.
"""
import json
import re
from pathlib import Path

import pytest

from loopkata.authoring import glossary
from loopkata.model import catalogue

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
GLOSSARY = ROOT / "notebooks" / glossary.GLOSSARY
TERMS = glossary.load(GLOSSARY)
KATAS = {k.notebook: k for k in catalogue.load()}

# Terms a junior meets in the notebooks and must be able to look up.
REQUIRED = [
    "event loop", "coroutine", "task", "await", "asyncio.run", "cancellation", "serverless function",
    "cold invocation", "warm invocation", "worker fleet", "bound to a loop", "garbage collection", "reference",
    "weak reference", "WeakKeyDictionary", "reference cycle", "thread", "threadpool", "GIL", "read-modify-write",
    "atomic", "reentrant lock", "liveness probe", "pod", "container", "kubelet", "flock", "open file description",
    "middleware", "broker", "Procfile", "SSE", "keepalive", "traceback", "frame", "exc_info", "write-behind",
    "double-checked cache", "connection pool", "async engine", "worker thread", "threading.Event",
]


def test_every_required_term_has_an_entry():
    """the glossary has an entry for every term the notebooks rely on"""
    names = {t.name for t in TERMS}
    missing = [name for name in REQUIRED if name not in names]
    assert not missing, f"notebooks/glossary.md has no entry for {missing}"


@pytest.mark.parametrize("term", TERMS, ids=[t.anchor for t in TERMS])
def test_each_entry_is_short_and_says_where_it_is_shown(term):
    """an entry is one to three plain sentences, and names at least one notebook that shows it"""
    prose = re.sub(r"`[^`]*`", "code", term.text)
    sentences = len(re.findall(r"[.!?](?=\s|$)", prose))
    assert 1 <= sentences <= 3, (
        f"glossary.md, line {term.line}: the entry {term.name!r} has {sentences} sentences; expected 1 to 3:\n{term.text}"
    )
    assert term.shown_in, f"glossary.md, line {term.line}: the entry {term.name!r} has no 'Shown in:' line with links"


def _heading_ids(notebook: Path) -> set[str]:
    ids = set()
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if m := re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line):
                    ids.add(glossary.jupyterlab_id(m.group(1)))
    return ids


@pytest.mark.parametrize("term", TERMS, ids=[t.anchor for t in TERMS])
def test_shown_in_links_resolve(term):
    """every "Shown in" link opens a notebook that exists, and reads the notebook's catalogue title"""
    anchors = {t.anchor for t in TERMS}
    for text, target in term.shown_in:
        path, _, fragment = target.partition("#")
        where = f"glossary.md, entry {term.name!r}: the link [{text}]({target})"
        assert (GLOSSARY.parent / path).is_file(), f"{where} points at notebooks/{path}, which does not exist"
        if path.endswith(".ipynb") and fragment:
            assert fragment in _heading_ids(GLOSSARY.parent / path), f"{where}: {path} has no heading #{fragment}"
        if path == glossary.GLOSSARY and fragment:
            assert fragment in anchors, f"{where}: the glossary has no entry #{fragment}"
        if path in KATAS:
            kata = KATAS[path]
            assert text == f"{kata.number:02d} · {kata.title}", (
                f"{where} reads {text!r}; expected '{kata.number:02d} · {kata.title}' (the catalogue's title)"
            )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_glossary_link_points_at_an_entry(notebook):
    """every link to glossary.md#anchor in a notebook's markdown points at an entry that exists"""
    broken = glossary.broken_links(notebook, TERMS)
    none_broken = not broken
    assert none_broken, f"{notebook.name} links to glossary entries that do not exist:\n" + "\n".join(
        f"  cell {cell}: [{text}](glossary.md#{anchor})" for cell, text, anchor in broken
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_term_is_linked_at_its_first_use(notebook):
    """each glossary term a notebook uses is a link to its glossary entry where the notebook first uses it"""
    missing = glossary.missing_links(notebook, TERMS)
    all_linked = not missing
    assert all_linked, (
        f"{notebook.name}: {len(missing)} glossary terms are not linked where the notebook first uses them "
        f"(`python -m loopkata.authoring.glossary --write notebooks/{notebook.name}` links them):\n"
        + "\n".join(f"  {t.name!r}, cell {u.cell}: {u.sentence}" for t, u in missing)
    )


# --- the rules, on a notebook made for the purpose ---------------------------------------------

SAMPLE_GLOSSARY = """# Glossary

## <a id="event-loop"></a>event loop
<!-- matches: event-loop -->
The scheduler.

Shown in: [primer](00b_primer.ipynb).

## <a id="asyncio.run"></a>asyncio.run
Makes a loop.

Shown in: [primer](00b_primer.ipynb).

## <a id="reference"></a>reference
<!-- not: reference fix -->
A pointer to an object.

Shown in: [primer](00b_primer.ipynb).

## <a id="weak-reference"></a>weak reference
A reference that does not keep its object alive.

Shown in: [primer](00b_primer.ipynb).

## <a id="cancellation"></a>cancellation
<!-- matches: cancelled; CancelledError -->
Stopping a task.

Shown in: [primer](00b_primer.ipynb).
"""


def _sample(tmp_path: Path, cells: list[dict]) -> tuple[Path, tuple]:
    (tmp_path / "glossary.md").write_text(SAMPLE_GLOSSARY, encoding="utf-8")
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "sample.ipynb"
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return path, glossary.load(tmp_path / "glossary.md")


def _md(text: str) -> dict:
    return {"cell_type": "markdown", "id": "m", "metadata": {}, "source": text.splitlines(keepends=True)}


def _code(text: str) -> dict:
    return {"cell_type": "code", "id": "c", "execution_count": 1, "metadata": {},
            "outputs": [{"name": "stdout", "output_type": "stream", "text": ["the event loop is closed\n"]}],
            "source": text.splitlines(keepends=True)}


def test_first_use_skips_headings_code_links_and_html(tmp_path):
    """a heading, fenced code, a code span around more than the term, a link's text and an HTML comment are not uses"""
    path, terms = _sample(tmp_path, [
        _md("# The event loop\n\n```python\n# an event loop\n```\n\nSee `loop = event loop` and "
            "[the event loop](other.md). <!-- event loop -->\n\nThe reference fix is short."),
        _code("# the event loop\nasyncio.run(main())"),
        _md("Then the Event\nLoop runs, and a reference is kept."),
    ])
    firsts = glossary.first_uses(path, terms)
    assert (firsts["event-loop"].cell, firsts["event-loop"].text) == (2, "Event\nLoop")
    assert (firsts["reference"].cell, firsts["reference"].text) == (2, "reference")
    assert "asyncio.run" not in firsts, "a code cell is never read"


def test_first_use_longest_term_and_whole_code_span(tmp_path):
    """'weak reference' is not a use of 'reference'; a code span holding exactly a term's spelling is a use"""
    path, terms = _sample(tmp_path, [
        _md("A weak reference, then `asyncio.run()`, and `asyncio.run(main())` is code."),
        _md("A task is cancelled; a reference."),
    ])
    firsts = glossary.first_uses(path, terms)
    assert (firsts["weak-reference"].cell, firsts["weak-reference"].text) == (0, "weak reference")
    assert (firsts["reference"].cell, firsts["reference"].text) == (1, "reference")
    assert (firsts["asyncio.run"].kind, firsts["asyncio.run"].text) == ("code span", "`asyncio.run()`")
    assert firsts["cancellation"].text == "cancelled"


def test_write_links_first_uses_only_in_markdown_and_is_idempotent(tmp_path):
    """--write links each first use once, leaves code cells and outputs alone, and a second run changes nothing"""
    path, terms = _sample(tmp_path, [
        _md("The event loop, then `asyncio.run()`. The event loop again."),
        _code("# the event loop\nasyncio.run(main())"),
        _md("Already linked: [the loop](glossary.md#weak-reference), and a weak reference later."),
    ])
    before = json.loads(path.read_text(encoding="utf-8"))
    done = glossary.link_first_uses(path, terms)
    assert sorted(t.anchor for t, _ in done) == ["asyncio.run", "event-loop"]
    after = json.loads(path.read_text(encoding="utf-8"))
    assert "".join(after["cells"][0]["source"]) == (
        "The [event loop](glossary.md#event-loop), then [`asyncio.run()`](glossary.md#asyncio.run). The event loop again."
    )
    assert after["cells"][1] == before["cells"][1], "a code cell, its outputs included, is left as it was"
    assert after["cells"][2] == before["cells"][2], "a term already linked at its first use is left as it is"
    assert glossary.missing_links(path, terms) == []
    text = path.read_text(encoding="utf-8")
    assert glossary.link_first_uses(path, terms) == []
    assert path.read_text(encoding="utf-8") == text


def test_a_link_to_a_missing_entry_is_reported(tmp_path):
    """a link to glossary.md#anchor without such an entry is broken"""
    path, terms = _sample(tmp_path, [_md("See [the loop](glossary.md#event-loops).")])
    assert glossary.broken_links(path, terms) == [(0, "the loop", "event-loops")]


def test_an_anchor_that_jupyterlab_would_not_find_is_refused(tmp_path):
    """an entry's anchor must be the id JupyterLab gives its heading"""
    (tmp_path / "glossary.md").write_text('## <a id="event_loop"></a>event loop\nThe scheduler.\n', encoding="utf-8")
    with pytest.raises(glossary.GlossaryError, match="not the id JupyterLab gives the heading"):
        glossary.load(tmp_path / "glossary.md")
