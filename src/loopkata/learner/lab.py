"""The JupyterLab a learner opens: `make lab` runs `python -m loopkata.learner.lab`.

It serves the whole collection (the project folder is the server's root, so katas/ is in
the file browser and the notebooks' "Open katas/..." links work) and opens the start page,
with JupyterLab's news and update toasts switched off. The suite's browser stage starts its
lab from `command()` too, so what it tests is what a learner gets.

    python -m loopkata.learner.lab [JUPYTERLAB OPTIONS...]
    python -m loopkata.learner.lab --write-settings FOLDER   (Binder: the same settings, written once)
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..model import catalogue

START_PAGE = "notebooks/00_start_here.ipynb"
# JupyterLab's own settings for the collection: no "Would you like to get notified about
# official Jupyter news?" toast over the notebook, no update check, no extension manager.
SETTINGS = {
    "@jupyterlab/apputils-extension:notification": {"checkForUpdates": False, "fetchNews": "false"},
    "@jupyterlab/extensionmanager-extension:plugin": {"enabled": False},
}


def write_settings(folder: Path, extra: dict | None = None) -> Path:
    """Write SETTINGS (and `extra`) as JupyterLab's overrides.json in `folder`; return `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "overrides.json").write_text(json.dumps({**SETTINGS, **(extra or {})}, indent=2) + "\n",
                                           encoding="utf-8")
    return folder


def command(root: Path, settings: Path, *options: str) -> list[str]:
    """The command that serves `root` and opens its start page, with the settings in `settings`."""
    root = Path(root).resolve()
    return [
        sys.executable, "-m", "jupyterlab",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.app_settings_dir={settings}",
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
    os.execv(cmd[0], cmd)  # the lab takes this process's place: Ctrl-C reaches it directly
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
