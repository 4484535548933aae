"""The JupyterLab a learner opens: `make lab` runs `python -m loopkata.learner.lab`.

It serves the whole collection (the project folder is the server's root, so katas/ is in
the file browser and the notebooks' "Open katas/..." links work) and opens the start page,
with JupyterLab's news and update toasts switched off. The URL it prints opens the start page
too: on a remote machine, in WSL or a container, that URL is what a learner pastes. Its
terminal finds the venv's `loopkata`, `python` and `pytest`, as after `source .venv/bin/activate`.
The suite's browser stage starts its lab from `command()` and `environment()` too, so what it
tests is what a learner gets.

    python -m loopkata.learner.lab [JUPYTERLAB OPTIONS...]
    python -m loopkata.learner.lab --write-settings FOLDER   (Binder: the same settings, written once)
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path

from ..model import catalogue

START_PAGE = "notebooks/00_start_here.ipynb"
# JupyterLab's own settings for the collection: no "Would you like to get notified about
# official Jupyter news?" toast over the notebook, no update check, no extension manager.
SETTINGS = {
    "@jupyterlab/apputils-extension:notification": {"checkForUpdates": False, "fetchNews": "false"},
    "@jupyterlab/extensionmanager-extension:plugin": {"enabled": False},
}


TERMINAL_RC = "terminal.bashrc"


def scripts_folder() -> Path:
    """Where this interpreter's console scripts are (`loopkata`, `pytest`): the venv's bin/."""
    return Path(sysconfig.get_path("scripts"))


def environment(base: dict[str, str]) -> dict[str, str]:
    """`base` as `source .venv/bin/activate` leaves it: this interpreter's scripts first on PATH."""
    env = dict(base)
    scripts = str(scripts_folder())
    rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != scripts]
    env["PATH"] = os.pathsep.join([scripts, *rest])
    if sys.prefix != sys.base_prefix:  # a venv, as `make` builds
        env["VIRTUAL_ENV"] = sys.prefix
    return env


def write_settings(folder: Path, extra: dict | None = None) -> Path:
    """Write SETTINGS (and `extra`) as JupyterLab's overrides.json in `folder`, and the terminal's
    bash start-up file; return `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "overrides.json").write_text(json.dumps({**SETTINGS, **(extra or {})}, indent=2) + "\n",
                                           encoding="utf-8")
    scripts = shlex.quote(str(scripts_folder()))
    venv = f"export VIRTUAL_ENV={shlex.quote(sys.prefix)}\n" if sys.prefix != sys.base_prefix else ""
    (folder / TERMINAL_RC).write_text(
        "# The lab terminal's bash reads this instead of ~/.bashrc (loopkata.learner.lab).\n"
        "[ -f ~/.bashrc ] && . ~/.bashrc\n"
        "# Then the collection's venv comes first, as after `source .venv/bin/activate`.\n"
        f"{venv}export PATH={scripts}:\"$PATH\"\n", encoding="utf-8")
    return folder


def _terminal_shell(settings: Path) -> str:
    """The terminal's command line. Without one, jupyter_server starts a login shell whenever its
    output is not a terminal (nohup, a service, a test), and Debian's /etc/profile then sets PATH
    afresh, without the venv. bash reads our start-up file after the learner's own; another shell
    keeps the PATH that environment() gave the server."""
    shell = os.environ.get("SHELL") or shutil.which("bash") or "sh"
    if Path(shell).name == "bash":
        return shlex.join([shell, "--rcfile", str(settings / TERMINAL_RC), "-i"])
    return shell


def command(root: Path, settings: Path, *options: str) -> list[str]:
    """The command that serves `root` and opens its start page, with the settings in `settings`."""
    root = Path(root).resolve()
    return [
        sys.executable, "-m", "jupyterlab",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.app_settings_dir={settings}",
        f"--LabApp.default_url=/lab/tree/{START_PAGE}",  # the URL it prints opens the start page
        f"--ServerApp.terminado_settings=shell_command={_terminal_shell(settings)}",
        *(["--allow-root"] if os.geteuid() == 0 else []),  # containers and workshop VMs often run as root
        *options,
        str(root / START_PAGE),
    ]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--write-settings"] and len(argv) == 2:
        write_settings(Path(argv[1]))
        return 0
    try:
        root = catalogue.project_root()
    except catalogue.CatalogueError as exc:
        print(exc, file=sys.stderr)
        return 2
    settings = write_settings(root / ".loopkata" / "lab-settings")
    cmd = command(root, settings, *argv)
    os.execve(cmd[0], cmd, environment(dict(os.environ)))  # the lab takes this process's place: Ctrl-C reaches it directly
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
