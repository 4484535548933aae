"""The learner's first steps in the lab, as `make lab` starts it: the URL it prints, its terminal,
and the notebooks as shipped, merely read.

- the URL the server prints (the one a learner on a remote machine, in WSL or a container pastes)
  opens the start page, not the Launcher;
- a terminal opened in the lab finds the venv's `loopkata`, as after `source .venv/bin/activate`,
  though the lab was started without the venv on PATH;
- opening every notebook as shipped, its kernel started and autosave let run, changes no byte:
  reading the collection leaves `git status` clean.
"""
from __future__ import annotations

import json
import re
import shutil
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = "as-shipped"  # a folder of the lab's copy: the notebooks with their stored outputs
HANG = 180  # s, against a hang only, for the terminal and a command typed in it
AUTOSAVE_SECONDS = 2  # the learner's lab autosaves every 120 s; here sooner, so that it surely runs

# This module's lab: the learner's settings, and an autosave that runs within the test.
LAB_SETTINGS = {"@jupyterlab/docmanager-extension:plugin": {"autosaveInterval": AUTOSAVE_SECONDS}}


def _expect(locator, **kwargs):
    from playwright.sync_api import expect

    return expect(locator, **kwargs)


def _api(lab, path: str, method: str = "GET"):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(f"{lab.url}{path}", method=method, headers={"Authorization": f"token {lab.token}"})
    with opener.open(request, timeout=30) as response:
        body = response.read()
    return json.loads(body) if body else None


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    try:
        yield context.new_page()
    finally:
        context.close()


def test_the_url_the_lab_prints_opens_the_start_page(lab, page):
    """the URL `make lab` prints, pasted into a browser, opens the start page (not the Launcher)"""
    url = lab.printed_url()
    assert url, f"expected the lab to print a URL to open; its log ends:\n{lab.log_tail()}"
    page.goto(url, timeout=60_000)
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
    _expect(tab).to_contain_text("00_start_here.ipynb", timeout=60_000)
    _expect(page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown h1").first).to_contain_text(
        "start here")


def _terminal_output(lab, page, name: str) -> str:
    """Everything the terminal printed so far: the server replays it to a new connection."""
    return page.evaluate(
        """async ([url, token, name]) => await new Promise((resolve) => {
             const ws = new WebSocket(`${url.replace('http', 'ws')}/terminals/websocket/${name}?token=${token}`);
             let out = '';
             ws.onmessage = (e) => { const [kind, data] = JSON.parse(e.data); if (kind === 'stdout') out += data; };
             ws.onerror = () => resolve(out);
             setTimeout(() => { ws.close(); resolve(out); }, 500);
           })""",
        [lab.url, lab.token, name])


def test_the_lab_terminal_finds_loopkata(lab, page):
    """in a terminal opened in the lab, `loopkata list` runs the collection's own loopkata"""
    page.goto(f"{lab.url}/lab/workspaces/test-terminal?reset&token={lab.token}", timeout=60_000)
    before = {t["name"] for t in _api(lab, "/api/terminals")}
    page.locator("#jp-MainMenu .lm-MenuBar-item", has_text="File").first.click()
    page.locator(".lm-Menu-item", has_text="New").first.hover()  # File > New > Terminal
    page.locator(".lm-Menu-item[data-command='terminal:create-new']").click()
    terminal = page.locator(".jp-Terminal").first
    _expect(terminal).to_be_visible(timeout=60_000)
    deadline = time.monotonic() + HANG  # against a hang only: the verdict is what the terminal shows
    while not (new := {t["name"] for t in _api(lab, "/api/terminals")} - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert new, "expected File > New > Terminal to start a terminal on the server"
    name = new.pop()
    try:
        while not re.search(r"[$#] $", _terminal_output(lab, page, name)):
            assert time.monotonic() < deadline, "the lab's terminal never showed a prompt"
            time.sleep(0.2)
        terminal.click()
        # The status in words the typed line does not hold, so its echo is not taken for the answer.
        page.keyboard.type('loopkata list; echo "exit_$?_status"\n')
        deadline = time.monotonic() + HANG
        while not (ended := re.search(r"exit_(\d+)_status", out := _terminal_output(lab, page, name))):
            assert time.monotonic() < deadline, f"`loopkata list` did not end in {HANG} s; the terminal shows:\n{out[-1500:]}"
            time.sleep(0.3)
        said = out.split("loopkata list;")[-1]
        assert ended.group(1) == "0" and "16 memory-guard" in said, (
            "expected `loopkata list` typed in the lab's terminal to list the sixteen katas and exit 0, "
            f"as after `source .venv/bin/activate`; the terminal shows:\n{said[-1500:]}")
    finally:
        _api(lab, f"/api/terminals/{name}", method="DELETE")


def test_reading_every_notebook_leaves_it_as_shipped(lab, page):
    """each notebook as shipped, opened and its kernel started, is saved by autosave unchanged: git stays clean"""
    shipped = lab.root / SHIPPED
    shipped.mkdir(exist_ok=True)
    names = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    for name in names:
        shutil.copy2(ROOT / "notebooks" / name, shipped / name)
    before = {name: (shipped / name).read_bytes() for name in names}
    dirty = []
    try:
        for name in names:
            page.goto(f"{lab.url}/lab/workspaces/test-read-only/tree/{SHIPPED}/{name}?reset&token={lab.token}",
                      timeout=60_000)
            tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current", has_text=name)
            _expect(tab).to_be_visible(timeout=60_000)
            page.wait_for_function(  # its kernel started and told the notebook its language
                "() => [...document.querySelectorAll('#jp-main-statusbar .jp-StatusBar-TextItem')]"
                ".some(e => e.textContent.trim().endsWith('| Idle'))", timeout=120_000, polling=200)
            page.wait_for_timeout(AUTOSAVE_SECONDS * 1000 * 2)  # autosave has had two turns
            if "jp-mod-dirty" in (tab.get_attribute("class") or ""):
                dirty.append(name)
        changed = [name for name in names if (shipped / name).read_bytes() != before[name]]
    finally:
        for session in _api(lab, "/api/sessions"):
            if session["path"].startswith(f"{SHIPPED}/"):
                _api(lab, f"/api/sessions/{session['id']}", method="DELETE")
    assert not changed and not dirty, (
        "expected merely reading a notebook to change nothing; "
        f"rewritten on disk by autosave: {changed or 'none'}; showing unsaved changes: {dirty or 'none'}")
