"""LG09: a Celery task sent to a queue that none of the workers seen during the test consumes.

A routed task whose queue has no consumer is accepted, gets an id and stays
PENDING for good; nothing logs anything. The guard records each task sent in
this process (its queue, and the line that sent it) and each worker that
became ready, here or in a guarded child process (a worker started from a
deploy file's command line, say), with the queues it consumes. At the end of a
test that saw at least one worker, every queue sent to and consumed by none is
a finding. A test that saw no worker is not judged: its tasks may be meant for
workers elsewhere.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from . import sites
from .findings import Collector, Finding


class CeleryQueues:
    def __init__(self, collector: Collector, share: Path | None):
        self.collector, self.share = collector, share
        self.sent: list[tuple[str, str, list[str]]] = []  # (queue, task name, sent at)
        self.workers: dict[int, dict] = {}  # id(consumer) -> {"queues": [...], "command": "..."}, while it runs
        self.children: dict[int, dict] = {}  # pid -> the same, for workers in guarded child processes
        self.recent: list[dict] = []  # every worker that became ready since the last judgement, stopped or not
        self._handlers = []

    def install(self) -> None:
        try:  # optional: without Celery there is nothing to watch (start_worker() has signals of its own)
            from celery import signals
            from celery.contrib.testing import worker as test_worker
        except ImportError:
            return

        self._handlers = [(signals.before_task_publish, self._published), (signals.worker_ready, self._worker_ready),
                          (signals.worker_shutdown, self._worker_gone),
                          (test_worker.test_worker_started, self._test_worker_ready),
                          (test_worker.test_worker_stopped, self._test_worker_gone)]
        for signal, handler in self._handlers:
            signal.connect(handler, weak=False)

    def remove(self) -> None:
        for signal, handler in self._handlers:
            signal.disconnect(handler)

    def _published(self, sender=None, body=None, exchange=None, routing_key=None, headers=None,
                   declare=None, **kwargs) -> None:
        names = [getattr(q, "name", None) for q in (declare or ())]
        queue = next((n for n in names if n), None) or routing_key or "celery"
        task = (headers or {}).get("task") or str(sender)
        where = sites.made_at(2)
        self.sent.append((queue, task, where))
        if self.share is not None:  # a guarded child: the parent judges
            with open(self.share / f"sent-{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
                out.write(json.dumps({"queue": queue, "task": task, "where": where}) + "\n")

    def _test_worker_ready(self, sender=None, worker=None, consumer=None, **kwargs) -> None:
        self._worker_ready(sender=consumer, command="start_worker() in this process")

    def _test_worker_gone(self, sender=None, worker=None, **kwargs) -> None:
        self.workers.clear()  # start_worker() runs one worker at a time

    def _worker_gone(self, sender=None, **kwargs) -> None:
        self.workers.clear()

    def _worker_ready(self, sender=None, command=None, **kwargs) -> None:
        try:
            queues = sorted(q.name for q in sender.task_consumer.queues)
        except Exception:  # noqa: BLE001 - another Celery's consumer: read the app's list instead
            try:
                queues = sorted(sender.app.amqp.queues.consume_from)
            except Exception:  # noqa: BLE001 - nothing to judge by
                return
        program = [os.path.basename(sys.argv[0]), *sys.argv[1:]] if sys.argv else []  # no machine's paths
        seen = {"queues": queues, "command": command or shlex.join(program), "pid": os.getpid()}
        self.workers[id(sender)] = seen
        self.recent.append(seen)
        if self.share is not None:  # a guarded child: tell the parent at once, not at exit (a worker is often killed)
            path = self.share / f"worker-{os.getpid()}.json"
            path.write_text(json.dumps(seen))

    def judge(self, test: str, child_workers: list[dict], child_sent: list[dict]) -> list[Finding]:
        """LG09 for what this process and its guarded children sent, and the workers seen, since the last call."""
        sent = self.sent + [(s["queue"], s["task"], s["where"]) for s in child_sent]
        self.sent = []
        for w in child_workers:
            self.children[w["pid"]] = w
        for pid in list(self.children):
            if not _alive(pid):
                del self.children[pid]
        workers = list({id(w): w for w in [*self.recent, *self.workers.values(), *child_workers,
                                           *self.children.values()]}.values())
        self.recent = []
        if not sent or not workers:
            return []
        consumed = {q for w in workers for q in w["queues"]}
        findings = []
        for queue in sorted({q for q, _, _ in sent} - consumed):
            tasks = [(t, where) for q, t, where in sent if q == queue]
            names = sorted({t for t, _ in tasks})
            shown = "; ".join(f"`{w['command']}` consumes {', '.join(map(repr, w['queues']))}" for w in workers[:3])
            findings.append(Finding(
                "LG09",
                f"{len(tasks)} task{'s' if len(tasks) > 1 else ''} ({', '.join(names[:3])}) sent to queue {queue!r}, "
                f"which none of the {len(workers)} worker{'s' if len(workers) > 1 else ''} seen during the test "
                f"consumes: {shown}. They stay PENDING for good",
                where=tasks[0][1], details=[f"worker: {w['command']} (queues {w['queues']})" for w in workers],
                test=test))
        return findings


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
