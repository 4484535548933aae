"""Every notebook, run the way a learner runs it: JupyterLab in headless Chromium.

One JupyterLab server and one Chromium serve the whole stage. The server
runs on a temporary copy of the project (LOOPKATA_ROOT points to it), so the
tests may edit katas and save notebooks without touching the checkout, and
progress goes to a temporary folder. The copied notebooks are stripped of
their stored outputs: every panel, widget and plot the tests find was made by
this run.

Notebooks run a few at a time (LOOPKATA_BROWSER_PARALLEL, default 3), the
slowest first: while one test makes its assertions, the next notebooks
already run in other tabs.

Without Chromium (Debian's `chromium`) or Python Playwright these tests are
skipped, unless LOOPKATA_REQUIRE_BROWSER is set to anything but "" or "0"
(CI), where they fail.
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from loopkata.authoring import figure_pixels
from loopkata.grading import runner
from loopkata.model import catalogue
from loopkata.learner import lab as lab_launcher

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "screenshots"

# Launch flags that work in containers and CI: no sandbox (root), no GPU, no network chatter.
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-proxy-server",
]
VIEWPORT = {"width": 1280, "height": 900}

# On top of the learner's lab settings (loopkata.learner.lab), for the test server only: cell timings
# recorded, so a saved notebook says how long its run took.
# Autosave off: each notebook here is saved once, through the toolbar, after Run All. An autosave that comes
# due while that save is on its way (a notebook whose Run All takes about the 120-s interval, on a busy
# machine) makes the lab see the file "changed on disk" and hold every click behind its dialog.
# test_learner_path.py has its own settings, with autosave on and soon, to show that saving changes nothing.
TIMING = {"@jupyterlab/notebook-extension:tracker": {"recordTiming": True},
          "@jupyterlab/docmanager-extension:plugin": {"autosave": False}}

SERVER_START_TIMEOUT = 90
KERNEL_IDLE_TIMEOUT = 120_000  # ms
RUN_ALL_TIMEOUT = 300_000  # ms, a whole notebook
WIDGET_TIMEOUT = 30_000  # ms, a widget view or a comm round trip

# "server start" -> seconds, and notebook stem -> {"Run All" | "checks" | "clicks" -> seconds}
TIMINGS: dict = {}


def _required() -> bool:
    return os.environ.get("LOOPKATA_REQUIRE_BROWSER", "") not in ("", "0")


def _browser_problem() -> str:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Python Playwright is not installed (pip install playwright==1.65.2)."
    if not shutil.which("chromium"):
        return "Chromium is not installed (Debian: apt-get install chromium fonts-liberation)."
    return ""


@pytest.fixture(scope="session")
def chromium_path() -> str:
    problem = _browser_problem()
    if problem:
        if _required():
            pytest.fail(f"LOOPKATA_REQUIRE_BROWSER is set, but {problem}", pytrace=False)
        pytest.skip(f"browser tests need Chromium and Playwright: {problem}")
    return shutil.which("chromium")


# --- the project copy -------------------------------------------------------

# Not copied: the installed package stays the checkout's own (src/ is installed in
# editable mode), and nothing at the top that starts with a dot (.git, .venv, progress).
_SKIP_TOP = {"src", "artifacts", "docs", "binder"}
_SKIP_ANY = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache"}


def _ignore(folder, names):
    top = Path(folder).resolve() == ROOT
    return [
        n for n in names
        if n in _SKIP_ANY or n.endswith((".pyc", ".egg-info")) or (top and (n in _SKIP_TOP or n.startswith(".")))
    ]


def _strip_outputs(path: Path) -> None:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def workdir(chromium_path):
    with tempfile.TemporaryDirectory(prefix="loopkata-browser-", ignore_cleanup_errors=True) as tmp:
        yield Path(tmp)


@pytest.fixture(scope="module")
def project_copy(workdir) -> Path:
    """The project's katas, solutions, tests and notebooks, copied; notebooks without outputs."""
    copy = workdir / "project"
    shutil.copytree(ROOT, copy, ignore=_ignore)
    for nb in (copy / "notebooks").glob("*.ipynb"):
        _strip_outputs(nb)
    return copy


# --- the JupyterLab server --------------------------------------------------

@dataclass
class Lab:
    url: str
    token: str
    root: Path
    log: Path
    process: subprocess.Popen

    def open_url(self, notebook: str, workspace: str) -> str:
        return f"{self.url}/lab/workspaces/{workspace}/tree/notebooks/{notebook}?reset&token={self.token}"

    def printed_url(self) -> str:
        """The URL the server printed for the learner to open, as `make lab` prints it, with the token."""
        found = re.findall(r"(http://127\.0\.0\.1:\d+/\S*)", self.log.read_text(errors="replace"))
        # A token given on the command line is printed as "..."; `make lab` prints the one it made.
        return found[0].replace("token=...", f"token={self.token}") if found else ""

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str, token: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(f"{url}/api/status", headers={"Authorization": f"token {token}"})
    try:
        with opener.open(request, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _start_lab(root: Path, tmp: Path, extra: dict = TIMING) -> Lab:
    """The lab `make lab` starts (loopkata.learner.lab.command), on a port and token of the test's own."""
    settings = lab_launcher.write_settings(tmp / "lab-app-settings", extra=extra)
    # A learner's shell has not activated the venv: the lab must put it on the terminal's PATH itself.
    scripts = str(lab_launcher.scripts_folder())
    plain = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    plain["PATH"] = os.pathsep.join(p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if p != scripts)
    env = {
        **lab_launcher.environment(plain),
        "LOOPKATA_ROOT": str(root),
        "LOOPKATA_STATE": str(tmp / "progress"),
        # Nothing of the server's, the kernels' or IPython's goes to the home folder.
        "JUPYTER_CONFIG_DIR": str(tmp / "jupyter-config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "jupyter-runtime"),
        "IPYTHONDIR": str(tmp / "ipython"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("PYTEST_CURRENT_TEST", None)
    token = secrets.token_hex(16)
    last_problem = ""
    for attempt in range(3):
        port = _free_port()
        cmd = lab_launcher.command(
            root, settings, "--no-browser",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            "--NotebookNotary.db_file=:memory:",  # saving signs the notebook; keep that out of the home folder
            f"--LabApp.user_settings_dir={tmp / 'lab-user-settings'}",
            f"--LabApp.workspaces_dir={tmp / 'lab-workspaces'}",
        )
        if shutil.which("setpriv"):
            # SIGTERM, on which jupyter shuts its kernels down, once this worker is gone: on Ctrl-C, xdist
            # ends its workers before a module's teardown has stopped the lab. (Not a preexec_fn: this
            # process has threads, and a child forked from it may only exec.)
            cmd = ["setpriv", "--pdeathsig", "TERM", "--", *cmd]
        log = tmp / f"jupyterlab-{attempt}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        lab = Lab(f"http://127.0.0.1:{port}", token, root, log, process)
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline and process.poll() is None:
            if _answers(lab.url, token):
                return lab
            time.sleep(0.2)
        _stop_lab(lab, tmp)
        last_problem = f"JupyterLab did not answer on {lab.url} (exit code {process.returncode}):\n{lab.log_tail()}"
        if "already in use" not in lab.log_tail():
            break
    pytest.fail(last_problem, pytrace=False)


def _kernel_pids(runtime: Path) -> list[int]:
    """Kernels this server started: their command line names our own runtime folder."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if str(runtime) in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _stop_lab(lab: Lab, tmp: Path) -> None:
    """SIGTERM makes jupyter shut its kernels down; anything left after 20 s is killed."""
    process = lab.process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    for pid in _kernel_pids(tmp / "jupyter-runtime"):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture(scope="module")
def lab(request, project_copy, workdir):
    started = time.monotonic()
    # A module may ask for settings of its own on top of the learner's (LAB_SETTINGS).
    server = _start_lab(project_copy, workdir, getattr(request.module, "LAB_SETTINGS", TIMING))
    TIMINGS["server start"] = time.monotonic() - started
    try:
        yield server
    finally:
        _stop_lab(server, workdir)
        TIMINGS["browser stage, server start to stop"] = time.monotonic() - started


@pytest.fixture(scope="module")
def browser(chromium_path):
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=10_000)  # a widget view may take a moment on a busy machine
    started = time.monotonic()
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=chromium_path, headless=True, args=CHROMIUM_FLAGS)
        TIMINGS["browser start"] = time.monotonic() - started
        try:
            yield chromium
        finally:
            chromium.close()


# --- one notebook in one tab ------------------------------------------------

_STATE_JS = """() => {
  const items = [...document.querySelectorAll('#jp-main-statusbar .jp-StatusBar-TextItem')];
  const kernel = items.find(e => (e.getAttribute('title') || '').startsWith('Change kernel'))
              || items.find(e => e.textContent.includes(' | '));
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
                  .map(e => e.textContent.trim());
  return {status: kernel ? kernel.textContent.trim() : '', prompts};
}"""

# The status bar, not the toolbar indicator: the toolbar says idle while the
# status bar still says "Initializing", and Run All then often does nothing.
_IDLE_JS = f"() => ({_STATE_JS})().status.endsWith('| Idle')"
_IDLE_OR_DISCONNECTED_JS = f"() => /\\| (Idle|Disconnected)$/.test(({_STATE_JS})().status)"
_STARTED_JS = f"() => ({_STATE_JS})().prompts.some(p => p !== '[ ]:')"
_FINISHED_JS = f"""() => {{
  const s = ({_STATE_JS})();
  if (/\\| (Dead|Unknown)$/.test(s.status)) return 'the kernel died: ' + s.status;
  return s.status.endsWith('| Idle') && s.prompts.some(p => /\\[\\d+\\]/.test(p))
         && !s.prompts.some(p => p.includes('*')) && 'done';
}}"""


_INTERACT_CALL = re.compile(r"(?<![\w.])interact_manual\(")  # a widget made here, decorated or called


def _source(cell) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


class NotebookRun:
    """A notebook open in its own browser context, run like a learner does: Run All, or where the
    notebook has a widget to play with, down to the widget, a press of its button in the fresh
    kernel, then the rest."""

    def __init__(self, lab: Lab, browser, name: str):
        import nbformat

        self.lab, self.name, self.stem = lab, name, Path(name).stem
        self.path = lab.root / "notebooks" / name
        if not self.path.is_file():
            raise AssertionError(f"notebooks/{name} is not in the project copy this session made at its start")
        # The stored, executed notebook from the checkout: what each cell is expected to show.
        self.stored = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        self.context = browser.new_context(viewport=VIEWPORT)
        self.context.set_default_timeout(WIDGET_TIMEOUT)
        self.page = self.context.new_page()
        self.saved = None
        self.started = self.sidebar_hidden = False
        code = [i for i, c in enumerate(self.stored.cells) if c.cell_type == "code"]
        self.widget_cells = [i for i in code if _INTERACT_CALL.search(_source(self.stored.cells[i]))]
        # The first widget, if cells follow it: pressed before they run (Run All then runs the rest).
        first = self.widget_cells[:1]
        self.first_widget = first[0] if first and first[0] != code[-1] else None
        self.first_press: list[str] = []  # what that first press did wrong
        self.reconnected = 0  # times the lab lost its kernel's connection at the start and was reconnected
        self.page.goto(lab.open_url(name, f"test-{self.stem}"), timeout=60_000)

    def state(self) -> dict:
        return self.page.evaluate(_STATE_JS)

    def _reconnects_by_itself(self) -> bool:
        try:
            self.page.wait_for_function(f"() => !({_STATE_JS})().status.endsWith('| Disconnected')",
                                        timeout=10_000, polling=200)
            return True
        except Exception:  # noqa: BLE001 - playwright's TimeoutError: still disconnected
            return False

    def run_all(self) -> None:
        started = time.monotonic()
        try:
            self.page.wait_for_function(_IDLE_OR_DISCONNECTED_JS, timeout=KERNEL_IDLE_TIMEOUT, polling=200)
            if self.state()["status"].endswith("| Disconnected") and not self._reconnects_by_itself():
                # The kernel took so long to start (a loaded machine) that the lab gave up its connection
                # and shows "Disconnected" for good: what a learner does then is Kernel > Reconnect to Kernel.
                self.reconnected += 1
                TIMINGS.setdefault(self.stem, {})["reconnected"] = self.reconnected  # shown in the summary
                self.menu("kernelmenu:reconnect-to-kernel", "Kernel")
                left = max(KERNEL_IDLE_TIMEOUT - int((time.monotonic() - started) * 1000), 30_000)
                self.page.wait_for_function(_IDLE_JS, timeout=left, polling=200)
        except Exception as exc:
            raise AssertionError(
                f"{self.name}: the kernel never became idle"
                + (" (after Kernel > Reconnect to Kernel)" if self.reconnected else "")
                + f"; the status bar says {self.state()['status']!r}.\n{self.lab.log_tail()}"
            ) from exc
        self.started = True
        if self.first_widget is None:
            self.menu("runmenu:run-all")
        else:  # the cell after the widget selected: everything above it runs, the widget's cell included
            self.select(self.first_widget + 1)
            self.menu("notebook:run-all-above")
        try:
            self.page.wait_for_function(_STARTED_JS, timeout=30_000, polling=200)
        except Exception as exc:
            raise AssertionError(
                f"{self.name}: Run All started no cell; the status bar says {self.state()['status']!r}"
            ) from exc

    def wait_finished(self) -> None:
        try:
            outcome = self.page.wait_for_function(_FINISHED_JS, timeout=RUN_ALL_TIMEOUT, polling=250).json_value()
        except Exception as exc:
            s = self.state()
            raise AssertionError(
                f"{self.name}: Run All did not finish in {RUN_ALL_TIMEOUT // 1000} s; "
                f"status {s['status']!r}, prompts {' '.join(s['prompts'])}"
            ) from exc
        if outcome != "done":
            raise AssertionError(f"{self.name}: {outcome}\n{self.lab.log_tail()}")
        if self.first_widget is not None:
            self.advance()
            return self.wait_finished()
        self.save()
        TIMINGS.setdefault(self.stem, {})["Run All"] = run_seconds(self.saved)

    def save(self) -> None:
        """Save through the toolbar and read the file back: the only place errors are told apart from stderr."""
        import nbformat

        before = self.path.stat().st_mtime_ns
        self.page.locator(".jp-NotebookPanel-toolbar [data-command='docmanager:save']").first.click()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.path.stat().st_mtime_ns != before:
                try:
                    self.saved = nbformat.read(self.path, as_version=4)
                    return
                except Exception:
                    pass  # caught mid-write
            time.sleep(0.1)
        raise AssertionError(f"{self.name}: saving the notebook from JupyterLab did not change the file")

    # helpers for the tests

    def cells(self):
        return self.page.locator(".jp-Notebook .jp-Cell")

    def cell(self, index: int):
        return self.cells().nth(index)

    def advance(self) -> None:
        """Once the cells down to the first widget have run: press it, then start the cells below.
        Returns at once otherwise, so that Runs can move every open notebook on."""
        if self.first_widget is None or not self.started or not self.page.evaluate(_FINISHED_JS):
            return
        widget, self.first_widget = self.first_widget, None
        self.first_press = self.press(widget)
        self.select(widget + 1)
        self.menu("notebook:run-all-below")
        first_after = sum(c.cell_type == "code" for c in self.stored.cells[:widget + 1])
        try:  # the next code cell has started (a prompt of * or a number) before "finished" means anything
            self.page.wait_for_function(
                f"() => {{ const p = ({_STATE_JS})().prompts[{first_after}]; return p !== undefined && p !== '[ ]:'; }}",
                timeout=60_000, polling=200)
        except Exception as exc:
            raise AssertionError(f"{self.name}: running the cells below the widget started none") from exc

    def press(self, index: int) -> list[str]:
        """Press the widget's button in cell `index`; what it showed wrong, as problems."""
        return _press_widget(self, index)

    def wait_idle(self, timeout: int = KERNEL_IDLE_TIMEOUT) -> None:
        self.page.wait_for_function(_IDLE_JS, timeout=timeout, polling=200)

    def select(self, index: int) -> None:
        """Select a cell by a click on its prompt area, as a learner does."""
        cell = self.cell(index)
        cell.scroll_into_view_if_needed()
        cell.locator(".jp-InputPrompt").first.click()

    def menu(self, command: str, menu: str = "Run") -> None:
        """A command from the main menu bar (by its data-command)."""
        self.page.locator("#jp-MainMenu .lm-MenuBar-item", has_text=menu).first.click()
        self.page.locator(f".lm-Menu-item[data-command='{command}']").click()

    def run_cell(self, index: int) -> None:
        """Select one cell and run it from the Run menu, as a learner re-runs a check."""
        self.select(index)
        self.menu("notebook:run-cell")

    def screenshot(self, name: str | None = None, focus=None) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        target = ARTIFACTS / f"{name or self.stem}.png"
        try:
            if not self.sidebar_hidden:  # the file browser takes a fifth of the width
                self.page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").first.click(timeout=5_000)
                self.sidebar_hidden = True
            if focus is not None and focus.count():
                # Twice: cells rendered on the way in change height and move the target.
                for _ in range(2):
                    focus.first.evaluate("e => e.scrollIntoView({block: 'start'})")
                    self.page.wait_for_timeout(300)
            self.page.screenshot(path=str(target))
        except Exception:
            pass  # a screenshot is a by-product; never hide the real failure behind it
        return target

    def close(self) -> None:
        try:
            self.context.close()
        except Exception:
            pass


PRESS_TIMEOUT = 90  # s, against a hang only: a press is judged by what it drew


def _png_pixels(src: str) -> int:
    """Coloured pixels of an <img>'s data: URL; 0 for anything that is not a PNG that decodes."""
    import base64
    import binascii

    prefix = "data:image/png;base64,"
    if not src.startswith(prefix):
        return 0
    try:
        return figure_pixels.coloured_pixels(base64.b64decode(src[len(prefix):], validate=True))
    except (binascii.Error, ValueError, OSError, SyntaxError):
        return 0


def _press_widget(run: "NotebookRun", index: int) -> list[str]:
    """Press "Run Interact" on the widget in cell `index` and wait for what it shows. A widget whose
    code shows a figure must show one with data on it: not a blank image, not bare axes."""
    widget = run.cell(index).locator(".widget-interact").first
    problems = []
    try:
        widget.scroll_into_view_if_needed(timeout=WIDGET_TIMEOUT)
        widget.get_by_role("button", name="Run Interact").click()
    except Exception as exc:  # noqa: BLE001 - said as a problem of this notebook
        return [f"cell {index}: no widget with a Run Interact button to press ({str(exc).splitlines()[0]})"]
    draws = "show_figure(" in _source(run.stored.cells[index])
    deadline = time.monotonic() + PRESS_TIMEOUT
    best = -1
    while time.monotonic() < deadline:
        if draws:
            srcs = widget.locator(".widget-output img").evaluate_all("imgs => imgs.map(i => i.src)")
            best = max([_png_pixels(s) for s in srcs] + [best])
            if best >= figure_pixels.WITH_DATA:
                break
        elif widget.locator(".widget-output .jp-OutputArea-output").count():
            break
        time.sleep(0.25)
    else:
        problems.append(
            f"cell {index}: the first press of Run Interact in a fresh kernel drew no figure with data "
            f"({'no image' if best < 0 else f'{best} coloured pixels at best, expected at least {figure_pixels.WITH_DATA}'})"
            if draws else f"cell {index}: pressing Run Interact showed nothing in {PRESS_TIMEOUT} s")
    try:  # the callback has ended before anything else is run
        run.page.wait_for_function(_IDLE_JS, timeout=KERNEL_IDLE_TIMEOUT, polling=200)
    except Exception:  # noqa: BLE001 - the next step reports a kernel that stays busy
        pass
    return problems


def run_seconds(nb) -> float:
    """From the first cell's start to the last cell's reply, by the timings kept in cell metadata."""
    starts, ends = [], []
    for cell in nb.cells:
        timing = cell.get("metadata", {}).get("execution", {})
        try:
            start = datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
            end = datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        starts.append(start)
        ends.append(end)
    return (max(ends) - min(starts)).total_seconds() if starts else 0.0


def stored_seconds(name: str) -> float:
    """How long the stored notebook took to execute (nbclient keeps timings in each cell)."""
    import nbformat

    try:
        return run_seconds(nbformat.read(ROOT / "notebooks" / name, as_version=4))
    except (OSError, ValueError):
        return 0.0


class Runs:
    """Opens and runs the session's notebooks a few at a time, in the order the tests ask for them."""

    def __init__(self, lab: Lab, browser, order: list[str], parallel: int):
        self.lab, self.browser, self.parallel = lab, browser, max(1, parallel)
        # Longest first, so the slowest notebook is not the last one to start.
        self.pending = sorted(order, key=stored_seconds, reverse=True)
        self.inflight: dict[str, NotebookRun | Exception] = {}
        self.done: dict[str, NotebookRun | Exception] = {}

    def _open(self, name: str) -> None:
        if name in self.pending:
            self.pending.remove(name)
        try:
            self.inflight[name] = NotebookRun(self.lab, self.browser, name)
        except Exception as exc:  # reported to the test that asks for this notebook
            self.inflight[name] = exc

    def _start(self, name: str) -> None:
        run = self.inflight[name]
        if isinstance(run, NotebookRun) and not run.started:
            try:
                run.run_all()
            except Exception as exc:
                run.close()
                self.inflight[name] = exc

    def _fill(self, first: str | None = None) -> None:
        """Open tabs up to the limit (their kernels start together), then press Run All in each."""
        if first is not None and first not in self.inflight:
            self._open(first)
        while len(self.inflight) < self.parallel and self.pending:
            self._open(self.pending[0])
        for name in list(self.inflight):
            self._start(name)

    def get(self, name: str) -> NotebookRun:
        if name not in self.done:
            self._fill(first=name)
            run = self.inflight.pop(name)
            if isinstance(run, NotebookRun):
                try:
                    self._advance_while_waiting(run)
                    run.wait_finished()
                except Exception as exc:
                    run.close()
                    run = exc
            self.done[name] = run
            self._fill()  # the next notebooks run while this one is examined
        run = self.done[name]
        if isinstance(run, Exception):
            raise run
        return run

    def _advance_while_waiting(self, run: NotebookRun) -> None:
        """While `run` runs, move the others on too: a notebook whose cells down to its widget have
        run gets its press and its remaining cells now, not when its test comes."""
        deadline = time.monotonic() + RUN_ALL_TIMEOUT / 1000
        while time.monotonic() < deadline:
            for each in [run, *self.inflight.values()]:
                if isinstance(each, NotebookRun) and each.first_widget is not None:
                    try:
                        each.advance()
                    except Exception as exc:  # noqa: BLE001 - reported by that notebook's test
                        each.first_press.append(f"pressing its first widget failed: {str(exc).splitlines()[0]}")
            if run.first_widget is None and run.page.evaluate(_FINISHED_JS):
                return
            time.sleep(0.5)

    def close(self) -> None:
        for run in [*self.inflight.values(), *self.done.values()]:
            if isinstance(run, NotebookRun):
                run.close()


@pytest.fixture(scope="module")
def runs(request, lab, browser):
    wanted = []
    here = Path(__file__).resolve().parent
    for item in request.session.items:
        if here not in Path(str(item.path)).resolve().parents:
            continue  # other modules parametrize by "notebook" too
        name = getattr(item, "callspec", None) and item.callspec.params.get("notebook")
        if name and name not in wanted:
            wanted.append(name)
    parallel = int(os.environ.get("LOOPKATA_BROWSER_PARALLEL", "3") or 3)
    manager = Runs(lab, browser, wanted, parallel)
    try:
        yield manager
    finally:
        manager.close()


# --- what the notebooks should show ----------------------------------------

def _hidden_test_count(kata: catalogue.Kata) -> int:
    """How many tests the grader expects for `kata`: the rows its check panel must show."""
    return len(runner.expected_tests(kata))


@pytest.fixture(scope="session")
def hidden_tests():
    """hidden_tests(kata) -> how many tests the grader collects for it."""
    return _hidden_test_count


@pytest.fixture(scope="session")
def timings() -> dict:
    return TIMINGS


def pytest_terminal_summary(terminalreporter):
    notebooks = {k: v for k, v in TIMINGS.items() if isinstance(v, dict)}
    if not notebooks:
        return
    write = terminalreporter.write_line
    terminalreporter.section("browser timings")
    for what in ("server start", "browser start"):
        if what in TIMINGS:
            write(f"{what:<36}{TIMINGS[what]:7.1f} s")
    write(f"{'notebook':<36}{'Run All':>9}{'checks':>9}{'clicks':>9}")
    for stem, phases in notebooks.items():
        cells = "".join(f"{phases[p]:7.1f} s" if p in phases else f"{'-':>9}" for p in ("Run All", "checks", "clicks"))
        write(f"{stem:<36}{cells}" + ("  (its kernel's connection was lost at the start: reconnected from the "
                                      "Kernel menu)" if phases.get("reconnected") else ""))
    for what, seconds in TIMINGS.items():
        if what.startswith(("learner loop", "browser stage")):
            write(f"{what:<36}{seconds:7.1f} s")
