"""Notebook widgets: the check panel, prediction questions, the progress table and the
widgets to play with (interact_manual).

Grading always happens out of the kernel (runner.check starts a subprocess
with a hard timeout). Every widget here is displayed with a stable text/plain
form and a static text/html rendering beside its view: nbval compares them
between a stored notebook and a fresh run, and a reader of the stored notebook
sees them where no kernel drives the widgets (an untrusted notebook in
JupyterLab, an HTML export, GitHub, nbviewer).
"""
from __future__ import annotations

import functools
import html
import json
import os
from pathlib import Path

import ipywidgets as widgets
from IPython.display import display

from .grading import runner
from .grading.report import MARK, headline, render_text, stack_repeats
from .learner import hints, progress, questions
from .model import alternatives, catalogue
from .room import effort

_COLOURS = {"passed": "#1a7f37", "failed": "#cf222e", "hang": "#9a6700", "error": "#cf222e",
            "could not run": "#57606a", "could not run here": "#57606a"}


_STATIC = "border:1px solid #d0d7de;padding:6px;margin:2px 0"
_LIVE_NOTE = "<p style='color:#57606a;font-size:90%;margin:4px 0 0 0'>{}</p>"


class _TextWidget(widgets.VBox):
    """A VBox whose text/plain is a readable, stable summary instead of widget internals,
    and whose text/html is a static rendering of what it shows."""

    _text = ""
    _html = ""
    _frame = _STATIC

    def __repr__(self) -> str:
        return self._text

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = self._text  # ipywidgets would cut it at 110 characters
        bundle["text/html"] = f"<div class='loopkata-static' style='{self._frame}'>{self._html}</div>"
        return bundle


# Lines wrap between words: JupyterLab's output <pre> breaks anywhere ("ServerDis" / "connectedError");
# a token longer than the line still wraps rather than overflow.
_WRAP = "word-break:normal;overflow-wrap:anywhere"
_PRE = f"margin:2px 0 6px 22px;white-space:pre-wrap;{_WRAP};font-size:90%"


def _row(test, show_stacks: bool, repeats: int = 0) -> str:
    """One test: its mark and title, what went wrong, and (folded unless asked) where it is stuck."""
    colour = _COLOURS.get(test.outcome, "#57606a")
    title = html.escape(test.title) + (" <b>(hang)</b>" if test.outcome == "hang" else "")
    body = ""
    if test.outcome != "passed" and (test.outcome != "not run" or test.message):
        detail = "\n".join(x for x in (test.message, f"at {test.where}" if test.where else "") if x)
        body = f"<pre style='{_PRE}'>{html.escape(detail)}</pre>"
        if test.stacks and repeats < 0:
            body += f"<pre style='{_PRE}'>(stuck at the same lines as above)</pre>"
        elif test.stacks:
            more = f" (the same in {repeats} more test{'s' if repeats > 1 else ''})" if repeats else ""
            body += (
                f"<details{' open' if show_stacks else ''} style='margin-left:22px'><summary>where it is stuck{more}</summary>"
                f"<pre style='{_PRE}'>{html.escape(test.stacks)}</pre></details>"
            )
    return (
        f"<div class='loopkata-row loopkata-{test.outcome.replace(' ', '-')}'>"
        f"<span style='color:{colour};font-weight:bold'>{MARK.get(test.outcome, '?')}</span> {title}{body}</div>"
    )


_DIFF_COLOURS = {"+": "#1a7f37", "-": "#cf222e", "@": "#8250df"}


def _difference(kata: catalogue.Kata, path: Path) -> tuple[str, str]:
    """What a decoy or variant changes, (text, html): its sentence, and its diff folded under it."""
    try:
        diff = alternatives.read(kata, path)
    except alternatives.DifferenceError:
        return "", ""  # the check says why it could not be built
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    body = lines[next(i for i, line in enumerate(lines) if line.startswith("--- ")):]
    shown = "".join(
        f"<span style='color:{_DIFF_COLOURS[line[0]]}'>{html.escape(line)}</span>\n"
        if line[:1] in _DIFF_COLOURS and not line.startswith(("+++", "---")) else f"{html.escape(line)}\n"
        for line in body)
    what = f"{alternatives.label(kata, path)}, a difference from {alternatives.base_label(kata, diff)}"
    folded = (f"<details class='loopkata-difference' style='margin:0 0 6px 0'><summary><i>{html.escape(diff.sentence)}"
              f"</i> ({html.escape(what)}: its {len(body)} lines)</summary>"
              f"<pre style='{_WRAP};font-size:85%;margin:4px 0 0 0'>{shown}</pre></details>")
    return f"{diff.sentence} ({what})", folded


class CheckPanel(_TextWidget):
    """One row per hidden test, a "Next hint" button, and the reference fix once solved; for a decoy or a
    variant, what it changes first (its sentence, and its diff folded under it)."""

    def __init__(self, kata: catalogue.Kata, result: runner.CheckResult, difference: Path | None = None):
        self.kata, self.result = kata, result
        colour = _COLOURS.get(result.verdict, "#57606a")
        said, shown = _difference(kata, difference) if difference else ("", "")
        header = shown + (
            f"<div class='loopkata-headline' style='color:{colour};font-weight:bold'>"
            f"{html.escape(headline(result, kata))}</div>"
        )
        # The first stuck test shows its stacks; the others usually repeat them, folded.
        first_stuck = next((t for t in result.tests if t.stacks), None)
        repeats = stack_repeats(result.tests)
        rows = [_row(t, t is first_stuck, repeats.get(i, 0)) for i, t in enumerate(result.tests)]
        if result.problem:
            rows.append(f"<p class='loopkata-problem'>{html.escape(result.problem)}</p>")
        self.hint_area = widgets.HTML()
        hint_button = widgets.Button(description="Next hint", icon="lightbulb-o")
        hint_button.on_click(self._show_hint)
        buttons = [hint_button]
        self.solution_area = widgets.HTML()
        if result.passed:
            solution_button = widgets.Button(
                description="Show the reference fix", button_style="success", layout=widgets.Layout(width="auto")
            )
            solution_button.on_click(self._show_solution)
            buttons.append(solution_button)
        super().__init__(
            [widgets.HTML(part) for part in (header, *rows)] + [widgets.HBox(buttons), self.hint_area, self.solution_area],
            layout=widgets.Layout(border=f"2px solid {colour}", padding="6px"),
        )
        self.add_class("loopkata-panel")
        self._text = (said + "\n" if said else "") + render_text(result, kata)
        after = "The result stored with the notebook: run the cell to grade again and to get hints."
        if result.passed:
            self._text += f"\n  The reference fix is in solutions/{kata.path}: compare it with yours."
            after = f"The reference fix is in solutions/{html.escape(kata.path)}: compare it with yours."
        self._html = header + "".join(rows) + _LIVE_NOTE.format(after)
        self._frame = f"border:2px solid {colour};padding:6px;margin:2px 0"

    def _show_hint(self, _button=None) -> None:
        if self.result.passed or progress.status(self.kata) == progress.SOLVED:
            text = hints.solved_message(self.kata)
        else:
            text = hints.describe(self.kata, hints.next_hint(self.kata))
        # The text says what it is itself ("Hint 2 of 11 for ...", "... is solved"): no label before it.
        self.hint_area.value = f"<p class='loopkata-hint'>{html.escape(text)}</p>"

    def _show_solution(self, _button=None) -> None:
        path = self.kata.solution_path
        files = catalogue.files_of(path)
        shown = "".join(
            f"<p><b>{html.escape(str(f.relative_to(self.kata.root)))}</b></p>"
            f"<pre style='{_WRAP};font-size:85%'>{html.escape(f.read_text())}</pre>"
            for f in files
        )
        self.solution_area.value = shown


class Notice(_TextWidget):
    """A paragraph instead of a traceback (unknown kata name and the like)."""

    def __init__(self, text: str):
        paragraph = f"<p style='color:#cf222e;margin:0'>{html.escape(text)}</p>"
        super().__init__([widgets.HTML(paragraph)])
        self._text, self._html = text, paragraph


def check(name: str, impl=None, *, decoy: str | None = None, variant: str | None = None):
    """Grade a kata out of the kernel and show the result panel.

    `impl` grades another file or folder (default: your copy in katas/); `decoy="NAME"` or
    `variant="NAME"` grades one of the kata's decoys (wrong fixes) or variants (right ones).
    """
    try:
        kata = catalogue.find(name)
        for kind, wanted in (("decoy", decoy), ("variant", variant)):
            if wanted:
                impl = alternatives.find(kata, kind, wanted)
    except (catalogue.UnknownKata, catalogue.CatalogueError, alternatives.UnknownAlternative) as exc:
        return Notice(str(exc))
    try:
        result = runner.check(kata, impl)
    except KeyboardInterrupt:  # the kernel was interrupted: the grading processes are gone
        return Notice("Stopped; nothing was recorded.")
    if impl is None:
        try:
            progress.record_check(kata, result)
        except progress.NotSaved as exc:
            print(exc)  # the verdict below still stands
    return CheckPanel(kata, result, Path(impl) if impl is not None and alternatives.is_difference(impl) else None)


class Question(_TextWidget):
    """A prediction question graded in place: pick an answer, press "Check my answer".

    A wrong answer says "not quite" and lets the learner try again; the right
    answer and why are shown after a right answer or after two wrong tries.
    """

    TRIES = 2

    def __init__(self, q: questions.Question):
        self.q, self.wrong = q, 0
        self.choice = widgets.RadioButtons(options=list(q.options), value=None, layout=widgets.Layout(width="max-content"))
        button = widgets.Button(description="Check my answer", layout=widgets.Layout(width="max-content"))
        self.feedback = widgets.HTML()
        button.on_click(self.grade)
        # Feedback speaks of the choice it graded: a new choice clears it. It also tells the page
        # the kernel has the new choice (a quick click can otherwise reach it first).
        self.choice.observe(self._clear_feedback, names="value")
        prompt = f"<b>{html.escape(q.prompt)}</b>"
        super().__init__([widgets.HTML(prompt), self.choice, button, self.feedback])
        self.add_class("loopkata-question")
        self._text = "\n".join([f"Question: {q.prompt}", *[f"  ( ) {o}" for o in q.options]])
        options = "".join(f"<li>{html.escape(o)}</li>" for o in q.options)
        self._html = (prompt + f"<ul style='list-style:circle;margin:4px 0'>{options}</ul>"
                      + _LIVE_NOTE.format("Run the cell to pick an answer and check it."))

    def _clear_feedback(self, _change=None) -> None:
        self.feedback.value = "<p class='loopkata-feedback'></p>"

    def grade(self, _button=None) -> bool:
        if self.choice.value is None:
            self.feedback.value = "<p class='loopkata-feedback'>Pick an answer first.</p>"
            return False
        right = self.choice.value == self.q.answer
        self.wrong += not right
        if right:
            verdict, why = "✓ Right.", self.q.why
        elif self.wrong < self.TRIES:
            verdict, why = "✗ Not quite.", "Think about it once more and pick another answer."
        else:
            verdict, why = f"✗ Not quite: the answer is “{html.escape(self.q.answer)}”.", self.q.why
        colour = _COLOURS["passed" if right else "failed"]
        self.feedback.value = (
            f"<p class='loopkata-feedback' style='color:{colour}'><b>{verdict}</b> {html.escape(why)}</p>"
        )
        return right


def ask(qid: str):
    """The prediction question `qid` from notebooks/questions.toml."""
    try:
        return Question(questions.find(qid))
    except (questions.UnknownQuestion, OSError, ValueError) as exc:
        return Notice(str(exc))


def pristine_starter(name: str) -> Path:
    """The path of a private copy of kata `name`'s shipped starter, for reproducing the bug."""
    return progress.pristine_starter(catalogue.find(name))


def decoy_copy(name: str, decoy: str) -> Path:
    """The path of a private copy of kata `name`'s decoy `decoy` (a plausible wrong fix), built from
    its base: a file or folder named after the decoy, to run, read or scan."""
    return progress.alternative_copy(catalogue.find(name), "decoy", decoy)


def variant_copy(name: str, variant: str) -> Path:
    """The path of a private copy of kata `name`'s variant `variant` (another right fix), built from its base."""
    return progress.alternative_copy(catalogue.find(name), "variant", variant)


def once_solved(name: str):
    """The part of a notebook that explains the fix: notebooks/solved/<notebook>.md, shown
    once the kata is solved (or after `loopkata solution NAME --force`)."""
    from IPython.display import Markdown

    kata = catalogue.find(name)
    text = (kata.root / "notebooks" / "solved" / kata.notebook.replace(".ipynb", ".md")).read_text(encoding="utf-8")
    if progress.status(kata) == progress.SOLVED or progress.entry(kata).get("solution_seen"):
        return Markdown(text)
    return Notice(
        f"This part explains the fix, and opens once {kata.id} is solved: run the check cell above "
        f"until it passes (or `loopkata solution {kata.id} --force` in a terminal), then run this cell again."
    )


_LINK = "color:var(--jp-content-link-color,#1976d2);text-decoration:none"


def _from_lab_root(path: Path) -> str | None:
    """`path` as the lab that started this kernel names it: from its root folder, which is the project
    under `make lab` and Binder but the user's home on a hub. None where no lab started this kernel."""
    from jupyter_core.paths import jupyter_runtime_dir

    server = Path(jupyter_runtime_dir()) / f"jpserver-{os.getppid()}.json"  # a kernel is the server's child
    try:
        root = Path(json.loads(server.read_text(encoding="utf-8"))["root_dir"]).expanduser().resolve()
        return path.resolve().relative_to(root).as_posix()
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _notebook_link(kata: catalogue.Kata, in_lab: bool = False) -> str:
    """A link to the kata's notebook, coloured as a link (a widget's HTML shows links as plain text).

    In the live widget a click runs JupyterLab's docmanager:open (its command linker), which opens
    the notebook in a tab; the href, relative to this notebook, is for a static rendering."""
    opens = ""
    path = _from_lab_root(kata.notebook_path) if in_lab else None
    if path is not None:
        args = json.dumps({"path": path})
        opens = f" data-commandlinker-command='docmanager:open' data-commandlinker-args='{html.escape(args)}'"
    return f"<a href='{html.escape(kata.notebook)}' style='{_LINK}'{opens}>{html.escape(kata.title)}</a>"


def progress_table():
    """Every kata with its status, read from the catalogue and .loopkata/progress.json."""
    try:
        every = catalogue.load()
        katas = [(k, progress.status(k)) for k in every]
    except catalogue.CatalogueError as exc:
        return Notice(str(exc))
    records = effort.records(effort.ROOMS)
    width = max((len(k.label) for k, _ in katas), default=0) + 1
    lines = [f"{k.label:<{width}} {status:<10} {k.title}" for k, status in katas]
    rows = "".join(
        f"<tr><td>{k.number:02d}</td><td>{_notebook_link(k, in_lab=True)}</td>"
        f"<td><code>{k.id}</code></td><td>{status}</td>"
        f"<td>{html.escape(effort.needs_label(k, every))}</td><td>{html.escape(effort.time_label(k, records))}</td></tr>"
        for k, status in katas
    )
    table = widgets.HTML(
        "<style>table.loopkata-progress a:hover{text-decoration:underline}</style>"
        "<table class='loopkata-progress'><tr><th>#</th><th>Notebook</th><th>Kata</th><th>Status</th>"
        f"<th>Do first</th><th>Time</th></tr>{rows}</table>"
    )
    box = _TextWidget([table])
    box._text = "\n".join([f"{'Kata':<{width}} {'Status':<10} Title", *lines])
    # The static table leaves out the time column: it follows the learners' records, which change.
    static_rows = "".join(
        f"<tr><td>{k.number:02d}</td><td>{_notebook_link(k)}</td>"
        f"<td><code>{k.id}</code></td><td>{status}</td></tr>"
        for k, status in katas
    )
    box._html = ("<table><tr><th>#</th><th>Notebook</th><th>Kata</th><th>Status</th></tr>"
                 f"{static_rows}</table>" + _LIVE_NOTE.format("Run the cell to see your own progress."))
    return box


class _Playground(widgets.interactive):
    """ipywidgets' interactive, displayed with a static description of its controls beside the view."""

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        controls = [(w.description, _setting(w)) for w in self.kwargs_widgets]
        bundle["text/plain"] = "\n".join(
            ["A widget to play with; run the cell, choose, then press Run Interact:",
             *[f"  {label}: {setting}" for label, setting in controls]])
        rows = "".join(f"<tr><td>{html.escape(label)}</td><td>{html.escape(setting)}</td></tr>" for label, setting in controls)
        bundle["text/html"] = (
            f"<div class='loopkata-static' style='{_STATIC}'><b>A widget to play with</b>"
            f"<table style='margin:4px 0'>{rows}</table>"
            + _LIVE_NOTE.format("Run the cell, choose, then press Run Interact.") + "</div>"
        )
        return bundle


def _setting(w) -> str:
    """A control's value and what else it offers, in words: "3 (1 to 5)", "'a' (of 'a', 'b')"."""
    if isinstance(w, widgets.Checkbox):
        return "on" if w.value else "off"
    if isinstance(w, (widgets.Dropdown, widgets.RadioButtons, widgets.Select)):
        labels = [o[0] if isinstance(o, tuple) else str(o) for o in w.options]
        return f"{w.label} (or: {'; '.join(o for o in labels if o != w.label)})"
    if isinstance(w.value, (int, float)) and hasattr(w, "min") and hasattr(w, "max"):
        return f"{w.value:g} ({w.min:g} to {w.max:g})"
    return str(w.value)


def _drawn_whole(fn):
    """`fn` run with matplotlib's interactive mode off, so no other thread shows its figures half made.

    JupyterLab sends widget messages on kernel subshells, and after each message ipykernel fires
    IPython's post_execute, where the inline backend shows and closes every figure made in
    interactive mode. A message handled on another thread while the button's callback was still
    drawing (most often on the first press in a fresh kernel) showed a blank image or bare axes, and
    closed the figure under the callback. Out of interactive mode a new figure is not queued for
    that flush; the callback shows its own (labs/figures.py's show_figure)."""
    import matplotlib.pyplot as plt

    @functools.wraps(fn)  # interactive reads the parameters from the signature, through __wrapped__
    def run(*args, **kwargs):
        with plt.ioff():
            return fn(*args, **kwargs)

    return run


def interact_manual(fn=None, /, **controls):
    """ipywidgets' interact_manual, with every label shown whole and a static description for a
    reader of the stored notebook. A decorator (`@interact_manual(n=(1, 5))`) or a call
    (`ui = interact_manual(play, n=(1, 5)); ui.update()` runs it once with the settings shown);
    both display the widget and return it."""
    if fn is None:
        return lambda f: interact_manual(f, **controls)
    ui = _Playground(_drawn_whole(fn), {"manual": True, "manual_name": "Run Interact"}, **controls)
    for w in ui.kwargs_widgets:
        if not isinstance(w, widgets.Checkbox):  # a checkbox's label stands beside it, whole
            w.style.description_width = "initial"
        if isinstance(w, widgets.Dropdown):
            w.layout.width = "max-content"  # the longest option, whole
    display(ui)
    return ui
