"""What the guard finds: the kinds of finding, one finding, and the thread-safe list they are collected in.

Each kind is named by a code (LGnn) and a name, as ruff names its rules, and
says which katas teach it; the README's table for teams is made from KINDS.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field

from loopkata.model import catalogue


@dataclass(frozen=True)
class Kind:
    code: str
    name: str
    katas: tuple[int, ...]  # kata numbers in the catalogue
    finds: str  # one line: what the guard reports


KINDS = {k.code: k for k in (
    Kind("LG01", "cross-loop-use", (1, 6),
         "an asyncio Lock, Semaphore, Event, Condition, Queue or Barrier, a socket transport or an aiohttp session "
         "used on a second event loop, even when nothing had to wait yet"),
    Kind("LG02", "loop-kept-alive", (2, 3),
         "event loops a test created still alive after it, beyond the one a cache may keep, with the references "
         "that hold each"),
    Kind("LG03", "pending-task-lost", (4,),
         "a pending task destroyed by the garbage collector or cancelled by asyncio.run's shutdown"),
    Kind("LG04", "loop-blocked", (5, 8),
         "an event loop that ran one callback longer than the threshold, with its stack sampled while it was blocked"),
    Kind("LG05", "lock-waits-on-itself", (5,),
         "a thread asking for a threading.Lock that it holds itself: a wait that can never end"),
    Kind("LG06", "exception-swallowed", (10,),
         "a task's exception never retrieved, or an exception returned by gather(return_exceptions=True) "
         "logged without its traceback"),
    Kind("LG07", "unclosed-resource", (2,),
         "an event loop, aiohttp ClientSession or connector collected without being closed"),
    Kind("LG08", "generator-step-cancelled", (9,),
         "an async generator stepped again after a timeout cancelled one of its steps, which closed it"),
    Kind("LG09", "queue-without-consumer", (7,),
         "a Celery task sent to a queue that none of the workers seen during the test consumes"),
    Kind("LG10", "loop-nested", (12,),
         "asyncio.run, or an event loop's run_until_complete or run_forever, replaced (nest_asyncio's apply) "
         "so that a loop runs again inside itself while its thread is running it"),
    Kind("LG11", "pool-above-cpus", (15,),
         "a process pool (ProcessPoolExecutor, multiprocessing.Pool) with more workers than the CPUs the cgroup's "
         "quota and the affinity allow, or a thread pool sized by default from more CPUs than those"),
    Kind("LG12", "queue-grows-unbounded", (16,),
         "an asyncio.Queue made without a maxsize that held more than 100,000 items at once during one test"),
)}
NAMES = {k.name: k.code for k in KINDS.values()}

# The katas no kind teaches, and why a test run cannot see their bug (the README's table says so).
UNSEEN = {
    11: "the bug needs the container frozen between two invocations for longer than the service's keep-alive "
        "timeout: a test run is never frozen, so the pooled connection is still open at the next write",
    13: "the bug is in how a process supervisor and its health probes judge worker processes (a frozen worker's "
        "ping answered by a thread, the probe answered by the other worker): no supervisor, no probe and no "
        "second worker are in a test run; LG04 sees the frozen loop itself",
    14: "the bug is in how the container starts the service (a shell as PID 1 that drops SIGTERM) and how "
        "`docker stop` ends it: a test run is never PID 1 of a container and receives no SIGTERM",
}


@functools.cache
def _katas() -> dict:
    try:
        return {k.number: k for k in catalogue.load()}
    except Exception:  # noqa: BLE001 - guarding another project: no catalogue at hand, numbers only
        return {}


def kata_label(kind: Kind) -> str:
    """'kata 01 bound-semaphore (notebooks/01_bound_semaphore.ipynb)', for each kata that teaches `kind`
    (numbers only outside a Loop Katas folder, as the scan does)."""
    katas = _katas()
    out = []
    for n in kind.katas:
        k = katas.get(n)
        out.append(f"kata {n:02d} {k.id} (notebooks/{k.notebook})" if k else f"kata {n:02d}")
    return ", ".join(out)


@dataclass
class Finding:
    code: str
    message: str
    where: list[str] = field(default_factory=list)  # "file:line in function", the line that matters first
    details: list[str] = field(default_factory=list)  # more lines: a chain of references, a sampled stack
    test: str = ""  # the test (or program) it happened in

    @property
    def kind(self) -> Kind:
        return KINDS[self.code]

    def as_dict(self) -> dict:
        return {"code": self.code, "name": self.kind.name, "test": self.test, "message": self.message,
                "where": self.where, "details": self.details, "katas": list(self.kind.katas)}

    @classmethod
    def from_dict(cls, d: dict) -> Finding:
        return cls(code=d["code"], message=d["message"], where=list(d.get("where", [])),
                   details=list(d.get("details", [])), test=d.get("test", ""))


class Collector:
    """The findings of one guarded run, and the test they are charged to now."""

    def __init__(self, selected: set[str]):
        self.selected = selected
        self.current = ""  # the running test's node id ("" between tests)
        self._lock = threading.Lock()
        self._found: list[Finding] = []
        self.everything: list[Finding] = []  # for the JSON report
        self.errors: list[str] = []  # the guard's own failures, never the program's

    def safely(self, describe, *args) -> None:
        """Run `describe(*args)`, which adds a finding; a failure of the guard's own never reaches the program."""
        try:
            describe(*args)
        except Exception as exc:  # noqa: BLE001 - the program under test must run as if unguarded
            with self._lock:
                if len(self.errors) < 20:
                    self.errors.append(f"{type(exc).__name__}: {exc}")

    def add(self, finding: Finding) -> None:
        if finding.code not in self.selected:
            return
        finding.test = finding.test or self.current
        with self._lock:
            self._found.append(finding)
            self.everything.append(finding)

    def take(self) -> list[Finding]:
        """The findings not yet taken, in the order they were found."""
        with self._lock:
            found, self._found = self._found, []
        return found
