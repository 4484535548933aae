"""Hidden tests for kata 14, pid1-sigterm.

One container per check (pid1_sigterm_harness.stop_container): `sh entrypoint.sh` of the code
under test runs as PID 1 of a fresh PID namespace, an export is sent, and while it renders
SIGTERM goes to PID 1, as `docker stop` and the kubelet send it. Each test reads one part of what
happened: whether PID 1 had a SIGTERM handler (the kernel drops any other signal sent to a
namespace's init, which is the bug), how it exited, what the client got, what was flushed.
Nothing is judged by how long anything took: the grace period is only a deadline.

Without a PID namespace (no root and no user namespaces, or LOOPKATA_CONTAINER=fallback) the
entrypoint runs as a plain child. Every test still runs and can fail; the PID-1 test then says it
could not run here instead of passing.
"""
import json
import re
import signal
from pathlib import Path

import pytest
from pid1_sigterm_harness import GRACE, ORDER, stop_container

from loopkata.model import catalogue
from loopkata.services import containers


@pytest.fixture(scope="module")
def stop(request, tmp_path_factory):
    impl = request.config.getoption("--impl")
    if impl is None:
        impl = catalogue.for_tests_file(Path(request.node.fspath)).kata_path
    kata_dir = Path(impl).resolve()
    if not (kata_dir / "entrypoint.sh").is_file():
        pytest.fail(f"expected the kata's folder to hold entrypoint.sh, the container's entrypoint; {kata_dir} has none")
    return stop_container(kata_dir, tmp_path_factory.mktemp("container"))


def started(stop) -> None:
    assert not stop.problem, f"expected the container to start and render the export; {stop.problem}.\n{stop.tail()}"


def status_words(stop) -> str:
    """The exit code as the platform reports it, and whether a signal or the program chose it."""
    if stop.signal:
        name = signal.Signals(stop.signal).name if stop.signal in signal.Signals._value2member_map_ else "?"
        return f"exit {stop.status}: killed by {name}"
    return f"exit {stop.status}" + (": an exit status the program chose, not a signal" if stop.status > 128 else "")


def test_sigterm_reaches_the_service(stop):
    """SIGTERM sent to the container's PID 1 reaches the service"""
    started(stop)
    if not stop.caught:
        if stop.pid1_is_a_shell:
            raise AssertionError(
                f"expected SIGTERM to reach the service, but the container's PID 1 is the shell running the "
                f"entrypoint ({stop.pid1_command}), with the service as its child. The shell has no SIGTERM "
                "handler, and the kernel drops a signal that PID 1 does not handle: the service never got it, and "
                f"the platform killed the container at the end of its grace period ({status_words(stop)})."
            )
        if not stop.real:
            raise AssertionError(
                f"expected SIGTERM to reach the service's own handler, but the process the platform signals "
                f"({stop.pid1_command}) has none. Run here as a plain process, SIGTERM's default action ended it at "
                f"once ({status_words(stop)}) with no cleanup; as a container's PID 1 the kernel would drop "
                "the signal instead, and the platform would kill it at the end of its grace period (exit 137)."
            )
        raise AssertionError(
            f"expected SIGTERM to reach the service, but PID 1 ({stop.pid1_command}) has no SIGTERM handler, and "
            "the kernel drops a signal that PID 1 does not handle (anywhere else its default action would end the "
            f"process): nothing happened until the platform killed the container ({status_words(stop)})."
        )
    if not stop.real:
        raise containers.not_here(containers.PID_NAMESPACE, "this test, which runs the entrypoint as PID 1,")


def test_container_exits_0_by_itself_within_the_grace_period(stop):
    """The container stops by itself after SIGTERM, with exit status 0, within the grace period"""
    started(stop)
    if stop.killed:
        raise AssertionError(
            f"expected the container to exit by itself within the {GRACE:g} s grace period after SIGTERM; it was "
            f"still running, so the platform killed it with SIGKILL ({status_words(stop)}).\n{stop.tail()}"
        )
    assert stop.status == 0, (
        f"expected the container to exit with status 0 after SIGTERM (a clean stop), it exited with "
        f"{status_words(stop)}.\n{stop.tail()}"
    )
    assert not stop.left_running, (
        "expected every process of the container to have ended with PID 1; still running when PID 1 exited, "
        "and killed with SIGKILL in a real container: " + "; ".join(stop.left_running)
    )


def test_export_in_flight_is_answered(stop):
    """The export in flight when SIGTERM came gets its whole answer"""
    started(stop)
    assert stop.answered, (
        f"expected the export of order {ORDER}, in flight when SIGTERM came, to be answered with its three rows "
        f"before the service stopped; the client got: {stop.answer}.\n{stop.tail()}"
    )


def test_cleanup_flushes_the_rows_and_ends_the_spooler(stop):
    """Before the container ends, the pending rows are flushed and the spooler uploads its batch and ends"""
    started(stop)
    rows = [json.loads(line) for line in stop.files.get("exported.jsonl", "").splitlines() if line.strip()]
    assert sum(row.get("order") == ORDER for row in rows) == 3, (
        f"expected the three rows of export {ORDER} to be flushed to exported.jsonl when the service stopped; "
        f"the file holds {len(rows)} rows{'' if 'exported.jsonl' in stop.files else ' (it was never written)'}: "
        "the service's cleanup did not run, did not flush, or was cut off (when PID 1 exits, the kernel kills "
        "every other process of the container).\n" + stop.tail()
    )
    spool = stop.files.get("spool.log", "")
    shutdown = stop.files.get("shutdown.log", "").strip()
    assert "spooler: flushed" in spool and ORDER in spool and shutdown.endswith("spooler ended with 0"), (
        f"expected the spooler child to upload its batch (with export {ORDER}) and end before the container did, "
        "and the service's shutdown.log to say so ('spooler ended with 0'); "
        + ("spool.log was never written" if not spool else f"spool.log holds {spool!r}")
        + (f", and shutdown.log says {shutdown.splitlines()[-1]!r}" if shutdown else ", and shutdown.log was never written")
        + ". When PID 1 exits, the kernel kills every other process of the container with SIGKILL, so a child "
        "must be told to finish and waited for first (a returncode of None: nobody waited).\n" + stop.tail()
    )
    counted = re.search(r"clean shutdown: (-?\d+) rows flushed", shutdown)
    assert counted is None or int(counted[1]) == len(rows), (
        f"expected shutdown.log to count the rows the service flushed, the {len(rows)} in exported.jsonl; it says "
        f"{counted[0]!r}: an operator reading it after a stop is told of rows that are not there, or not told of "
        "rows that are.\n" + stop.tail()
    )
