"""The set-up stays in step: README table, pins, Binder."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loopkata.authoring import readme_screenshot, tables

ROOT = Path(__file__).resolve().parents[1]


def _pins_from_requirements() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split(";")[0].split("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def _pins_from_environment(path: Path) -> dict[str, str]:
    pins = {}
    for m in re.finditer(r"^\s+- ([A-Za-z0-9_.\-]+)==([^\s#]+)", path.read_text(), re.M):
        pins[m.group(1).lower()] = m.group(2)
    return pins


@pytest.mark.parametrize("file, name, make", tables.BLOCKS, ids=[f"{f}:{n}" for f, n, _ in tables.BLOCKS])
def test_the_docs_tables_are_the_ones_the_project_makes(file, name, make):
    """the README's and the facilitator guide's tables are made from the catalogue, the decoys and the records"""
    found = tables.current(ROOT, file, name)
    assert found is not None, f"expected {file} to hold a table between <!-- {name} --> and <!-- end {name} --> markers"
    expected = make()
    assert found == expected, (f"{file}'s {name} table is stale (run `python -m loopkata.authoring.tables --write`); "
                               f"it should read:\n{expected}")


def test_environment_yml_carries_the_same_pins_as_requirements():
    """environment.yml (conda, Binder) pins exactly what requirements.txt pins"""
    req = _pins_from_requirements()
    env = _pins_from_environment(ROOT / "environment.yml")
    assert env == req, f"expected the same pins; only in requirements.txt: {set(req.items()) - set(env.items())}, only in environment.yml: {set(env.items()) - set(req.items())}"


def test_binder_environment_is_the_same_file():
    """binder/environment.yml is a byte-for-byte copy of environment.yml"""
    # repo2docker reads only binder/ when it exists, and puts the file in the
    # image before the rest of the repository, so a symlink would dangle there.
    a, b = ROOT / "environment.yml", ROOT / "binder" / "environment.yml"
    assert not b.is_symlink(), "binder/environment.yml must be a real file: a symlink dangles in repo2docker's build"
    assert a.read_bytes() == b.read_bytes(), "binder/environment.yml differs from environment.yml: copy it over"


def test_python_version_is_the_same_everywhere():
    """pyproject, the Makefile and environment.yml agree on the Python version"""
    pyproject = (ROOT / "pyproject.toml").read_text()
    env = (ROOT / "environment.yml").read_text()
    minimum = re.search(r'requires-python = ">=(3\.\d+)"', pyproject).group(1)
    assert f"python={minimum}" in env, f"expected environment.yml to pin python={minimum}"
    assert f"sys.version_info < ({minimum.replace('.', ', ')})" in (ROOT / "Makefile").read_text()


@pytest.mark.skipif(shutil.which("repo2docker", path=str(Path(sys.executable).parent)) is None and shutil.which("repo2docker") is None,
                    reason="jupyter-repo2docker is not installed (make test installs it)")
def test_binder_builds_from_binder_folder():
    """repo2docker picks binder/environment.yml, Python 3.11 and binder/postBuild"""
    exe = shutil.which("repo2docker", path=str(Path(sys.executable).parent)) or shutil.which("repo2docker")
    out = subprocess.run(
        [exe, "--no-build", "--no-run", "--debug", str(ROOT)],
        capture_output=True, text=True, timeout=120,
    )
    dockerfile = out.stdout + out.stderr
    assert "Building conda environment for python=3.11" in dockerfile, dockerfile[-2000:]
    assert '--file "binder/environment.yml"' in dockerfile, "expected the conda environment from binder/environment.yml"
    assert "RUN ./binder/postBuild" in dockerfile, "expected binder/postBuild to run"
    post = (ROOT / "binder" / "postBuild").read_text()
    assert "pip install --no-deps -e ." in post, "postBuild installs the grader"
    assert "jupyter trust notebooks/*.ipynb" in post, "postBuild trusts the shipped notebooks"
    assert "/lab/tree/notebooks/00_start_here.ipynb" in post, "postBuild opens the start page"


def _make_install(tmp_path, py: str) -> str:
    """Ask make to install into a throwaway venv with interpreter `py`; what it printed."""
    venv = tmp_path / "venv"
    out = subprocess.run(
        ["make", "-s", "-C", str(ROOT), f"{venv}/.installed", f"PY={py}", f"VENV={venv}"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode != 0, f"expected make to refuse {py}, it went on:\n{out.stdout}{out.stderr}"
    assert not venv.exists(), "expected no venv to be made for an interpreter that was refused"
    return out.stdout + out.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_says_when_the_interpreter_does_not_exist(tmp_path):
    """make with an interpreter that is not installed says so, not that it is too old"""
    said = _make_install(tmp_path, "python3.99")
    assert "no working Python called 'python3.99'" in said, f"expected 'not found' in what make said, got:\n{said}"
    assert "needs Python 3.11" not in said, f"a missing interpreter is not an old one, make said:\n{said}"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_refuses_an_old_interpreter_naming_its_version(tmp_path):
    """make with Python 3.10 or older says which version it found and which it needs"""
    old = next((p for p in sorted(Path.home().glob(".pyenv/versions/3.[0-9].*/bin/python3"))
                + sorted(Path.home().glob(".pyenv/versions/3.10.*/bin/python3"))), None)
    if old is None:
        pytest.skip("no Python older than 3.11 on this machine")
    said = _make_install(tmp_path, str(old))
    assert "needs Python 3.11 or newer" in said and old.parent.parent.name in said, (
        f"expected the needed and the found version ({old.parent.parent.name}), got:\n{said}"
    )


def test_the_readme_screenshot_shows_todays_check_panel():
    """the README's screenshot shows kata 01's panel with as many tests as kata 01 has today"""
    shown = readme_screenshot.stored_headline(ROOT / readme_screenshot.PATH)
    expected = readme_screenshot.expected_headline()
    assert shown == expected, (
        f"expected {readme_screenshot.PATH} to show the panel saying {expected!r}, but it "
        + (f"shows {shown!r}" if shown else "carries no headline (it was not taken by `make screenshot`)")
        + ": run `make screenshot` to take it again"
    )
