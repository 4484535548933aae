"""How long `loopkata check` takes, as a learner waits for it.

Prints the median wall time of the whole command (a new process, as in a
terminal) per kata, against the reference solution and against the starter,
and of a check whose only test deadlocks (the time to a hang verdict).

    .venv/bin/python benchmarks/check_latency.py [--runs N]

Targets on a 2-core machine: a stdlib kata's check at most 1.0 s, a hang
verdict at most 2 s.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from loopkata import catalogue  # noqa: E402

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
            "import dataclasses, sys; from pathlib import Path; from loopkata import catalogue, runner; "
            "k = dataclasses.replace(catalogue.find('1'), root=Path(sys.argv[1]), tests='hidden/test_deadlock.py', hang_after=1.0); "
            "r = runner.check(k, Path(sys.argv[1]) / 'impl.py'); assert r.verdict == 'hang', r"
        )
        return median_of(runs, [sys.executable, "-c", code, str(tmp)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "LOOPKATA_STATE": tempfile.mkdtemp()}
    loopkata = [sys.executable, "-m", "loopkata", "check"]
    print(f"median wall time of `loopkata check` over {args.runs} runs, {os.cpu_count()} cores, Python {sys.version.split()[0]}\n")
    print(f"{'kata':<22} {'services':<10} {'solution':>9} {'starter':>9}  starter verdict")
    for k in catalogue.load():
        solution = median_of(args.runs, [*loopkata, k.id, "--impl", str(k.solution_path)], env)
        starter = median_of(args.runs, [*loopkata, k.id, "--impl", str(k.kata_path)], env)
        verdicts = "+".join(s.verdict for s in k.symptoms)
        print(f"{k.label:<22} {','.join(k.services) or 'stdlib':<10} {solution:>8.2f}s {starter:>8.2f}s  {verdicts}")
    print(f"\n{'hang verdict (hang_after 1.0 s)':<33} {hang_verdict_seconds(args.runs):>8.2f}s")


if __name__ == "__main__":
    main()
