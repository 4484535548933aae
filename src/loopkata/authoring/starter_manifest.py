"""katas/starters.toml, written from the starters now in katas/ (loopkata.model.starters reads it).

    python -m loopkata.authoring.starter_manifest --write   # after adding or changing a starter
    python -m loopkata.authoring.starter_manifest           # exit 1 if the manifest is stale
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..model import catalogue
from ..model.paths import display_path
from ..model.starters import MANIFEST, blob_id, kata_files, sha256


def manifest_text(root: Path) -> str:
    """The manifest for the starters now in root/katas/ (what --write stores)."""
    lines = [
        "# The starters as shipped, one [[starter]] per file: `loopkata reset` restores",
        "# exactly these bytes and `loopkata list` calls a kata untouched only while it",
        "# matches them. Regenerate after changing a starter: python -m loopkata.authoring.starter_manifest --write",
    ]
    for kata in catalogue.load(root):
        for rel in kata_files(kata, root / "katas"):
            data = (root / "katas" / rel).read_bytes()
            lines += [
                "", "[[starter]]",
                f"kata = {json.dumps(kata.id)}",
                f"path = {json.dumps(rel.as_posix())}",
                f'sha256 = "{sha256(data)}"',
                f'blob = "{blob_id(data)}"',
            ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    root = catalogue.project_root()
    path, text = root / MANIFEST, manifest_text(root)
    if argv == ["--write"]:
        path.write_text(text, encoding="utf-8")
        print(f"Wrote {display_path(path)}.")
        return 0
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    print(f"{display_path(path)} is up to date." if current == text
          else f"{display_path(path)} does not match katas/: run python -m loopkata.authoring.starter_manifest --write")
    return 0 if current == text else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
