"""The glossary's terms, and where each notebook first uses them.

`notebooks/glossary.md` holds one entry per term:

    ## <a id="event-loop"></a>event loop
    <!-- matches: event loop; event-loop -->
    One to three plain sentences.

    Shown in: [primer](00b_primer.ipynb), [01 · The semaphore bound to a dead loop](01_bound_semaphore.ipynb).

The anchor is the `<a id>` in the heading, and it must be the id JupyterLab gives the heading
(its text, spaces turned into hyphens), so that `glossary.md#event-loop` scrolls there in
JupyterLab and on other renderers alike. A term matches its heading's text and every spelling
on its `matches:` line (`;`-separated, case-insensitive, whole words, an optional plural `s`/`es`;
a spelling written `re:PATTERN` is a regular expression). A `not:` line lists phrases in which a
spelling is not this term ("reference fix" is not a reference to an object).

The FIRST USE of a term in a notebook is its first occurrence, in cell order, in the prose of a
markdown cell. Not counted: headings, fenced code, text inside links, HTML tags and comments, and
code spans, except a code span that holds exactly one of the term's spellings (`` `asyncio.run()` ``,
`` `exc_info` ``): that code span is a use of the term. Where two terms overlap ("weak reference"
and "reference"), the longer match is the use. A link to `glossary.md#<anchor>` is a linked use
of that anchor's term, whatever its text. Code cells and outputs are never read or changed.

    python -m loopkata.authoring.glossary --check [NOTEBOOK ...]   # first uses that are not links; broken links
    python -m loopkata.authoring.glossary --write [NOTEBOOK ...]   # turn each unlinked first use into a link
    python -m loopkata.authoring.glossary --list  [NOTEBOOK ...]   # every term's first use, linked or not

Without NOTEBOOK, every notebook in notebooks/. `--write` changes markdown cells only and is
idempotent (a second run changes nothing); re-trust a changed notebook with `jupyter trust`.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ..model.catalogue import project_root

GLOSSARY = "glossary.md"

_HEADING = re.compile(r'^##\s+<a id="([^"]+)"></a>\s*(.+?)\s*#*\s*$')
_MATCHES = re.compile(r"^<!--\s*matches:(.*?)-->\s*$")
_NOT = re.compile(r"^<!--\s*not:(.*?)-->\s*$")
_SHOWN = re.compile(r"^Shown in:\s*(.*)$")
_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_GLOSSARY_LINK = re.compile(r"^(?:\./)?" + re.escape(GLOSSARY) + r"#(.+)$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_CODE_SPAN = re.compile(r"(?<!`)(`+)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.DOTALL)
_HTML = re.compile(r"<!--.*?-->|</?[A-Za-z][^>\n]*>|<(?:https?|mailto):[^>\s]*>", re.DOTALL)
_CALL = re.compile(r"\s*\((?:\.\.\.|…)?\)\s*$")
_MASK = "\0"  # neither a word character nor a space: no match crosses it
_WORD = r"[\w-]"


def _words(spelling: str) -> str:
    """A spelling as a regular expression: its words, with any run of white space between them."""
    return r"\s+".join(re.escape(w) for w in spelling.split())


def _phrase(spelling: str) -> str:
    return rf"(?<!{_WORD}){_words(spelling)}(?!{_WORD})"


class GlossaryError(Exception):
    """The glossary file is not in the shape this module reads."""


@dataclass(frozen=True)
class Term:
    name: str
    anchor: str
    spellings: tuple[str, ...]
    patterns: tuple[str, ...]
    not_in: tuple[str, ...]
    shown_in: tuple[tuple[str, str], ...]  # (link text, target) of its "Shown in:" line
    text: str  # the entry's paragraphs, as written
    line: int  # of its heading in glossary.md

    def regex(self) -> re.Pattern:
        words = "|".join(sorted((_words(s) for s in self.spellings), key=len, reverse=True))
        alternatives = [rf"(?<!{_WORD})(?:{words})(?:e?s)?(?!{_WORD})"]
        alternatives += [rf"(?<!{_WORD})(?:{p})(?!{_WORD})" for p in self.patterns]
        return re.compile("|".join(alternatives), re.IGNORECASE)

    def code_names(self) -> set[str]:
        return {s.lower() for s in self.spellings}


@dataclass(frozen=True)
class Use:
    notebook: str
    cell: int
    start: int  # in the cell's source
    end: int
    text: str  # as written, code span backticks included
    kind: str  # "prose", "code span" or "link"
    sentence: str

    @property
    def linked(self) -> bool:
        return self.kind == "link"


def project_notebooks(root: Path | None = None) -> Path:
    if root is None:
        root = project_root()
    return Path(root) / "notebooks"


def jupyterlab_id(heading_text: str) -> str:
    """The id JupyterLab gives a markdown heading: its text content, spaces turned into hyphens."""
    text = _HTML.sub("", heading_text)
    text = re.sub(r"`+|\*+|(?<!\w)_+|_+(?!\w)", "", text)
    return text.strip().replace(" ", "-")


def load(path: Path | None = None) -> tuple[Term, ...]:
    """The glossary's terms, in the order they are written."""
    path = path or project_notebooks() / GLOSSARY
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    if not starts:
        raise GlossaryError(f"{path}: no entry (an entry starts with a '## ' heading)")
    terms, anchors = [], {}
    for k, i in enumerate(starts):
        where = f"{path.name}, line {i + 1}"
        body = lines[i + 1:starts[k + 1] if k + 1 < len(starts) else len(lines)]
        head = _HEADING.match(lines[i])
        if head is None:
            raise GlossaryError(f'{where}: expected a heading \'## <a id="anchor"></a>term\', got {lines[i]!r}')
        anchor, name = head.groups()
        if jupyterlab_id(name) != anchor:
            raise GlossaryError(
                f"{where}: the anchor {anchor!r} is not the id JupyterLab gives the heading {name!r} "
                f"({jupyterlab_id(name)!r}): make them the same, so that links work in JupyterLab too"
            )
        if anchor in anchors:
            raise GlossaryError(f"{where}: the anchor {anchor!r} is also used on line {anchors[anchor]}")
        anchors[anchor] = i + 1
        spellings, patterns, not_in, shown, text = [re.sub(r"[`*]", "", name)], [], [], [], []
        for line in body:
            if m := _MATCHES.match(line):
                for s in (p.strip() for p in m.group(1).split(";")):
                    if s.startswith("re:"):
                        patterns.append(s[3:].strip())
                    elif s:
                        spellings.append(s)
            elif m := _NOT.match(line):
                not_in += [p.strip() for p in m.group(1).split(";") if p.strip()]
            elif m := _SHOWN.match(line):
                shown += [(t, target) for t, target in _LINK.findall(m.group(1))]
            else:
                text.append(line)
        terms.append(Term(name, anchor, tuple(dict.fromkeys(spellings)), tuple(patterns), tuple(not_in),
                          tuple(shown), "\n".join(text).strip(), i + 1))
    return tuple(terms)


# --- reading a markdown cell --------------------------------------------------

def _masked(source: str) -> tuple[str, list[tuple[int, int, str]], list[tuple[int, int, str]]]:
    """The cell's source with everything that is not prose replaced by _MASK (same length),
    its links to the glossary as (start, end, anchor), and its code spans outside links as
    (start, end, content)."""
    out = list(source)

    def mask(a: int, b: int) -> None:
        out[a:b] = _MASK * (b - a)

    # block level: fenced code, ATX headings and setext headings
    offset, fence, lines = 0, None, source.splitlines(keepends=True)
    for n, line in enumerate(lines):
        end = offset + len(line)
        if fence:
            mask(offset, end)
            if line.strip().startswith(fence):
                fence = None
        elif m := _FENCE.match(line):
            fence = m.group(1)[0] * 3
            mask(offset, end)
        elif _ATX.match(line):
            mask(offset, end)
        elif (n + 1 < len(lines) and line.strip() and _SETEXT.match(lines[n + 1]) and not _SETEXT.match(line)
              and not line.lstrip().startswith(("-", "*", "+", ">", "|"))):
            mask(offset, end)  # a setext heading: a line of text underlined with === or ---
        offset = end
    # inline: code spans first (a backtick wins over a bracket), then links, then HTML
    spans = [(m.start(), m.end(), m.group(2).strip()) for m in _CODE_SPAN.finditer("".join(out))
             if _MASK not in m.group(0)]
    for a, b, _ in spans:
        mask(a, b)
    links, glossary_links = [], []
    for m in _LINK.finditer("".join(out)):
        links.append((m.start(), m.end()))
        if g := _GLOSSARY_LINK.match(source[m.start(2):m.end(2)]):
            glossary_links.append((m.start(), m.end(), g.group(1)))
    for a, b in links:
        mask(a, b)
    spans = [s for s in spans if not any(a <= s[0] < b for a, b in links)]
    for m in _HTML.finditer("".join(out)):
        mask(m.start(), m.end())
    return "".join(out), glossary_links, spans


def sentence_at(source: str, start: int, end: int) -> str:
    """The sentence (or list item, or table row) around source[start:end], on one line, cut to
    about 240 characters around the term if it is longer."""
    flat = _CODE_SPAN.sub(lambda m: "x" * len(m.group(0)), source)  # no sentence ends inside code
    stops = r"[.!?;:](?=\s)|\n\s*\n|\n\s*[-*+|] |\n\s*\d+\. "
    left = max((m.end() for m in re.finditer(stops, flat[:start])), default=0)
    m = re.search(r"[.!?](?=\s|$)|\n\s*\n|\n\s*[-*+|] ", flat[end:])
    right = end + (m.end() if m else len(source) - end)
    before = " ".join(source[left:start].split())
    after = " ".join(source[end:right].split())
    term = " ".join(source[start:end].split())
    if len(before) > 120:
        before = "..." + before[-117:]
    if len(after) > 120:
        after = after[:117] + "..."
    return (before + (" " if source[left:start][-1:].isspace() else "") + term
            + (" " if source[end:right][:1].isspace() else "") + after).strip()


def uses_in(notebook: Path, terms: tuple[Term, ...]) -> dict[str, list[Use]]:
    """For each term (by anchor), its uses in the notebook's markdown cells, in reading order."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    by_anchor = {t.anchor: t for t in terms}
    regexes = [(t, t.regex()) for t in terms]
    excluded = [(t, re.compile("|".join(_phrase(p) for p in t.not_in), re.IGNORECASE)) for t in terms if t.not_in]
    found: dict[str, list[Use]] = {t.anchor: [] for t in terms}
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "markdown":
            continue
        source = "".join(cell.get("source", []))
        prose, links, spans = _masked(source)

        here: list[tuple[Term, int, int, str]] = []  # (term, start, end, kind)
        for a, b, anchor in links:
            if anchor in by_anchor:
                here.append((by_anchor[anchor], a, b, "link"))
        for a, b, content in spans:
            name = _CALL.sub("", content).lower()
            for term in terms:
                if name in term.code_names():
                    here.append((term, a, b, "code span"))
                    break
        # prose: every match of every term, then the longest wins where they overlap
        not_here = {t.anchor: [(m.start(), m.end()) for m in rx.finditer(prose)] for t, rx in excluded}
        matches = []
        for term, rx in regexes:
            for m in rx.finditer(prose):
                if any(a <= m.start() and m.end() <= b for a, b in not_here.get(term.anchor, [])):
                    continue
                matches.append((m.start(), m.end(), term))
        matches.sort(key=lambda x: (-(x[1] - x[0]), x[0]))
        taken: list[tuple[int, int]] = []
        for a, b, term in matches:
            if any(a < y and x < b for x, y in taken):
                continue
            taken.append((a, b))
            here.append((term, a, b, "prose"))
        for term, a, b, kind in here:
            found[term.anchor].append(Use(notebook.name, i, a, b, source[a:b], kind, sentence_at(source, a, b)))
    for uses in found.values():
        uses.sort(key=lambda u: (u.cell, u.start))
    return found


def first_uses(notebook: Path, terms: tuple[Term, ...]) -> dict[str, Use]:
    """Each term's first use in the notebook (terms it never uses are left out)."""
    return {anchor: uses[0] for anchor, uses in uses_in(notebook, terms).items() if uses}


def missing_links(notebook: Path, terms: tuple[Term, ...]) -> list[tuple[Term, Use]]:
    """(term, first use) for every term whose first use in the notebook is not a link to the glossary."""
    by_anchor = {t.anchor: t for t in terms}
    firsts = first_uses(notebook, terms)
    return sorted(((by_anchor[a], u) for a, u in firsts.items() if not u.linked),
                  key=lambda x: (x[1].cell, x[1].start))


def glossary_links(path: Path) -> list[tuple[int, str, str]]:
    """(cell, link text, anchor) of every link to the glossary in a notebook's markdown cells."""
    found = []
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell.get("cell_type") != "markdown":
            continue
        for text, target in _LINK.findall("".join(cell.get("source", []))):
            if g := _GLOSSARY_LINK.match(target):
                found.append((i, text, g.group(1)))
    return found


def broken_links(path: Path, terms: tuple[Term, ...]) -> list[tuple[int, str, str]]:
    anchors = {t.anchor for t in terms}
    return [link for link in glossary_links(path) if link[2] not in anchors]


def link_first_uses(notebook: Path, terms: tuple[Term, ...]) -> list[tuple[Term, Use]]:
    """Turn each unlinked first use into a link to its glossary entry, in the notebook's markdown
    cells only (code cells, outputs and metadata are left as they are). Returns what it linked."""
    todo = missing_links(notebook, terms)
    if not todo:
        return []
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    by_cell: dict[int, list[tuple[Term, Use]]] = {}
    for term, use in todo:
        by_cell.setdefault(use.cell, []).append((term, use))
    for i, edits in by_cell.items():
        cell = nb["cells"][i]
        assert cell["cell_type"] == "markdown"
        source = "".join(cell["source"])
        for term, use in sorted(edits, key=lambda x: x[1].start, reverse=True):
            assert source[use.start:use.end] == use.text
            source = f"{source[:use.start]}[{use.text}]({GLOSSARY}#{term.anchor}){source[use.end:]}"
        cell["source"] = source.splitlines(keepends=True)
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return todo


# --- command line ---------------------------------------------------------------

def _notebooks(names: list[str], folder: Path) -> list[Path]:
    if not names:
        return sorted(folder.glob("*.ipynb"))
    paths = []
    for name in names:
        p = Path(name)
        if not p.exists() and (folder / name).exists():
            p = folder / name
        if not p.exists():
            raise SystemExit(f"There is no notebook {name} (looked here and in {folder}).")
        paths.append(p)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loopkata.authoring.glossary", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="list first uses that are not links (exit 1 if any)")
    mode.add_argument("--write", action="store_true", help="link every first use that is not a link yet")
    mode.add_argument("--list", action="store_true", help="every term's first use, linked or not")
    parser.add_argument("notebooks", nargs="*", help="notebooks (default: every notebook in notebooks/)")
    args = parser.parse_args(argv)
    folder = project_notebooks()
    try:
        terms = load(folder / GLOSSARY)
    except GlossaryError as exc:
        print(exc, file=sys.stderr)
        return 2
    names = {t.anchor: t.name for t in terms}
    problems = changed = 0
    for path in _notebooks(args.notebooks, folder):
        if args.write:
            done = link_first_uses(path, terms)
            changed += bool(done)
            print(f"{path.name}: linked {len(done)} first use{'s' * (len(done) != 1)}"
                  + "".join(f"\n  cell {u.cell}: {u.text!r} -> {GLOSSARY}#{t.anchor}" for t, u in done))
        elif args.list:
            firsts = sorted(first_uses(path, terms).items(), key=lambda x: (x[1].cell, x[1].start))
            print(f"{path.name}: {len(firsts)} terms")
            for anchor, u in firsts:
                print(f"  {'linked ' if u.linked else 'missing'}  {names[anchor]:24} cell {u.cell:>2} {u.kind:9}  {u.sentence}")
        else:
            missing = missing_links(path, terms)
            broken = broken_links(path, terms)
            problems += len(missing) + len(broken)
            print(f"{path.name}: {len(missing)} first use{'s' * (len(missing) != 1)} to link"
                  + (f", {len(broken)} broken glossary link{'s' * (len(broken) != 1)}" if broken else ""))
            for t, u in missing:
                print(f"  {t.name!r} in cell {u.cell}: {u.sentence}")
            for cell, text, anchor in broken:
                print(f"  cell {cell}: [{text}]({GLOSSARY}#{anchor}) points at no entry")
    if changed:
        print("Re-trust the notebooks it changed (jupyter trust NOTEBOOK), so that JupyterLab shows their outputs.")
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
