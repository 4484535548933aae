"""The engine keeps its layers: no module imports a layer above its own, and no folder's modules import in a circle.

The layers are the contract in pyproject.toml ([tool.importlinter]), checked by import-linter's
`lint-imports`; CONTRIBUTING.md draws them.
"""
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.python_independent
def test_every_module_imports_only_the_layers_below_it():
    """every engine module imports only from the layers below its own, and no folder holds an import cycle"""
    lint = Path(sys.executable).with_name("lint-imports")
    assert lint.exists(), f"expected import-linter's lint-imports beside {sys.executable} (requirements-dev.txt)"
    ran = subprocess.run([str(lint), "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, check=False)
    report = ran.stdout[ran.stdout.find("Contracts"):] if "Contracts" in ran.stdout else ran.stdout
    assert ran.returncode == 0, (
        "expected every import-linter contract in pyproject.toml to be kept (the layers CONTRIBUTING.md draws); "
        f"lint-imports exited {ran.returncode} and says:\n{report}{ran.stderr}")


def test_contributing_draws_the_layers_the_contract_checks():
    """CONTRIBUTING.md's picture of the layers names the same folders, in the same order, as the contract"""
    contract = next(c for c in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
                    ["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    checked = [" | ".join(part.strip() for part in layer.split("|")) for layer in contract["layers"] if layer != "__main__"]
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    picture = text[text.index("## The engine's layers"):].split("```")[1]
    drawn = [line.split("  ")[0].strip() for line in picture.splitlines() if line and not line.startswith(" ")]
    assert drawn == checked, (f"expected CONTRIBUTING.md to draw the layers pyproject.toml checks, top first: {checked}; "
                              f"it draws {drawn}")
