"""benchmarks/suite_cost.py: the suite's cost by group and by kata, read from JUnit files."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "suite_cost.py"

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4" time="10.0">
<testcase classname="tests.test_katas_proven" name="test_kata_is_proven[bound-semaphore-solution-passes]" time="6.0"/>
<testcase classname="notebooks.01_bound_semaphore.ipynb" name="Cell 3" time="8.0"/>
<testcase classname="tests.test_katas_proven" name="test_kata_is_proven[loop-id-reuse-solution-passes]" time="4.0"/>
<testcase classname="tests.test_catalogue" name="test_something" time="2.0"/>
</testsuite></testsuites>
"""


def cost(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_the_cost_of_a_kata_adds_its_proofs_and_its_notebook_and_shares_the_wall_time(tmp_path):
    """a kata's work is the sum of its tests; its share of the wall is that fraction of the run's wall time"""
    junit = tmp_path / "run.xml"
    junit.write_text(JUNIT)
    out = cost(junit)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines() if line.strip()}
    # 20 s of work in 10 s of wall: bound-semaphore did 14 of the 20, so 7 s of the wall,
    # 3 of them in its proofs and 4 in its notebook under nbval
    assert rows["bound-semaphore"] == ["2", "14", "7", "3", "4", "0", "0", "0"], out.stdout
    assert rows["loop-id-reuse"] == ["1", "4", "2", "2", "0", "0", "0", "0"], out.stdout
    assert "20 s of work" in out.stdout and "10 s wall" in out.stdout, out.stdout


def test_a_file_that_is_not_junit_is_one_line_not_a_traceback(tmp_path):
    """a broken or missing file: one line naming it, and a non-zero exit"""
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuites><testcase")
    for path in (broken, tmp_path / "missing.xml"):
        out = cost(path)
        assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.strip().count("\n") == 0 and path.name in out.stderr, out.stderr
