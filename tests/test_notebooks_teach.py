"""The learner writes the fix: what every graded notebook may and may not show.

- no code above a notebook's check cell passes its kata (each code cell's
  definitions, and every code string it holds, are laid over the pristine
  starter and graded for real);
- no prediction question carries its answer in the notebook: every `ask("id")`
  is in notebooks/questions.toml, for that notebook;
- every heading and link names a kata by its catalogue title;
- a stored notebook reads well unexecuted: every widget output carries a
  readable rendering beside its view, and every figure its alt text.
"""
import ast
import base64
import html.parser
import json
import re
import shutil
import textwrap
import tomllib
from pathlib import Path

import pytest
from nbval.plugin import comment_markers  # nbval's own markers: one it knows is one it acts on

from loopkata.authoring import figure_pixels
from loopkata.grading import runner
from loopkata.learner import progress
from loopkata.model import catalogue
from loopkata.grading.report import render_text

ROOT = Path(__file__).resolve().parents[1]
KATAS = catalogue.load()
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def check_cell(kata) -> int:
    """The index of the notebook's own check cell: check("<id>") on the learner's copy."""
    found = [i for i, c in enumerate(cells(kata.notebook_path))
             if c["cell_type"] == "code" and f'check("{kata.id}")' in source(c)]
    assert found, f"{kata.notebook}: expected a check cell calling check(\"{kata.id}\")"
    return found[0]


def _parses(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def definitions(code: str) -> tuple[str, set[str]]:
    """The imports, functions, classes and plain assignments of a piece of code, and the names it defines."""
    tree = _parses(code)
    if tree is None:
        return "", set()
    keep = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.ClassDef, ast.Assign, ast.AnnAssign))]
    names = {n.name for n in keep if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    return "\n\n".join(ast.unparse(n) for n in keep), names


def code_strings(code: str) -> list[str]:
    """String constants in a cell that are themselves Python modules defining something."""
    tree = _parses(code)
    if tree is None:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "def " in node.value:
            text = textwrap.dedent(node.value)
            if _parses(text) is not None:
                found.append(text)
    return found


def starter_names(files: dict[Path, bytes]) -> dict[Path, set[str]]:
    out = {}
    for rel, data in files.items():
        tree = _parses(data.decode("utf-8", errors="replace"))
        if tree is not None:
            out[rel] = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    return out


def candidates(kata) -> list[tuple[str, str]]:
    """(where, code) for every cell above the check cell, and every code string in them."""
    found = []
    for i, cell in enumerate(cells(kata.notebook_path)[:check_cell(kata)]):
        if cell["cell_type"] != "code":
            continue
        code = source(cell)
        found.append((f"cell {i}", code))
        found += [(f"a code string in cell {i}", s) for s in code_strings(code)]
    return found


@pytest.mark.parametrize("kata", KATAS, ids=[k.id for k in KATAS])
def test_no_code_above_the_check_cell_passes_the_kata(kata, tmp_path):
    """nothing above a notebook's check cell, laid over the starter, passes the kata's hidden tests"""
    starter = progress.starter_files(kata)
    names = starter_names(starter)
    graded = 0
    for where, code in candidates(kata):
        defs, defined = definitions(code)
        for rel, wanted in names.items():
            if not defined & wanted:
                continue  # defines nothing the kata's file defines: it cannot change what is graded
            copy = tmp_path / f"c{graded}"
            for r, data in starter.items():
                (copy / r).parent.mkdir(parents=True, exist_ok=True)
                (copy / r).write_bytes(data)
            target = copy / rel
            target.write_text(target.read_text() + "\n\n# --- from the notebook, " + where + "\n" + defs + "\n")
            result = runner.check(kata, copy / kata.path)
            graded += 1
            assert not result.passed, (
                f"{kata.notebook}, {where}: laid over the starter's {rel.name}, it passes every hidden test of "
                f"{kata.id}, above the check cell. Move it after the check cell, into notebooks/solved/, "
                f"or show only what is wrong with it.\n{render_text(result, kata, stacks=False)}"
            )
            shutil.rmtree(copy, ignore_errors=True)


def asked(path: Path) -> list[str]:
    return [m for c in cells(path) if c["cell_type"] == "code" for m in re.findall(r'\bask\("([^"]+)"\)', source(c))]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_questions_keep_their_answers_out_of_the_notebook(notebook):
    """a prediction question names only its id; its answer lives in notebooks/questions.toml"""
    data = tomllib.loads((ROOT / "notebooks" / "questions.toml").read_text(encoding="utf-8"))["question"]
    known = {q["id"]: q for q in data}
    for cell in cells(notebook):
        if cell["cell_type"] == "code":
            assert not re.search(r"\bask\([^)]*answer\s*=", source(cell), re.S), (
                f"{notebook.name}: a question cell holds its answer in its source:\n{source(cell)[:300]}"
            )
    for qid in asked(notebook):
        assert qid in known, f"{notebook.name} asks {qid!r}, which is not in notebooks/questions.toml"
        assert known[qid]["notebook"] == notebook.name, f"{qid!r} belongs to {known[qid]['notebook']}"
    for qid, q in known.items():
        if q["notebook"] == notebook.name:
            assert qid in asked(notebook), f"{qid!r} is in questions.toml for {notebook.name}, which never asks it"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_nbval_marker_is_one_nbval_reads(notebook):
    """a `# NBVAL_...` comment is the marker alone on its line: nbval ignores one with more words after it"""
    for i, cell in enumerate(cells(notebook)):
        if cell["cell_type"] != "code":
            continue
        for line in source(cell).splitlines():
            comment = line.strip().lstrip("#").strip() if line.strip().startswith("#") else ""
            if comment.startswith("NBVAL"):
                assert comment in comment_markers, (
                    f"{notebook.name} cell {i}: nbval acts only on a marker alone on its line, one of "
                    f"{sorted(comment_markers)}; this line is {line.strip()!r}, which nbval reads as a plain comment")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_headings_and_links_use_the_catalogue_titles(notebook):
    """a kata is called by its catalogue title in its heading and in every link to it"""
    by_notebook = {k.notebook: k for k in KATAS}
    kata = by_notebook.get(notebook.name)
    if kata is not None:
        first = source(cells(notebook)[0]).splitlines()[0]
        assert first == f"# {kata.number:02d} · {kata.title}", (
            f"{notebook.name}: expected the heading '# {kata.number:02d} · {kata.title}', got {first!r}"
        )
    for cell in cells(notebook):
        for text, target in re.findall(r"\[([^\]]+)\]\(([^)]*\.ipynb)\)", source(cell)):
            linked = by_notebook.get(Path(target).name)
            if linked is not None:
                assert text == f"{linked.number:02d} · {linked.title}", (
                    f"{notebook.name}: a link to {target} reads {text!r}; "
                    f"expected '{linked.number:02d} · {linked.title}' (the catalogue's title)"
                )


# The buttons of loopkata.panel's widgets, as they read: interact_manual's, the check panel's, a question's.
BUTTONS = {"Run Interact", "Next hint", "Show the reference fix", "Check my answer"}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_button_the_text_names_is_one_the_widgets_show(notebook):
    """"press **Run Interact**", as the button reads, never "press **Run**", which no button says"""
    for i, cell in enumerate(cells(notebook)):
        if cell["cell_type"] != "markdown":
            continue
        for name in re.findall(r"\b[Pp]ress (?:it )?\*\*([^*]+)\*\*", source(cell)):
            assert name in BUTTONS, (
                f"{notebook.name} cell {i}: the text says press **{name}**, and no button reads so; "
                f"the buttons read {sorted(BUTTONS)}")


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# What ipywidgets writes as a widget's text/plain: its class and children, e.g. "VBox(children=(HTML(...".
WIDGET_REPR = re.compile(r"^\s*\w+\((children|value|description|options)=")


def outputs(path: Path):
    """(cell index, output data) for every rich output a stored notebook holds."""
    for i, cell in enumerate(cells(path)):
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            if out.get("output_type") in ("display_data", "execute_result"):
                yield i, {k: "".join(v) if isinstance(v, list) else v for k, v in out.get("data", {}).items()}


class _Page(html.parser.HTMLParser):
    """The visible text of an HTML fragment, and the attributes of its images."""

    def __init__(self, text: str):
        super().__init__()
        self.words, self.images = [], []
        self.feed(text)

    def handle_data(self, data):
        self.words.append(data)

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.words).split())


def readable_fallback(data: dict) -> bool:
    """A renderer without the widget shows text/html, text/plain or an image: is one of them worth reading?"""
    if any(k.startswith("image/") for k in data):
        return True
    shown = _Page(data.get("text/html", "")).text
    plain = data.get("text/plain", "").strip()
    return any(len(t) > 20 and not WIDGET_REPR.match(t) for t in (shown, plain))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_stored_widget_reads_without_a_kernel(notebook):
    """every stored widget output also holds a readable text/html, text/plain or image, not the widget's repr"""
    for i, data in outputs(notebook):
        if WIDGET_VIEW in data:
            assert readable_fallback(data), (
                f"{notebook.name}, cell {i}: a widget output whose only text is the widget's repr; a reader of the "
                f"stored notebook (an HTML export, GitHub, an untrusted notebook) sees nothing useful. Expected a "
                f"text/html or text/plain rendering of what it shows (see loopkata.panel), got "
                f"{ {k: v[:120] for k, v in data.items() if k != WIDGET_VIEW} }"
            )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_stored_figure_has_alt_text(notebook):
    """every stored image has alt text: its output holds an <img alt=...> of the same image"""
    for i, data in outputs(notebook):
        for kind in [k for k in data if k.startswith("image/")]:
            images = _Page(data.get("text/html", "")).images
            same = [img for img in images if img.get("src", "") == f"data:{kind};base64,{data[kind].strip()}"]
            assert same and all(len((img.get("alt") or "").strip()) > 20 for img in same), (
                f"{notebook.name}, cell {i}: a figure ({kind}) without alt text; expected the same output to hold "
                f"text/html <img alt=\"what the figure shows\" src=\"data:{kind};base64,...\"> (end the cell with "
                f"show_figure(alt) from labs/figures.py, not plt.show()), got "
                f"{'no text/html' if 'text/html' not in data else repr(data['text/html'][:160])}"
            )


def _jupyterlab_writes(nb: dict) -> str:
    """The text JupyterLab 4 saves for `nb`: jupyter_server's contents manager writes it with nbformat."""
    import nbformat

    return nbformat.writes(nbformat.from_dict(nb), version=nbformat.NO_CONVERT) + "\n"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_reading_a_notebook_in_jupyterlab_leaves_it_as_it_was(notebook):
    """a notebook is stored as JupyterLab 4 writes it, so opening it and letting autosave run changes no byte"""
    from jupyter_client.kernelspec import KernelSpecManager

    text = notebook.read_text(encoding="utf-8")
    nb = json.loads(text)
    spec = KernelSpecManager().get_kernel_spec("python3")
    expected = {"name": "python3", "display_name": spec.display_name, "language": spec.language}
    assert nb["metadata"].get("kernelspec") == expected, (
        f"{notebook.name}: JupyterLab rewrites the kernelspec as the kernel names itself, {expected}, and the "
        f"notebook then has unsaved changes as soon as it opens; stored: {nb['metadata'].get('kernelspec')}")
    assert (nb["nbformat"], nb["nbformat_minor"]) == (4, 5) and all("id" in c for c in nb["cells"]), (
        f"{notebook.name}: expected nbformat 4.5 with cell ids (what JupyterLab 4 writes), "
        f"got {nb['nbformat']}.{nb['nbformat_minor']}")
    assert text == _jupyterlab_writes(nb), (
        f"{notebook.name}: stored with other JSON formatting than JupyterLab's (indent 1, sorted keys, a final "
        f"newline): the first save rewrites the whole file. Write it with nbformat.write")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_stored_figure_shows_data(notebook):
    """every stored figure has something plotted on it: not a blank image, not bare axes"""
    for i, data in outputs(notebook):
        if "image/png" in data:
            found = figure_pixels.coloured_pixels(base64.b64decode(data["image/png"]))
            assert found >= figure_pixels.WITH_DATA, (
                f"{notebook.name}, cell {i}: a stored figure with {found} coloured pixels, expected at least "
                f"{figure_pixels.WITH_DATA}: it is blank or shows bare axes")
