"""How long `loopkata check` takes, as a learner waits for it.

Prints the median wall time of the whole command (a new process, as in a
terminal) per kata: against the reference solution (a passing check), against
the starter and every decoy (failing checks, which a learner meets first and
most often), each also as a ratio to the reference's passing check; and the
time to a hang verdict for a check whose only test deadlocks.

    .venv/bin/python benchmarks/check_latency.py [--runs N] [--no-decoys] [--kata ID]

Each run also writes its figures to benchmarks/check_latency.json (a run of one
kata replaces only that kata's), from which `python -m loopkata.authoring.tables --write`
makes the README's table: the table cannot say more than was measured.

Targets on a 2-core machine: every failing check at most 2.0 s, every passing
check at most 1.5 s; for a kata that needs a database server or Celery workers,
which each check starts for itself, 5.0 s and 4.0 s, start-up included. Rows over their
target are marked "over".
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from loopkata.model import catalogue  # noqa: E402

RECORD = ROOT / "benchmarks" / "check_latency.json"

DEADLOCK = '''
import asyncio

def scenario():
    async def main():
        await asyncio.Event().wait()
    return asyncio.run(main())
'''
HIDDEN = '''
from loopkata.testing import run_bounded

def test_scenario(kata):
    """the scenario finishes"""
    run_bounded(kata.scenario)
'''


def timed(cmd, env=None) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    return time.perf_counter() - started


def median_of(runs, cmd, env=None) -> float:
    return statistics.median(timed(cmd, env) for _ in range(runs))


def hang_verdict_seconds(runs: int) -> float:
    """A one-test kata whose test deadlocks, graded through the real runner."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "tests" / "hidden").mkdir(parents=True)
        (tmp / "tests" / "hidden" / "test_deadlock.py").write_text(HIDDEN)
        (tmp / "impl.py").write_text(DEADLOCK)
        code = (
            "import dataclasses, sys; from pathlib import Path; from loopkata.grading import runner; from loopkata.model import catalogue; "
            "k = dataclasses.replace(catalogue.find('1'), root=Path(sys.argv[1]), tests='hidden/test_deadlock.py', hang_after=1.0); "
            "r = runner.check(k, Path(sys.argv[1]) / 'impl.py'); assert r.verdict == 'hang', r"
        )
        return median_of(runs, [sys.executable, "-c", code, str(tmp)])


PASS_TARGET, FAIL_TARGET = 1.5, 2.0
SERVER_TARGETS = {"postgres": (4.0, 5.0), "celery": (4.0, 5.0)}  # (passing, failing): the check starts its own server or workers


def targets(kata) -> tuple[float, float]:
    """(passing, failing) targets in seconds for `kata`."""
    found = [SERVER_TARGETS[s] for s in kata.services if s in SERVER_TARGETS]
    return max(found) if found else (PASS_TARGET, FAIL_TARGET)


def row(label: str, seconds: float, reference: float, target: float, verdict: str) -> str:
    mark = "ok" if seconds <= target else "over"
    return f"  {label:<40} {seconds:>7.2f}s  x{seconds / reference:>5.2f}  {mark:<4} (target {target:.1f} s)  {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-decoys", action="store_true", help="time only the solution and the starter")
    parser.add_argument("--kata", help="only this kata")
    args = parser.parse_args()
    env = {**os.environ, "LOOPKATA_STATE": tempfile.mkdtemp()}
    loopkata = [sys.executable, "-m", "loopkata", "check"]
    print(f"median wall time of `loopkata check` over {args.runs} runs, {os.cpu_count()} cores, "
          f"Python {sys.version.split()[0]}; xN = times the reference's passing check\n")
    over, measured = 0, {}
    for k in catalogue.load():
        if args.kata and args.kata not in (k.id, str(k.number)):
            continue
        solution = median_of(args.runs, [*loopkata, k.id, "--impl", str(k.solution_path)], env)
        pass_target, fail_target = targets(k)
        record = measured[k.id] = {"reference": solution, "decoys": {}, "variants": {}}
        print(f"{k.label} ({','.join(k.services) or 'stdlib'})")
        print(row("reference solution (passes)", solution, solution, pass_target, "passed"))
        failing = [("starter", ["--impl", str(k.kata_path)], "+".join(s.verdict for s in k.symptoms))]
        if not args.no_decoys:  # named as a user names them: each is built from its base in the check
            failing += [(f"decoy {d.stem}", ["--decoy", d.stem], "fails") for d in k.decoys]
        for label, impl, verdict in failing:
            seconds = median_of(args.runs, [*loopkata, k.id, *impl], env)
            print(row(label, seconds, solution, fail_target, verdict))
            if label == "starter":
                record["starter"] = seconds
            else:
                record["decoys"][impl[1]] = seconds
            over += seconds > fail_target
        over += solution > pass_target
        for v in [] if args.no_decoys else k.variants:
            seconds = median_of(args.runs, [*loopkata, k.id, "--variant", v.stem], env)
            print(row(f"variant {v.stem} (passes)", seconds, solution, pass_target, "passed"))
            record["variants"][v.stem] = seconds
            over += seconds > pass_target
    hang = hang_verdict_seconds(args.runs)
    print(f"\n{'hang verdict (hang_after 1.0 s)':<42} {hang:>7.2f}s")
    print(f"{over} check(s) over target")
    write_record(measured, hang, args.runs)


def write_record(measured: dict, hang: float, runs: int) -> None:
    """Merge this run's figures into the record the README's table is made from."""
    try:
        record = json.loads(RECORD.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {"katas": {}}
    for kata_id, figures in measured.items():
        figures["measured"] = {"date": datetime.date.today().isoformat(), "runs": runs, "cores": os.cpu_count(),
                               "python": sys.version.split()[0]}
        record["katas"][kata_id] = figures
    record["hang_verdict"] = hang
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"figures written to {RECORD.relative_to(ROOT)}; `python -m loopkata.authoring.tables --write` puts them in the README")


if __name__ == "__main__":
    main()
