"""How check latency grows when several learners check at once on one machine.

Starts N `loopkata check` commands at the same moment (each a new process, as N
learners on one hub would), for a failing fix (the starter) and a passing one
(the reference), and prints the median and the worst wall time of the N, and
whether any verdict differed from the one a lone check gives (none may).
That sizes a hub: "N cores serve M learners checking at once".

    .venv/bin/python benchmarks/concurrent_checks.py [--kata ID] [--counts 1,2,5,10] [--rounds R]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from loopkata.model import catalogue  # noqa: E402


def at_once(kata, impl: Path, count: int) -> list[tuple[float, str]]:
    """(seconds, verdict) of `count` checks of `impl` started together."""
    started = time.perf_counter()
    children, states = [], []
    for _ in range(count):
        states.append(tempfile.mkdtemp(prefix="loopkata-bench-"))  # a learner each: progress of their own
        env = {**os.environ, "LOOPKATA_STATE": states[-1]}
        children.append(subprocess.Popen([sys.executable, "-m", "loopkata", "check", kata.id, "--impl", str(impl),
                                          "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                         cwd=ROOT, env=env))
    out = [None] * count

    def wait(n: int) -> None:  # each check's own finishing time, not when the loop got round to it
        text, _ = children[n].communicate()
        out[n] = (time.perf_counter() - started, json.loads(text)["verdict"] if text.strip() else "no output")

    waiters = [threading.Thread(target=wait, args=(n,)) for n in range(count)]
    for w in waiters:
        w.start()
    for w in waiters:
        w.join()
    for folder in states:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kata", default="bound-semaphore")
    parser.add_argument("--counts", default="1,2,5,10")
    parser.add_argument("--rounds", type=int, default=2, help="times each count is run")
    args = parser.parse_args()
    kata = catalogue.find(args.kata)
    print(f"{kata.label}: N checks started at once, {os.cpu_count()} cores, Python {sys.version.split()[0]}; "
          f"{args.rounds} rounds each\n")
    print(f"{'fix':<10} {'N':>3} {'median':>8} {'worst':>8}  verdicts")
    for label, impl in (("failing", kata.kata_path), ("passing", kata.solution_path)):
        alone = at_once(kata, impl, 1)[0][1]
        for count in (int(c) for c in args.counts.split(",")):
            runs = [r for _ in range(args.rounds) for r in at_once(kata, impl, count)]
            seconds = [s for s, _ in runs]
            changed = sum(v != alone for _, v in runs)
            said = f"all {alone}" if not changed else f"{changed} of {len(runs)} differ from a lone check ({alone})"
            print(f"{label:<10} {count:>3} {statistics.median(seconds):>7.2f}s {max(seconds):>7.2f}s  {said}")


if __name__ == "__main__":
    main()
