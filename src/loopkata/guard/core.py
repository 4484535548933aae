"""One guarded run: the watchers each selected kind needs, put in and taken out, and the findings per test.

A guarded process may start guarded children (the pytest plugin and the
wrapper hand the guard on through PYTHONPATH, see `child`): they write what
they find, the workers they saw and the tasks they sent into a shared folder,
and `end_of_test` charges it to the test that was running.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .blocked import BlockedLoops
from .bound import BoundObjects
from .celery_queues import CeleryQueues
from .config import Settings
from .findings import Collector, Finding
from .generators import GeneratorSteps
from .growth import QueueGrowth
from .loops import Loops
from .nested import NestedLoops
from .patches import Patches
from .pools import Pools
from .swallowed import Swallowed
from .tasks import Tasks
from .thread_locks import ThreadLocks
from .unclosed import Unclosed


class Guard:
    def __init__(self, settings: Settings, share: Path | None = None, is_child: bool = False):
        self.settings, self.share, self.is_child = settings, share, is_child
        self.collector = Collector(set(settings.selected))
        self.patches = Patches()
        self.loops = Loops(self.collector, self.patches)
        self.blocked = BlockedLoops(self.collector, settings.block_threshold, self.loops.label)
        self.bound = BoundObjects(self.collector, self.patches, self.loops.label)
        self.tasks = Tasks(self.collector, self.patches)
        self.swallowed = Swallowed(self.collector, self.patches)
        self.unclosed = Unclosed(self.collector, self.patches)
        self.generators = GeneratorSteps(self.collector, self.patches)
        self.thread_locks = ThreadLocks(self.collector, self.patches)
        self.nested = NestedLoops(self.collector)
        self.pools = Pools(self.collector, self.patches)
        self.growth = QueueGrowth(self.collector, self.patches)
        self.celery = CeleryQueues(self.collector, share if is_child else None)
        self.installed = False

    def wants(self, code: str) -> bool:
        return code in self.settings.selected

    def install(self) -> None:
        self.loops.install()  # every finding names loops by number
        if self.wants("LG04"):
            self.loops.on_new.append(self.blocked.watch)
            self.blocked.start()
        if self.wants("LG01"):
            self.bound.install()
            self.bound.sessions_made_at = self.unclosed.made_at
        if self.wants("LG01") or self.wants("LG07"):
            self.unclosed.install()
        if self.wants("LG03") or self.wants("LG06"):
            self.tasks.install()
        if self.wants("LG06"):
            self.swallowed.install()
        if self.wants("LG05"):
            self.thread_locks.install()
        if self.wants("LG08"):
            self.generators.install()
        if self.wants("LG09"):
            self.celery.install()
        if self.wants("LG11"):
            self.pools.install()
        if self.wants("LG12"):
            self.growth.install()
        if self.wants("LG10"):  # last: what the guard replaced is no nesting
            self.nested.install()
            self.loops.on_new.append(self.nested.on_new_loop)
        self.installed = True

    def uninstall(self) -> None:
        if not self.installed:
            return
        self.blocked.stop()
        self.celery.remove()
        self.patches.remove()
        self.installed = False

    def begin(self, test: str) -> None:
        self.collector.current = test

    def end_of_test(self, test: str) -> None:
        """The findings that can be judged only once a test is over: loops it kept, its children's, Celery's."""
        children = self._from_children()
        for f in children["findings"]:
            f.test = test
            self.collector.add(f)
        if self.wants("LG02"):
            for f in self.loops.kept_alive(test, self.settings.loops_kept):
                self.collector.add(f)
        if self.wants("LG10"):
            self.nested.end_of_test()
        if self.wants("LG09"):
            for f in self.celery.judge(test, children["workers"], children["sent"]):
                self.collector.add(f)
        self.swallowed.forget()
        self.collector.current = ""

    def take(self) -> list[Finding]:
        return [f for f in self.collector.take() if not self.settings.excluded(f.where)]

    def _from_children(self) -> dict:
        out = {"findings": [], "workers": [], "sent": []}
        if self.share is None or self.is_child:
            return out
        for path in sorted(self.share.glob("*-*.json*")):
            if path.suffix == ".taken":
                continue
            taken = path.with_name(path.name + ".taken")
            try:
                os.replace(path, taken)  # a child still writing starts a new file
                lines = taken.read_text(encoding="utf-8").splitlines()
                taken.unlink()
            except OSError:
                continue
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a child killed mid-line
                if path.name.startswith("findings-"):
                    out["findings"].append(Finding.from_dict(record))
                elif path.name.startswith("worker-"):
                    out["workers"].append(record)
                elif path.name.startswith("sent-"):
                    out["sent"].append(record)
        return out
