"""Every notebook in JupyterLab, the way a learner uses it: open, Run All, click.

For 00_start_here and every notebook in the catalogue: Run All finishes with
no error output (except in cells tagged to raise); every plot is an image;
every check panel shows one row per hidden test and reveals a hint; every
prediction question grades an answer; every `interact_manual` widget runs.
Then one learner's whole loop: fix the kata, re-run the check cell, see green.

Screenshots go to artifacts/screenshots/.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import nbformat
import pytest

from loopkata.authoring import readme_screenshot
from loopkata.model import catalogue

ROOT = Path(__file__).resolve().parents[2]
KATAS = catalogue.load(ROOT)
NOTEBOOKS = list(dict.fromkeys(["00_start_here.ipynb", "00b_primer.ipynb", *(k.notebook for k in KATAS)]))
NOTEBOOK_KATA = {k.notebook: k for k in KATAS}
SCREENSHOTS = ROOT / "artifacts" / "screenshots"

_CHECK_CALL = re.compile(r"\bcheck\(\s*[\"']([^\"']+)[\"']\s*([,)])")
_ASK_CALL = re.compile(r"(?<![\w.])ask\(")
_PROGRESS_CALL = re.compile(r"(?<![\w.])progress_table\(\s*\)")
_LABEL = re.compile(r"^(\d+) ([\w-]+):")
_FIGURE_REPR = re.compile(r"<Figure size [^>]* with \d+ Axes>")


def source_of(cell) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


def meant_to_raise(cell) -> bool:
    """Tagged `raises-exception` (JupyterLab and nbval), or nbval's comment on the first line."""
    tags = cell.get("metadata", {}).get("tags", [])
    return "raises-exception" in tags or "NBVAL_RAISES_EXCEPTION" in source_of(cell).split("\n", 1)[0]


def check_calls(cell) -> list[tuple[str, bool]]:
    """(kata name, grades the learner's own copy) for every `check("...")` in a code cell."""
    if cell.cell_type != "code":
        return []
    return [(m.group(1), m.group(2) == ")") for m in _CHECK_CALL.finditer(source_of(cell))]


def count_calls(pattern: re.Pattern, cell) -> int:
    return len(pattern.findall(source_of(cell))) if cell.cell_type == "code" else 0


def stored_images(cell) -> int:
    """Plots the stored notebook shows in this cell (images among its top-level outputs)."""
    if cell.cell_type != "code":
        return 0
    return sum(
        1 for o in cell.get("outputs", [])
        if o.get("output_type") in ("display_data", "execute_result")
        and any(m.startswith("image/") for m in o.get("data", {}))
    )


def find_kata(name: str):
    try:
        return catalogue.find(name, ROOT)
    except catalogue.UnknownKata:
        return None


def learner_check_cell(nb, kata) -> int | None:
    """Index of the cell that grades the learner's own copy of `kata`."""
    for i, cell in enumerate(nb.cells):
        for name, own in check_calls(cell):
            if own and (found := find_kata(name)) is not None and found.id == kata.id:
                return i
    return None


def _expect(locator, **kwargs):
    from playwright.sync_api import expect

    return expect(locator, **kwargs)


def _passes(assertion, *args) -> str:
    """'' if the Playwright assertion holds (it retries until its timeout), else its message."""
    try:
        assertion(*args)
        return ""
    except AssertionError as exc:
        return str(exc).splitlines()[0]


# --- what every notebook must show after Run All ----------------------------

def execution_problems(run) -> list[str]:
    problems = []
    prompts = run.state()["prompts"]
    code = [i for i, c in enumerate(run.stored.cells) if c.cell_type == "code"]
    if len(prompts) != len(code):
        return [f"the page shows {len(prompts)} code cells, the notebook has {len(code)}"]
    not_run = [i for i, p in zip(code, prompts) if not re.fullmatch(r"\[\d+\]:", p)]
    if not_run:
        problems.append(
            f"Run All stopped before cell {not_run[0]} ({len(not_run)} cells not run); JupyterLab stops "
            "at an error in a cell that is not tagged `raises-exception`"
        )
    for i, cell in enumerate(run.saved.cells):
        if cell.cell_type != "code" or meant_to_raise(cell):
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"cell {i} raised {out.get('ename')}: {out.get('evalue')}")
    return problems


def plot_problems(run) -> list[str]:
    problems = []
    for i, cell in enumerate(run.stored.cells):
        if cell.cell_type != "code":
            continue
        dom = run.cell(i)
        wanted = stored_images(cell)
        if wanted:
            images = dom.locator(".jp-OutputArea-output img")
            failed = _passes(_expect(images).to_have_count, wanted)
            if failed:
                problems.append(f"cell {i} should show {wanted} plot(s), as the stored notebook does: {failed}")
                continue
            for k in range(wanted):
                if not images.nth(k).evaluate("img => img.complete && img.naturalWidth > 0"):
                    problems.append(f"cell {i}: plot {k + 1} is an image that did not load")
        text = " ".join(dom.locator(".jp-OutputArea-output[data-mime-type='text/plain']").all_text_contents())
        if _FIGURE_REPR.search(text) and not dom.locator(".jp-OutputArea-output img").count():
            problems.append(f"cell {i} shows a figure's text ({_FIGURE_REPR.search(text).group(0)}) but no image")
    return problems


def panel_problems(run, hidden_tests) -> list[str]:
    """Each check cell shows one panel per call, and each panel one row per hidden test."""
    problems = []
    for i, cell in enumerate(run.stored.cells):
        calls = check_calls(cell)
        if not calls:
            continue
        dom = run.cell(i)
        known = [find_kata(name) for name, _ in calls]
        panels = dom.locator(".loopkata-panel")
        wanted = sum(k is not None for k in known)
        failed = _passes(_expect(panels).to_have_count, wanted)
        if failed:
            shown = source_of(cell).strip()[:60]
            problems.append(f"cell {i} ({shown!r}) should show {wanted} check panel(s): {failed}")
            continue
        for name, kata in zip((n for n, _ in calls), known):
            if kata is None:
                failed = _passes(_expect(dom.locator(".jp-OutputArea")).to_contain_text, "There is no kata called")
                if failed:
                    problems.append(f"cell {i}: check({name!r}) should explain that there is no such kata: {failed}")
        for p in range(wanted):
            panel = panels.nth(p)
            headline = panel.locator(".loopkata-headline").text_content().strip()
            label = _LABEL.match(headline)
            kata = find_kata(label.group(2)) if label else None
            if kata is None:
                problems.append(f"cell {i}: a check panel's headline names no kata: {headline!r}")
                continue
            if "could not be graded" in headline:
                problems.append(f"cell {i}: {headline}: {panel.text_content().strip()[:400]}")
                continue
            rows, expected = panel.locator(".loopkata-row").count(), hidden_tests(kata)
            if rows != expected:
                problems.append(
                    f"cell {i}: the {kata.id} panel should show one row per hidden test ({expected}), got {rows}"
                )
    return problems


def progress_problems(run) -> list[str]:
    problems = []
    for i, cell in enumerate(run.stored.cells):
        if count_calls(_PROGRESS_CALL, cell):
            rows = run.cell(i).locator("table.loopkata-progress tr")
            failed = _passes(_expect(rows).to_have_count, len(KATAS) + 1)
            if failed:
                problems.append(f"cell {i}: the progress table should list all {len(KATAS)} katas: {failed}")
    return problems


def question_problems(run) -> list[str]:
    problems = []
    for i, cell in enumerate(run.stored.cells):
        wanted = count_calls(_ASK_CALL, cell)
        if not wanted:
            continue
        questions = run.cell(i).locator(".loopkata-question")
        failed = _passes(_expect(questions).to_have_count, wanted)
        if failed:
            problems.append(f"cell {i} should show {wanted} prediction question(s): {failed}")
    return problems


# --- what every notebook must do when clicked -------------------------------

# The kernel grades each press; beside a loaded suite its answer can take longer than a widget's 10 s.
FEEDBACK_TIMEOUT = 30_000


def _choose(option, feedback) -> None:
    """Pick a radio option, see it picked, and see the kernel clear the last feedback: then the
    kernel has the new choice. A click on "Check my answer" sent before that would grade the
    old choice (ipywidgets holds back a value update while the last one is unanswered)."""
    radio = option.locator("input[type=radio]")
    radio.check()
    _expect(radio).to_be_checked()
    _expect(feedback).to_have_text("", timeout=FEEDBACK_TIMEOUT)


def answer_questions(run) -> None:
    """Check with no answer, then guesses in order until right (or until the feedback names the answer)."""
    questions = run.page.locator(".loopkata-question")
    for q in range(questions.count()):
        question = questions.nth(q)
        feedback = question.locator(".loopkata-feedback")
        button = question.get_by_role("button", name="Check my answer")
        button.click()
        _expect(feedback).to_contain_text("Pick an answer first", timeout=30_000)  # a kernel busy with pods answers late
        options = question.locator(".widget-radio-box label")
        for i in range(options.count()):  # guess in order: "not quite" lets you try again
            _choose(options.nth(i), feedback)
            button.click()
            _expect(feedback).to_contain_text(re.compile("Right|Not quite"), timeout=FEEDBACK_TIMEOUT)
            said = feedback.text_content()
            if "Right" in said:
                break
            named = re.search(r"the answer is “(.+?)”", said)
            if named:  # after two wrong tries the answer is shown
                _choose(question.locator(".widget-radio-box label", has_text=named.group(1)).first, feedback)
                button.click()
                break
        _expect(feedback).to_contain_text("✓ Right.", timeout=FEEDBACK_TIMEOUT)


def reveal_hints(run) -> None:
    panels = run.page.locator(".loopkata-panel")
    for p in range(panels.count()):
        panel = panels.nth(p)
        panel.get_by_role("button", name="Next hint").click()
        hint = panel.locator(".loopkata-hint")
        _expect(hint).to_be_visible()
        assert len(hint.text_content().strip()) > 20, f"the hint is empty: {hint.text_content()!r}"


def interact_problems(run) -> list[str]:
    """Every `interact_manual` widget, pressed (again): it shows its output, and a figure with data where it draws one."""
    return [problem for i in run.widget_cells for problem in run.press(i)]


# --- every link opens something --------------------------------------------

_MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)|href=[\"']([^\"']+)[\"']")


def _links(nb) -> list[tuple[int, str]]:
    """(cell index, target) of every link in the markdown cells, in order."""
    return [(i, m.group(1) or m.group(2)) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
            for m in _MARKDOWN_LINK.finditer(source_of(c))]


def _first_seen() -> dict[str, list[tuple[int, str, str]]]:
    """notebook -> (cell, target, path from the project root) for each file a notebook links to,
    in the first notebook that links to it: each target is followed once."""
    taken, plan = set(), {}
    for name in NOTEBOOKS:
        for index, target in _links(nbformat.read(ROOT / "notebooks" / name, as_version=4)):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web page (no network here) or an anchor in the notebook itself
            path = os.path.normpath(f"notebooks/{target.split('#')[0]}")
            if path not in taken:
                taken.add(path)
                plan.setdefault(name, []).append((index, target, path))
    return plan


LINKS = _first_seen()


def _close_current_tab(run) -> None:
    """File > Close Tab, as a learner closes what a link opened. A notebook the lab already had open (one this
    stage ran, say) holds that run's outputs unsaved: the lab asks whether to save them, and the answer is
    Discard, since nothing the link opened was changed."""
    run.menu("application:close", menu="File")
    _discard_if_asked(run.page, wait_ms=1_500)


def _discard_if_asked(page, wait_ms: int = 0) -> None:
    """Answer Discard if the lab asks whether to save a notebook before closing it (waiting `wait_ms` for it)."""
    discard = page.locator(".jp-Dialog .jp-Dialog-button", has_text="Discard")
    try:
        discard.wait_for(state="visible", timeout=max(wait_ms, 1))
    except Exception:  # noqa: BLE001 - no dialog: the tab closed as it was
        return
    discard.click()


def _back_to_tab(page, name: str) -> None:
    """Click the tab of the notebook `name` if another is in front, as a learner goes back to the page they came from."""
    _discard_if_asked(page)  # a dialog that came late would take the click
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=name).first
    if "lm-mod-current" not in (tab.get_attribute("class") or ""):
        tab.click()
        _expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current", has_text=name)).to_be_visible(
            timeout=30_000)


def _opened(page, path: str) -> str:
    """'' once the file at `path` is open in the current tab, else what the lab showed instead."""
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current", has_text=Path(path).name)
    dialog = page.locator(".jp-Dialog")
    try:
        _expect(tab.or_(dialog).first).to_be_visible(timeout=30_000)
    except AssertionError:
        return "nothing opened in 30 s"
    if dialog.count():
        said = " ".join(dialog.first.inner_text().split())
        dialog.first.locator(".jp-Dialog-button").last.click()  # dismiss it, as a learner would
        return f"an error dialog: {said[:200]!r}"
    return ""


def link_problems(run) -> list[str]:
    """Follow each link this notebook is the first to make, as a click in the lab: each opens its file."""
    problems = []
    for index, target, path in LINKS.get(run.name, []):
        _back_to_tab(run.page, run.name)  # the lab may put another tab in front once the last one closes
        cell = run.cell(index)
        cell.scroll_into_view_if_needed()
        # JupyterLab resolves a relative link to the file's download URL and opens the file on a click.
        link = cell.locator(f".jp-RenderedMarkdown a[href*='/files/{path}']").first
        try:
            link.click(timeout=30_000)
        except Exception as exc:  # noqa: BLE001 - said as a problem of this notebook
            problems.append(f"cell {index}: the link to {target} is not there to click ({str(exc).splitlines()[0]})")
            continue
        failed = _opened(run.page, path)
        if failed:
            problems.append(f"cell {index}: the link to {target} should open {path} in the lab; {failed}")
        else:
            _close_current_tab(run)
    return problems


def progress_link_problems(run) -> list[str]:
    """The start page's table: each notebook link looks like a link and opens its notebook in the lab,
    without reloading the page (which would drop the learner's other tabs and kernels' views)."""
    problems = []
    links = run.page.locator("table.loopkata-progress a")
    if not links.count():
        return []
    looks = run.page.locator(".jp-RenderedMarkdown a").first.evaluate("a => getComputedStyle(a).color")
    for k in range(links.count()):
        link = links.nth(k)
        name = link.get_attribute("href") or ""
        colour = link.evaluate("a => getComputedStyle(a).color")
        if colour != looks:
            problems.append(f"the start page's link to {name} is drawn in {colour}, the notebook's links in {looks}")
        run.page.evaluate("() => { window.loopkataNotReloaded = true; }")
        _back_to_tab(run.page, run.name)  # the lab may put another tab in front once the last one closes
        link.scroll_into_view_if_needed()
        link.click()
        failed = _opened(run.page, f"notebooks/{name}")
        if not run.page.evaluate("() => window.loopkataNotReloaded === true"):
            problems.append(f"the start page's link to {name} reloaded the whole lab instead of opening a tab")
            break  # the page is another now: the table's other links are not on it
        if failed:
            problems.append(f"the start page's link to {name} should open it in the lab; {failed}")
        else:
            _close_current_tab(run)
    return problems


def screenshot_focus(run):
    """The learner's check panel if there is one, else the first widget of the notebook."""
    kata = NOTEBOOK_KATA.get(run.name)
    index = learner_check_cell(run.stored, kata) if kata else None
    if index is not None:
        return run.cell(index).locator(".loopkata-panel")
    return run.page.locator(".loopkata-panel, .loopkata-question, table.loopkata-progress")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[Path(n).stem for n in NOTEBOOKS])
def test_notebook_in_jupyterlab(notebook, runs, hidden_tests, timings):
    """Run All in JupyterLab: no errors, plots, panels, hints, questions, widgets."""
    assert (ROOT / "notebooks" / notebook).is_file(), f"the catalogue names notebooks/{notebook}, which does not exist"
    run = runs.get(notebook)
    try:
        started = time.monotonic()
        problems = (
            execution_problems(run) + plot_problems(run) + panel_problems(run, hidden_tests)
            + progress_problems(run) + question_problems(run)
        )
        timings.setdefault(run.stem, {})["checks"] = time.monotonic() - started
        kata = NOTEBOOK_KATA.get(notebook)
        if kata is not None:
            if learner_check_cell(run.stored, kata) is None:
                problems.append(f'no cell runs check("{kata.id}") on the learner\'s own copy')
            if not any(count_calls(_ASK_CALL, c) for c in run.stored.cells):
                problems.append("no prediction question (loopkata.ask) in the notebook")
        assert not problems, f"{notebook} in JupyterLab:\n  " + "\n  ".join(problems)
        started = time.monotonic()
        answer_questions(run)
        reveal_hints(run)
        problems = run.first_press + interact_problems(run)
        timings.setdefault(run.stem, {})["clicks"] = time.monotonic() - started
        assert not problems, f"{notebook} in JupyterLab, as a learner clicks through it:\n  " + "\n  ".join(problems)
    finally:
        run.screenshot(focus=screenshot_focus(run))


def test_learner_fixes_the_kata_and_the_panel_turns_green(runs, lab, hidden_tests, timings):
    """The learner's loop: the reference fix goes into katas/, the check cell is re-run, the panel says solved."""
    kata = KATAS[0]
    run = runs.get(kata.notebook)
    started = time.monotonic()
    index = learner_check_cell(run.stored, kata)
    assert index is not None, f'{kata.notebook} has no cell that runs check("{kata.id}")'
    headline = run.cell(index).locator(".loopkata-panel .loopkata-headline")
    _expect(headline).to_contain_text("not solved yet")

    # The server runs on a copy of the project: this edits the copy, never the checkout.
    target = lab.root / "katas" / kata.path
    assert lab.root != ROOT and target.exists()
    backup = target.with_name(target.name + ".starter")
    shutil.move(target, backup)
    try:
        if kata.solution_path.is_dir():
            shutil.copytree(lab.root / "solutions" / kata.path, target)
        else:
            shutil.copy2(lab.root / "solutions" / kata.path, target)
        run.run_cell(index)
        expected = hidden_tests(kata)
        _expect(headline).to_have_text(
            re.compile(rf": solved, all {expected} tests pass"), timeout=int(kata.budget_seconds * 1000) + 30_000
        )
        _expect(run.cell(index).locator(".loopkata-panel .loopkata-row.loopkata-passed")).to_have_count(expected)
        run.cell(index).get_by_role("button", name="Show the reference fix").click()
        _expect(run.cell(index).locator(".loopkata-panel")).to_contain_text(f"solutions/{kata.path}")
        solved = headline.inner_text().strip()
    finally:
        shot = run.screenshot(f"{run.stem}-solved", focus=run.cell(index - 1))  # "your turn", the cell, the panel
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        shutil.move(backup, target)
        timings[f"learner loop ({kata.id})"] = time.monotonic() - started
    if os.environ.get("LOOPKATA_README_SCREENSHOT") and shot is not None:  # `make screenshot`
        readme_screenshot.write(shot, ROOT / readme_screenshot.PATH, solved)


def test_a_kata_file_opens_from_a_notebook_link_and_an_edit_is_saved(lab, browser):
    """the lab serves the whole collection: a notebook's link opens katas/ in the editor, and a save lands there"""
    kata = KATAS[0]
    target = lab.root / "katas" / kata.path
    original = target.read_bytes()
    assert lab.root != ROOT, "the browser stage edits a copy of the project, never the checkout"
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        page.goto(lab.open_url(kata.notebook, "test-kata-link"), timeout=60_000)
        stored = nbformat.read(ROOT / "notebooks" / kata.notebook, as_version=4)
        index = next(i for i, c in enumerate(stored.cells)
                     if c.cell_type == "markdown" and f"](../katas/{kata.path})" in source_of(c))
        cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
        cell.scroll_into_view_if_needed(timeout=60_000)  # the notebook renders only the cells in view
        link = cell.locator(".jp-RenderedMarkdown a", has_text=f"katas/{kata.path}").first
        _expect(link).to_be_visible(timeout=30_000)
        link.click()
        tab = page.locator(".lm-TabBar-tab", has_text=Path(kata.path).name)
        _expect(tab).to_have_count(1, timeout=30_000)
        editor = page.locator(".jp-FileEditor .cm-content").last
        first_line = original.decode().splitlines()[0]
        _expect(editor).to_contain_text(first_line[:40], timeout=30_000)
        editor.click()
        page.keyboard.press("Control+Home")
        page.keyboard.type("# edited in the lab\n")
        page.keyboard.press("Control+s")
        deadline = time.monotonic() + 30  # against a hang only: the save is seen as soon as it lands
        while not target.read_bytes().startswith(b"# edited in the lab\n") and time.monotonic() < deadline:
            time.sleep(0.1)
        saved = target.read_bytes()
        assert saved.startswith(b"# edited in the lab\n") and saved.endswith(original[-200:]), (
            f"expected the edit made in the lab's editor to be saved to katas/{kata.path}; "
            f"the file starts with {saved[:60]!r}")
    finally:
        try:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "kata-file-from-link.png"))
        except Exception:  # noqa: BLE001 - a screenshot is a courtesy, never the verdict
            pass
        context.close()
        target.write_bytes(original)


def test_make_lab_starts_the_lab_the_browser_stage_tests():
    """`make lab` runs loopkata.learner.lab, the launcher the browser stage starts its server with"""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}  # run from `make test`
    planned = subprocess.run(["make", "-n", "--no-print-directory", "lab"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60, env=env)
    last = [line for line in planned.stdout.splitlines() if line.strip() and not line.startswith("make")][-1]
    assert last.endswith("python -m loopkata.learner.lab"), (
        f"expected `make lab` to run `python -m loopkata.learner.lab` (what this stage starts), it runs: {last}")


# Last in this module: a notebook opened from a link joins that notebook's kernel, and closing its tab
# closes the widgets' comms there, which would break a notebook whose test has not come yet.
def test_every_link_opens_its_file_in_the_lab(runs):
    """every link in every notebook, and each notebook link in the start page's table, opens its file in the lab"""
    problems = []
    for name in [n for n in NOTEBOOKS if n in LINKS or n == "00_start_here.ipynb"]:
        try:
            run = runs.get(name)
        except AssertionError as exc:  # its own test says why; its links are followed once it runs
            problems.append(f"{name}: not followed, the notebook did not run: {str(exc).splitlines()[0]}")
            continue
        found = link_problems(run) + (progress_link_problems(run) if name == "00_start_here.ipynb" else [])
        problems += [f"{name}: {problem}" for problem in found]
    assert not problems, "following the links as a learner does:\n  " + "\n  ".join(problems)
