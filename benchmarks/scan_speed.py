"""How fast and how precise `loopkata scan` is, measured.

Scans the installed aiohttp, starlette, fastapi, uvicorn, httpx, anyio and
celery (the packages listed in tests/scan_verdicts.toml) as a team would scan
its repository: the whole command, a new process each run. Prints the median
time, the time per 10,000 lines, precision (true positives among the findings,
from the verdicts in tests/scan_verdicts.toml), recall on the katas' starters
(each flagged by its own rule) and on the real-world-shaped samples of
tests/scan_samples (each flagged on the lines it marks, its fixed twin clean).

    .venv/bin/python benchmarks/scan_speed.py [--runs N]

Target on a 2-core machine: at most 0.5 s per 10,000 lines.
"""
import argparse
import importlib.util
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from loopkata import scan  # noqa: E402
from loopkata.learner import progress
from loopkata.model import alternatives, catalogue

TARGET = 0.5  # seconds per 10,000 lines
EXPECTED = re.compile(r"#\s*expect:\s*(LK\d\d(?:\s*,\s*LK\d\d)*)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    verdicts = tomllib.loads((ROOT / "tests" / "scan_verdicts.toml").read_text())
    folders = [str(Path(importlib.util.find_spec(name).origin).parent) for name in verdicts["packages"]]
    times, data = [], None
    for _ in range(runs):
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "loopkata", "scan", "--format", "json", *folders],
                             capture_output=True, text=True, cwd=ROOT)
        times.append(time.perf_counter() - started)
        data = json.loads(out.stdout)
    median = statistics.median(times)
    per_10k = median / data["lines"] * 10_000
    true = sum(v["verdict"] == "true positive" for v in verdicts["finding"])
    found = len(data["findings"])
    print(f"real async packages: {', '.join(verdicts['packages'])}")
    print(f"  {data['files']} files, {data['lines']:,} lines; median of {runs} runs of the whole command: {median:.2f} s")
    print(f"  {per_10k:.2f} s per 10,000 lines (target under {TARGET:.1f} s){'  over' if per_10k > TARGET else ''}")
    print(f"  findings: {found}; with a verdict of true positive: {true}"
          f" -> precision {true / found:.0%}" if found else "  findings: none")
    with tempfile.TemporaryDirectory() as state:
        import os

        os.environ["LOOPKATA_STATE"] = state
        katas = [k for k in catalogue.load(ROOT) if f"LK{k.number:02d}" in scan.RULES]
        flagged = [k for k in katas if any(f.rule == f"LK{k.number:02d}"
                                           for f in scan.scan([progress.pristine_starter(k)]).findings)]
    print(f"recall on the katas' starters: {len(flagged)} of {len(katas)} flagged by their own rule")
    with tempfile.TemporaryDirectory() as built:  # each variant as the grader builds it from its base
        for k in catalogue.load(ROOT):
            for v in k.variants:
                alternatives.build(k, v, Path(built) / k.id)
        correct = scan.scan([ROOT / "solutions", Path(built)])
    print(f"reference fixes and variants: {len(correct.findings)} findings in {correct.files} files "
          f"({', '.join(sorted({f.rule for f in correct.findings})) or 'none'}: another kata's bug they keep, "
          "listed in tests/test_scan.py)" if correct.findings else
          f"reference fixes and variants: no finding in {correct.files} files")
    samples = sorted((ROOT / "tests" / "scan_samples").iterdir())
    caught = [case for case in samples if _flagged_as_marked(case / "bug")]
    clean = [case for case in samples if not scan.scan([case / "fixed"]).findings]
    print(f"real-world-shaped samples: {len(caught)} of {len(samples)} flagged on every line they mark; "
          f"{len(clean)} of {len(samples)} fixed twins clean")


def _flagged_as_marked(folder: Path) -> bool:
    """Is every line marked `# expect: LKnn` flagged by that rule, and nothing else?"""
    marked = {(path, number, rule.strip()) for path in folder.rglob("*") if path.is_file()
              for number, line in enumerate(path.read_text().splitlines(), 1)
              if (m := EXPECTED.search(line)) for rule in m.group(1).split(",")}
    found = {(Path(f.path), f.line, f.rule) for f in scan.scan([folder]).findings}
    return bool(marked) and found == marked


if __name__ == "__main__":
    main()
