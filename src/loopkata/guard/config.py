"""The guard's settings: `[tool.loopkata.guard]` in the project's pyproject.toml, then the command line's.

    [tool.loopkata.guard]
    select = ["LG01", "loop-blocked"]   # codes or names; default: every kind
    ignore = ["LG07"]
    mode = "fail"                       # or "warn": findings are reported and fail nothing
    block-threshold-ms = 100            # LG04: how long one callback may hold the loop
    loops-kept = 1                      # LG02: loops a test may leave alive (a cache may keep the last one)
    exclude = ["tests/legacy/*"]        # findings whose first line is in these files are dropped
    report = "guard-report.json"        # a JSON report of every finding, kept up to date as they come

A setting that cannot be used is a `ConfigError` with one line that names it.
"""
from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from ..model import nesting
from .findings import KINDS, NAMES


class ConfigError(ValueError):
    """A setting of the guard that cannot be used; its message is one line."""


@dataclass(frozen=True)
class Settings:
    selected: frozenset[str] = frozenset(KINDS)
    mode: str = "fail"
    block_threshold: float = 0.1  # seconds
    loops_kept: int = 1
    exclude: tuple[str, ...] = ()
    report: str = ""
    source: str = "defaults"  # where the settings were read, for messages

    def excluded(self, where: list[str]) -> bool:
        if not where or not self.exclude:
            return False
        file = where[0].rsplit(" in ", 1)[0].rsplit(":", 1)[0]
        return any(fnmatch.fnmatch(file, pattern) for pattern in self.exclude)


def _codes(values, key: str, source: str) -> set[str]:
    if isinstance(values, str):
        values = [v for v in values.replace(",", " ").split() if v]
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"{source}: {key} must be a list of codes or names such as ['LG01', 'loop-blocked']")
    out = set()
    for v in values:
        code = v.upper() if v.upper() in KINDS else NAMES.get(v)
        if v.upper() == "ALL":
            out |= set(KINDS)
        elif code is None:
            known = ", ".join(f"{c} {k.name}" for c, k in KINDS.items())
            raise ConfigError(f"{source}: {key} names {v!r}, which is no kind of finding (known: {known})")
        else:
            out.add(code)
    return out


def apply(settings: Settings, table: dict, source: str) -> Settings:
    """`settings` with the keys of `table` (pyproject's table, or the command line's) applied."""
    known = {"select", "ignore", "mode", "block-threshold-ms", "loops-kept", "exclude", "report"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{source}: unknown setting {unknown[0]!r} (known: {', '.join(sorted(known))})")
    s = settings
    if table.get("select") is not None:
        s = replace(s, selected=frozenset(_codes(table["select"], "select", source)))
    if table.get("ignore") is not None:
        s = replace(s, selected=s.selected - _codes(table["ignore"], "ignore", source))
    if table.get("mode") is not None:
        if table["mode"] not in ("fail", "warn"):
            raise ConfigError(f"{source}: mode must be \"fail\" or \"warn\", not {table['mode']!r}")
        s = replace(s, mode=table["mode"])
    if table.get("block-threshold-ms") is not None:
        ms = table["block-threshold-ms"]
        if isinstance(ms, str):
            try:
                ms = float(ms)
            except ValueError:
                ms = None
        if isinstance(ms, bool) or not isinstance(ms, int | float) or not 1 <= ms <= 600_000:
            raise ConfigError(f"{source}: block-threshold-ms must be a number of milliseconds from 1 to 600000, "
                              f"not {table['block-threshold-ms']!r}")
        s = replace(s, block_threshold=ms / 1000)
    if table.get("loops-kept") is not None:
        n = table["loops-kept"]
        if isinstance(n, str) and n.isdigit():
            n = int(n)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigError(f"{source}: loops-kept must be a whole number from 0, not {table['loops-kept']!r}")
        s = replace(s, loops_kept=n)
    if table.get("exclude") is not None:
        ex = table["exclude"]
        if isinstance(ex, str):
            ex = [ex]
        if not isinstance(ex, list) or not all(isinstance(v, str) for v in ex):
            raise ConfigError(f"{source}: exclude must be a list of file patterns such as ['tests/legacy/*']")
        s = replace(s, exclude=tuple(ex))
    if table.get("report") is not None:
        if not isinstance(table["report"], str):
            raise ConfigError(f"{source}: report must be the path of a JSON file, not {table['report']!r}")
        if "\0" in table["report"]:  # no file system takes it, and open() would raise ValueError
            raise ConfigError(f"{source}: report must be the path of a JSON file, and no path holds a NUL byte: "
                              f"{table['report'][:100]!r}")
        s = replace(s, report=table["report"])
    return replace(s, source=source if s.source == "defaults" else f"{s.source}, {source}")


def from_pyproject(folder: Path) -> Settings:
    """The settings of `[tool.loopkata.guard]` in the nearest pyproject.toml at or above `folder`."""
    for d in (folder, *folder.parents):
        path = d / "pyproject.toml"
        if path.is_file():
            try:
                text = path.read_text(encoding="utf-8")
                if nesting.toml_too_deep(text, nesting.TOML_DEPTH):  # tomllib recurses once per level
                    raise ConfigError(f"{path}: cannot be read as TOML (it is nested too deep: arrays or inline "
                                      f"tables more than {nesting.TOML_DEPTH} levels deep)")
                data = tomllib.loads(text)
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"{path}: cannot be read as TOML ({str(exc).splitlines()[0]})") from None
            table = data
            for name in ("tool", "tool.loopkata", "tool.loopkata.guard"):
                table = table.get(name.rsplit(".", 1)[-1], {})
                if not isinstance(table, dict):
                    raise ConfigError(f"{path}: [{name}] must be a table, not {table!r}")
            return apply(Settings(), table, str(path)) if table else Settings()
    return Settings()


def as_table(s: Settings) -> dict:
    """`s` as a table `apply` takes back: how settings travel to a guarded child process."""
    return {"select": sorted(s.selected), "mode": s.mode, "block-threshold-ms": s.block_threshold * 1000,
            "loops-kept": s.loops_kept, "exclude": list(s.exclude), "report": s.report}

