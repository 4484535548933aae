"""The liveness drill: send one slow request and watch /health while it runs.

Run it on a build known to have the bug (control mode): it must say "fail",
or its "pass" on a fixed build means nothing. Run it on a fixed build (clean
mode): it must say "pass".
"""
from __future__ import annotations

import http.client
import threading
import time
from dataclasses import dataclass, field

FAILURE_THRESHOLD = 3  # consecutive probes that must fail, as the kubelet counts them


@dataclass
class Verdict:
    outcome: str  # "pass", "fail" or "void"
    slow_worker: int | None = None  # the pid of the worker that served the slow request
    worst: dict[int, float] = field(default_factory=dict)  # pid -> longest wait for /health, in seconds
    reason: str = ""


def probe(port: int, timeout: float) -> float | None:
    """One GET /health on a new connection, as the kubelet sends it; seconds it took, None if no answer."""
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/health")
        conn.getresponse().read()
    except OSError:
        return None
    finally:
        conn.close()
    return time.monotonic() - started


def check_workers(port: int, workers: list[int], slow_path: str, *, limit: float,
                  max_connections: int = 64, poll_every: float = 0.05) -> Verdict:
    """Send GET `slow_path` to the server on 127.0.0.1:`port` and probe /health until it has answered.

    `workers`: the pids of the server's worker processes. "fail" if /health waited longer
    than `limit` seconds FAILURE_THRESHOLD times in a row, else "pass".
    """
    done = threading.Event()

    def slow() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request("GET", slow_path)
            conn.getresponse().read()
        finally:
            conn.close()
            done.set()

    threading.Thread(target=slow, daemon=True).start()
    failures, worst = 0, 0.0
    while not done.is_set():
        took = probe(port, limit)
        if took is None or took > limit:
            failures += 1
            if failures >= FAILURE_THRESHOLD:
                return Verdict("fail", reason=f"{failures} probes in a row got no answer within {limit} s")
        else:
            failures, worst = 0, max(worst, took)
        time.sleep(poll_every)
    return Verdict("pass", reason=f"/health answered every probe; the slowest took {worst:.3f} s")
