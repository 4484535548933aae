"""Hidden tests for kata 05, lock-reentry.

Every test gets a fresh copy of the package (`kata`) and its own temporary
folder: a thread deadlocked on a threading.Lock cannot be freed, it stays
behind as a daemon thread and keeps its flock, so nothing is shared between
tests. Everything that can deadlock runs under a hang guard (threads are
joined with a deadline, worker processes and HTTP requests have timeouts),
and a hang is reported with the stuck lines of the learner's code. The HTTP
tests wrap the store's threading locks: a thread that asks for a Lock it
already holds is reported at once, and so is a blocking call made on the
server's event loop thread (seen through those wrappers, a spy on
parse_rules, and Python's audit hooks for file locks, opens and os.replace).
"""
import asyncio
import concurrent.futures
import fcntl
import importlib
import json
import linecache
import logging
import os
import re
import select
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from loopkata.testing import (
    Hang,
    SteppingClock,
    describe_frames,
    hang_after,
    run_bounded,
    where_stuck,
)

UPDATES = 10  # per writer
RULES = b"# cost_center,account,share\nops,6100,0.5\nops,6200,0.5\nsales,7100,1.0\n"


def part(kata, name):
    """A module of the package under test (store, app), from this test's own copy."""
    return importlib.import_module(f"{kata.__name__}.{name}")


def bump(doc):
    """A change that takes a few milliseconds, as parsing and merging a rule set does."""
    seen = doc.get("count", 0)
    time.sleep(0.003)
    doc["count"] = seen + 1


def stuck_lines(threads) -> str:
    """Where each of `threads` is stuck, in the learner's files."""
    out = []
    for thread in threads:
        text, _ = where_stuck(thread)
        if text:
            out.append(text)
    return "\n".join(out)


def threads_now() -> set:
    """The threads alive now, to tell later which ones a test started."""
    return set(threading.enumerate())


def new_threads_stuck(before: set) -> str:
    """The learner's lines in every thread started since `before` (a threads_now()), as "a thread is stuck at" blocks.

    Threads are told apart as objects: the ident of a thread that has ended is soon given to a new one.
    """
    out = []
    frames_now = sys._current_frames()
    for thread in threading.enumerate():
        if thread in before or thread.ident in before or thread.ident not in frames_now:
            continue
        frames = []
        f = frames_now[thread.ident]
        while f is not None:
            frames.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
            f = f.f_back
        lines = describe_frames(list(reversed(frames)), fallback=False)
        if lines:
            out.append("a thread is stuck at")
            out += [f"    {line}" for line in lines]
    return "\n".join(out)


# --- the store -------------------------------------------------------------

def _same_file(fd: int, key: tuple) -> bool:
    try:
        st = os.fstat(fd)
    except OSError:
        return False  # closed since: its lock went with it
    return (st.st_dev, st.st_ino) == key


def watched_store(kata, tmp_path):
    """The kata's store with its threading locks and file locks watched: a thread that asks
    for a lock it already holds is reported at once, not after hang_after."""
    store, watch = part(kata, "store"), Watch(tmp_path)
    watch_locks(watch, store)
    return store, watch


def bounded_store_call(watch, fn, *args, what):
    with audited_by(watch):
        return run_bounded(fn, *args, what=what, stuck=lambda: "\n".join(watch.deadlocks))


def test_read_modify_write_completes(kata, tmp_path):
    """a guarded read-modify-write finishes and writes the JSON file"""
    (store, watch), path = watched_store(kata, tmp_path), tmp_path / "rules.json"
    doc = bounded_store_call(watch, store.update, path, bump,
                             what="store.update(), called directly for one read-modify-write,")
    assert path.exists(), (
        f"expected one direct call of store.update() to write {path.name}, but there is no such file"
    )
    on_disk = json.loads(path.read_text())
    assert on_disk.get("count") == 1, (
        f"expected the file to hold count 1 after one direct call of store.update(), got {on_disk}"
    )
    assert doc == on_disk, (
        f"expected store.update(), called directly, to return the document it wrote ({on_disk}), got {doc}"
    )


def test_load_and_save_work_on_their_own(kata, tmp_path):
    """store.save() and store.load() still work outside a read-modify-write"""
    store, path = part(kata, "store"), tmp_path / "rules.json"
    got = run_bounded(store.load, path, what="store.load(), called directly on a file that does not exist yet,")
    assert got == {}, (
        f"expected store.load(), called directly on a file that does not exist yet, to return {{}}, got {got!r}"
    )
    run_bounded(store.save, path, {"uploads": 3}, what="store.save(), called directly,")
    got = run_bounded(store.load, path, what="store.load(), called directly after store.save(),")
    assert got == {"uploads": 3}, (
        f"expected store.load(), called directly after store.save(), to return what save() wrote, "
        f"{{'uploads': 3}}, got {got}"
    )


def test_two_threads_lose_no_update(kata, tmp_path):
    """two threads updating at once lose no update"""
    (store, watch), path = watched_store(kata, tmp_path), tmp_path / "rules.json"
    bounded_store_call(watch, store.update, path, bump,
                       what="store.update(), called directly once before two threads call it at the same time,")
    barrier = threading.Barrier(2)
    errors = []

    def writer():
        try:
            barrier.wait(timeout=10)
            for _ in range(UPDATES):
                store.update(path, bump)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=writer, name=f"writer {i}", daemon=True) for i in (1, 2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + hang_after() + 0.1 * UPDATES
    for t in threads:
        t.join(max(deadline - time.monotonic(), 0))
    stuck = [t for t in threads if t.is_alive()]
    if stuck:
        raise Hang(f"two threads each calling store.update() directly, {UPDATES} times,", hang_after(),
                   stuck_lines(stuck))
    if errors:
        raise errors[0]
    expected = 1 + 2 * UPDATES
    count = json.loads(path.read_text()).get("count")
    assert count == expected, (
        f"expected count {expected} after calling store.update() directly once, then from 2 threads at the "
        f"same time, {UPDATES} times each, got {count}: {expected - (count or 0)} updates were lost"
    )


LOCK_LINE = re.compile(r"\bwith\b|\.acquire\(|flock\(|lockf\(")


def blocked_on_a_lock(thread: threading.Thread, polls: int = 10) -> bool:
    """Does `thread` sit still, `polls` times in a row 5 ms apart, on a call that takes a lock (a wrapped
    threading lock, or a line such as `with _lock:`, `.acquire(`, `flock(`)? Counted in polls, not in
    time, so a machine too busy to run the thread cannot pass for a thread that waits."""
    seen = None
    for _ in range(polls):
        frame = sys._current_frames().get(thread.ident)
        if frame is None:
            return False
        at = (frame, frame.f_lasti)
        lock_call = frame.f_code in (WatchedLock.acquire.__code__, WatchedLock.__enter__.__code__) or bool(
            LOCK_LINE.search(linecache.getline(frame.f_code.co_filename, frame.f_lineno)))
        if not lock_call or (seen is not None and at != seen):
            return False
        seen = at
        time.sleep(0.005)
    return True


def test_a_save_during_an_update_is_not_lost(kata, tmp_path):
    """a save() from another thread during an update() is not lost: the file ends as if one ran after the other"""
    (store, watch), path = watched_store(kata, tmp_path), tmp_path / "rules.json"
    bounded_store_call(watch, store.save, path, {"a": 0}, what="store.save(), called directly to start the file,")
    inside, abandoned, saved = threading.Event(), threading.Event(), {}

    def saver():
        if inside.wait(10) and not abandoned.is_set():
            try:
                store.save(path, {"a": 10})
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                saved["error"] = exc

    other = threading.Thread(target=saver, name="saver", daemon=True)

    def change(doc):
        inside.set()  # the other thread calls store.save() now, in the middle of this read-modify-write
        deadline = time.monotonic() + hang_after()
        while other.is_alive() and time.monotonic() < deadline and not blocked_on_a_lock(other):
            time.sleep(0.005)
        doc["a"] = doc.get("a", 0) + 1

    other.start()
    try:
        bounded_store_call(watch, store.update, path, change,
                           what="store.update(), called directly while another thread calls store.save(),")
    except BaseException:
        abandoned.set()  # the update never got there: the other thread leaves without saving
        raise
    finally:
        inside.set()
    other.join(hang_after())
    if other.is_alive():
        raise Hang("store.save(), called directly on a second thread during a store.update(),", hang_after(),
                   stuck_lines([other]))
    if "error" in saved:
        raise saved["error"]
    doc = json.loads(path.read_text())
    serial = {"update, then save": {"a": 10}, "save, then update": {"a": 11}}
    lost = ": the save landed in the middle of the update's read-modify-write, and the update wrote over it" if (
        doc == {"a": 1}) else ""
    assert doc in serial.values(), (
        f"expected the file to end as one of the two orders the calls can take, "
        f"{' or '.join(f'{d} ({order})' for order, d in serial.items())}, got {doc}{lost} (calling "
        f"store.update() directly on one thread, starting from {{'a': 0}}, while a second thread called "
        f"store.save(path, {{'a': 10}}) directly)"
    )


WORKER = textwrap.dedent(
    """
    import importlib, importlib.util, json, os, sys, threading, time
    from pathlib import Path
    from loopkata.testing import Hang, run_bounded, where_stuck

    impl, path, me, updates = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    seconds, threads = float(sys.argv[5]), int(sys.argv[6])
    spec = importlib.util.spec_from_file_location(
        "kata_worker", impl / "__init__.py", submodule_search_locations=[str(impl)])
    package = importlib.util.module_from_spec(spec)
    sys.modules["kata_worker"] = package
    spec.loader.exec_module(package)
    store = importlib.import_module("kata_worker.store")

    def bump(doc):
        seen = doc.get("count", 0)
        time.sleep(0.003)
        doc["count"] = seen + 1

    def work():
        for _ in range(updates):
            store.update(path, bump)

    def work_on_threads():  # `threads` threads of this process, each calling work(), at once
        errors, gate = [], threading.Barrier(threads)

        def one():
            try:
                gate.wait(10)
                work()
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)

        started = [threading.Thread(target=one, name=f"thread {i}", daemon=True) for i in range(1, threads + 1)]
        for t in started:
            t.start()
        deadline = time.monotonic() + seconds
        for t in started:
            t.join(max(deadline - time.monotonic(), 0))
        stuck = [t for t in started if t.is_alive()]
        if stuck:
            raise Hang(f"worker process {me}, {threads} threads each calling store.update() directly {updates} times,",
                       seconds, "\\n".join(where_stuck(t)[0] for t in stuck))
        if errors:
            raise errors[0]

    Path(f"{path}.ready-{me}").touch()
    deadline = time.monotonic() + 20
    while not Path(f"{path}.go").exists() and time.monotonic() < deadline:
        time.sleep(0.002)
    try:
        if threads == 1:
            run_bounded(work, what=f"worker process {me}, calling store.update() directly {updates} times,",
                        seconds=seconds)
        else:
            work_on_threads()
        out = {"ok": True}
    except Hang as exc:
        out = {"hang": str(exc), "stacks": exc.stacks}
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out), flush=True)
    os._exit(0)  # a thread stuck on a lock cannot be joined: leave without it
    """
)


def run_workers(kata, tmp_path, threads: int, updates: int) -> Path:
    """Update the document once, then `updates` times from each of `threads` threads in 2 worker processes,
    all at once; returns the document's path. A hang or an error is raised."""
    (store, watch), path = watched_store(kata, tmp_path), tmp_path / "rules.json"
    bounded_store_call(watch, store.update, path, bump,
                       what="store.update(), called directly once before two worker processes call it,")
    impl = Path(kata.__file__).parent
    seconds = hang_after() + 0.1 * updates * threads
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(impl), str(path), str(i), str(updates), str(seconds), str(threads)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )
        for i in (1, 2)
    ]
    try:
        deadline = time.monotonic() + 20
        while not all(Path(f"{path}.ready-{i}").exists() for i in (1, 2)):
            crashed = [w for w in workers if w.poll() is not None]
            assert not crashed, f"expected both worker processes to start, one exited:\n{crashed[0].stderr.read()}"
            assert time.monotonic() < deadline, "expected both worker processes to start within 20 s"
            time.sleep(0.01)
        Path(f"{path}.go").touch()
        outs = [w.communicate(timeout=seconds + 10) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.communicate()
    results = []
    for i, (out, err) in enumerate(outs, start=1):
        lines = out.strip().splitlines()
        assert lines, f"expected worker process {i} to report its result, it printed nothing:\n{err}"
        results.append(json.loads(lines[-1]))
    for r in results:
        if "hang" in r:
            raise Hang(r["hang"].split(" did not finish")[0], seconds, r["stacks"])  # "worker process N, calling ..."
    calls = f"{updates} direct calls of store.update()" + (f" on each of its {threads} threads" if threads > 1 else "")
    for i, r in enumerate(results, start=1):
        assert "error" not in r, f"expected worker process {i} to finish its {calls}, it failed with {r['error']}"
    return path


def test_two_processes_lose_no_update(kata, tmp_path):
    """two worker processes updating the same file lose no update"""
    path = run_workers(kata, tmp_path, threads=1, updates=UPDATES)
    expected = 1 + 2 * UPDATES
    count = json.loads(path.read_text()).get("count")
    assert count == expected, (
        f"expected count {expected} after calling store.update() directly once, then from 2 worker processes "
        f"at the same time, {UPDATES} times each, got {count}: {expected - (count or 0)} updates were lost"
    )


def test_two_processes_of_two_threads_lose_no_update(kata, tmp_path):
    """two worker processes of two threads each, all updating the same file at once, lose no update"""
    per_thread = UPDATES // 2  # as many updates per process as with one thread each
    path = run_workers(kata, tmp_path, threads=2, updates=per_thread)
    expected = 1 + 4 * per_thread
    count = json.loads(path.read_text()).get("count")
    assert count == expected, (
        f"expected count {expected} after calling store.update() directly once, then from 2 worker processes "
        f"of 2 threads each, all at the same time, {per_thread} times per thread, got {count}: "
        f"{expected - (count or 0)} updates were lost"
    )


def file_locks_held() -> set:
    """The file locks this process holds now, granted ones only (Linux /proc/locks; None if unknown).

    An flock or lockf lock belongs to the process, whichever file it is on, so the test
    does not need to know where the learner keeps the lock file."""
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    pid, held = str(os.getpid()), set()
    for line in table.splitlines():
        fields = line.split()
        if "->" not in fields and len(fields) >= 6 and fields[4] == pid:
            held.add((fields[1], fields[5]))  # (FLOCK or POSIX, device:inode)
    return held


def test_the_file_lock_is_held_while_a_second_thread_writes(kata, tmp_path):
    """while a second thread of one worker writes the document, other processes stay locked out"""
    (store, watch), path = watched_store(kata, tmp_path), tmp_path / "rules.json"
    bounded_store_call(watch, store.update, path, bump,
                       what="store.update(), called directly once before two threads call it,")
    idle = file_locks_held()
    first_inside, second_asked, first_done = threading.Event(), threading.Event(), threading.Event()
    seen, errors = {}, []

    def first_change(doc):  # holds the first thread inside its read-modify-write until the second one waits
        seen["first"] = file_locks_held()
        first_inside.set()
        second_asked.wait(hang_after())
        bump(doc)

    def second_change(doc):
        first_done.wait(hang_after())  # the first thread has left update() and let go of all it had
        seen["second"] = file_locks_held()
        bump(doc)

    def call(change, done=None):
        try:
            store.update(path, change)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)
        finally:
            if done is not None:
                done.set()

    first = threading.Thread(target=call, args=(first_change, first_done), name="first writer", daemon=True)
    second = threading.Thread(target=call, args=(second_change,), name="second writer", daemon=True)
    with audited_by(watch):
        first.start()
        if not first_inside.wait(hang_after()) and first.is_alive():
            raise Hang("store.update(), called directly on one thread,", hang_after(), stuck_lines([first]))
        second.start()
        # The second thread has asked for a lock once it sits still on a line that takes one,
        # counted in polls: a busy machine cannot make it look as if it waited.
        deadline = time.monotonic() + hang_after()
        while second.is_alive() and "second" not in seen and not blocked_on_a_lock(second):
            if time.monotonic() > deadline:
                break
        second_asked.set()
        deadline = time.monotonic() + hang_after()
        for t in (first, second):
            t.join(max(deadline - time.monotonic(), 0))
    stuck = [t for t in (first, second) if t.is_alive()]
    if stuck:
        raise Hang("two threads each calling store.update() directly once,", hang_after(),
                   stuck_lines(stuck) or "\n".join(watch.deadlocks))
    if errors:
        raise errors[0]
    if idle is None or not seen.get("first") or "second" not in seen:
        return  # no file lock this test can see (not Linux, or another kind of lock): the process tests judge
    assert seen["second"] - idle, (
        "expected the file lock to stay held while a second thread of the same worker process writes the "
        "document (the first thread was held inside its store.update() until the second one waited for the "
        "lock), but this process held no file lock then: the first thread let go of it on its way out while "
        "the second was already inside, so another worker process could write at the same time and one of "
        "the two updates would be lost"
    )


# --- the service -------------------------------------------------------------

# The tests speak plain HTTP to 127.0.0.1: a TLS context that loads no CA
# bundle makes each httpx client some 30 ms cheaper to build.
NO_TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class DaemonExecutor(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor (asyncio.to_thread), one daemon thread per call.

    A pool's worker threads are joined when the interpreter exits, so one stuck
    on a lock would keep the grader's process alive until its budget runs out.
    """

    def submit(self, fn, /, *args, **kwargs):
        future = concurrent.futures.Future()

        def run():
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                    future.set_exception(exc)

        threading.Thread(target=run, name="to_thread worker", daemon=True).start()
        return future


@contextmanager
def served(app):
    """Serve `app` with uvicorn on 127.0.0.1 (an ephemeral port) in a daemon thread; tell it to stop after.

    Yields (base URL, the thread that runs the server's event loop). The server
    is not waited for: it takes uvicorn 0.1 to 0.2 s to stop, and one that is
    deadlocked cannot stop at all; it is left to end (or not) as a daemon thread.
    """
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", timeout_graceful_shutdown=0.2
    )
    server = uvicorn.Server(config)

    def run():
        loop = asyncio.new_event_loop()
        loop.set_default_executor(DaemonExecutor())
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.serve())
        finally:
            loop.close()

    thread = threading.Thread(target=run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive(), "expected the app to start serving, but the server thread ended"
        assert time.monotonic() < deadline, "expected the app to start serving within 15 s"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", thread
    finally:
        server.should_exit = True


@contextmanager
def serving(app):
    """Serve `app` with uvicorn on 127.0.0.1 (an ephemeral port) in a daemon thread; yields its base URL."""
    with served(app) as (base, _):
        yield base


PROBE_SECONDS = 0.3  # /health answers in a few milliseconds when the loop is free


def health_now(base: str) -> str:
    """One GET /health with a short timeout, described in words."""
    started = time.perf_counter()
    try:
        r = httpx.get(f"{base}/health", timeout=PROBE_SECONDS, verify=NO_TLS)
        return f"meanwhile GET /health answered {r.status_code} in {(time.perf_counter() - started) * 1000:.1f} ms"
    except httpx.TimeoutException:
        return f"meanwhile GET /health got no answer within {PROBE_SECONDS:g} s either: the event loop itself is stuck"


def frames_of(thread) -> list:
    """The thread's stack right now, outermost first, as (file, line, function)."""
    frame = sys._current_frames().get(thread.ident)
    frames = []
    while frame is not None:
        frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return frames[::-1]


def stack_here(skip: int = 1) -> list:
    """The calling thread's stack, outermost first, as (file, line, function)."""
    frame, frames = sys._getframe(skip + 1), []
    while frame is not None:
        frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return frames[::-1]


def where_in(frames) -> str:
    """The innermost line of the learner's code in `frames`, and the outermost one it was called from."""
    lines = describe_frames(frames, fallback=False) or describe_frames(frames)
    if not lines:
        return "a line outside your code"
    return lines[-1] if len(lines) == 1 else f"{lines[-1]}, called from {lines[0]}"


# --- watching the learner's threading locks ------------------------------------
#
# The HTTP tests wrap the threading locks the store and the app keep at module
# level (in this test's own copy). A wrapped lock locks exactly as before, and
# also says (1) on which thread it is taken, for the test of what runs on the
# event loop, and (2) when a thread asks for a threading.Lock it holds itself:
# that wait can never end, so the test reports the hang at once instead of
# waiting out its timeout.

PLAIN_LOCK = type(threading.Lock())
LOCK_TYPES = (PLAIN_LOCK, type(threading.RLock()))


class BlockingCall:
    def __init__(self, what: str, kind: str, why: str, frames: list, on_loop: bool):
        self.what, self.kind, self.why, self.frames, self.on_loop = what, kind, why, frames, on_loop


class Watch:
    """What one test sees of the request: its blocking calls (where, on which thread) and self-deadlocks."""

    def __init__(self, folder: Path):
        self.folder = str(folder)
        self.loop_ident = None  # set once the server runs
        self.calls: list[BlockingCall] = []
        self.on_loop = threading.Event()
        self.deadlocks: list[str] = []  # one sentence per thread waiting for a lock it holds itself
        self.deadlocked: set[int] = set()  # those threads' idents
        self.flocks: dict[tuple, list] = {}  # (device, inode) -> [(thread ident, fd, where taken)]

    def saw(self, what: str, kind: str, why: str) -> None:
        on_loop = self.loop_ident is not None and threading.get_ident() == self.loop_ident
        self.calls.append(BlockingCall(what, kind, why, stack_here(), on_loop))
        if on_loop:
            self.on_loop.set()

    def audited(self, event: str, args: tuple) -> None:
        kind, why = AUDITED[event]
        if event in ("fcntl.flock", "fcntl.lockf"):
            if event == "fcntl.flock":
                self.flocked(*args[:2])
            self.saw(f"{event}()", kind, why)
            return
        if not isinstance(args[0], (str, bytes, os.PathLike)) or not os.fsdecode(args[0]).startswith(self.folder):
            return  # a file descriptor, or not one of the store's files
        if event == "os.rename":  # (src, dst, src_dir_fd, dst_dir_fd)
            self.saw(f"os.replace() onto {Path(os.fsdecode(args[1])).name}", kind, why)
            return
        name = Path(os.fsdecode(args[0])).name.replace(str(os.getpid()), "<pid>")
        mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)  # (path, mode, flags)
        if isinstance(mode, str):
            writes = any(c in mode for c in "wax+")
        else:
            writes = bool(flags & (os.O_WRONLY | os.O_RDWR)) if isinstance(flags, int) else True
        self.saw(f"{'opening' if name.endswith('.lock') else 'writing' if writes else 'reading'} {name}", kind, why)

    def flocked(self, fd, operation) -> None:
        """flock locks belong to an open file: a thread that asks again for a file it holds
        through another open() waits for itself, forever."""
        try:
            fd = fd if isinstance(fd, int) else fd.fileno()
            st = os.fstat(fd)
        except (OSError, AttributeError, ValueError):
            return
        key, me = (st.st_dev, st.st_ino), threading.get_ident()
        held = self.flocks.setdefault(key, [])
        if operation & fcntl.LOCK_UN:
            held[:] = [h for h in held if h[1] != fd]
            return
        for ident, other_fd, taken_at in held:
            if ident == me and other_fd != fd and _same_file(other_fd, key) and not operation & fcntl.LOCK_NB:
                self.deadlocked.add(me)
                self.deadlocks.append(
                    f"a thread asks for the file lock (at {where_in(stack_here(3)).split(', called from')[0]}) "
                    "through a second open() of the lock file while it holds it "
                    f"through another (it took it at {taken_at}). flock locks belong to an open file, not to a thread: "
                    "the thread waits for itself, forever."
                )
                return
        held.append((me, fd, where_in(stack_here(3)).split(", called from")[0]))

    def first_on_loop(self) -> str:
        """The assertion message for the first call that ran on the event loop thread, naming the others."""
        on_loop = [c for c in self.calls if c.on_loop]
        first = on_loop[0]
        others = list(dict.fromkeys(c.what for c in on_loop[1:] if c.what != first.what))
        also = f" Also on the event loop thread: {', '.join(others)}." if others else ""
        return (
            f"expected {first.what} to run off the event loop (on a worker thread: FastAPI's threadpool or "
            f"asyncio.to_thread) during one POST /rules sent to the served app, but it ran on the event loop "
            f"thread, at {where_in(first.frames)}. "
            f"{first.why[0].upper()}{first.why[1:]}.{also}"
        )


class WatchedLock:
    """One of the learner's threading locks, reporting to a Watch; it locks exactly as before."""

    def __init__(self, lock, name: str, watch: Watch):
        self._lock, self._name, self._watch = lock, name, watch
        self._owner, self._taken_at = None, []  # a plain Lock's holder (it keeps none itself)

    def acquire(self, blocking=True, timeout=-1):
        self._asking(blocking, timeout)
        got = self._lock.acquire(blocking, timeout)
        if got:
            self._took()
        return got

    def __enter__(self):
        self._asking(True, -1)
        got = self._lock.__enter__()
        self._took()
        return got

    def __exit__(self, *exc):
        self._owner = None
        return self._lock.__exit__(*exc)

    def release(self):
        self._owner = None
        self._lock.release()

    def __getattr__(self, name):
        return getattr(self._lock, name)

    def _asking(self, blocking, timeout):
        self._watch.saw(f"{self._name}.acquire() (a threading lock)", "threading lock",
                        "while another thread holds that lock, /health cannot answer")
        if (isinstance(self._lock, PLAIN_LOCK) and blocking and timeout is not None and timeout < 0
                and self._owner == threading.get_ident()):
            waits_at = where_in(stack_here(2)).split(", called from")[0]
            took_at = where_in(self._taken_at).split(", called from")[0]
            self._watch.deadlocked.add(threading.get_ident())
            self._watch.deadlocks.append(
                f"a thread waits for {self._name} (at {waits_at}), a threading.Lock it already holds (it took it "
                f"at {took_at}). A Lock is not reentrant: the thread waits for itself, forever."
            )

    def _took(self):
        if isinstance(self._lock, PLAIN_LOCK):
            self._owner, self._taken_at = threading.get_ident(), stack_here(2)


def watch_locks(watch: Watch, *modules) -> None:
    """Wrap every threading lock the modules keep at their top level (this test's own copies)."""
    for module in modules:
        short = module.__name__.rsplit(".", 1)[-1]
        for name, value in list(vars(module).items()):
            if isinstance(value, LOCK_TYPES):
                setattr(module, name, WatchedLock(value, f"{short}.{name}", watch))


def start_upload(base: str, timeout: float) -> tuple[threading.Thread, dict]:
    """POST /rules from a client thread; the dict gets "response", "timed out" or "error"."""
    answer = {}

    def upload():
        try:
            answer["response"] = httpx.post(
                f"{base}/rules", files={"file": ("q3.csv", RULES, "text/csv")}, timeout=timeout, verify=NO_TLS
            )
        except httpx.TimeoutException:
            answer["timed out"] = True
        except httpx.HTTPError as exc:
            answer["error"] = exc

    client = threading.Thread(target=upload, name="client", daemon=True)
    client.start()
    return client, answer


def wait_for(client: threading.Thread, watch: Watch, seconds: float, until=None) -> None:
    """Wait for the client thread, at most `seconds`; stop early at a certain deadlock or when `until()` is true."""
    deadline = time.monotonic() + seconds
    while client.is_alive() and time.monotonic() < deadline and not watch.deadlocks and not (until and until()):
        client.join(0.01)
    if watch.deadlocks and client.is_alive():
        client.join(0.02)  # the same state a moment later: not a request caught mid-step


UPLOAD = "POST /rules, sent to the served app (uvicorn on 127.0.0.1),"


def upload_hang(what: str, base: str, watch: Watch, before: set, loop_thread: threading.Thread) -> Hang:
    """The Hang of an upload that did not finish, with /health meanwhile and the stuck lines."""
    if loop_thread.ident in watch.deadlocked:  # no need to wait for a probe to time out
        health = "meanwhile GET /health cannot answer either: the event loop thread itself is the stuck thread"
    else:
        health = health_now(base)
    stacks = [health, new_threads_stuck(before)] + watch.deadlocks[:1]
    return Hang(what, hang_after(), "\n".join(s for s in stacks if s))


def test_upload_is_saved(kata, tmp_path):
    """an upload through the served app is saved to the JSON file"""
    path = tmp_path / "rules.json"
    app_module = part(kata, "app")
    app = app_module.create_app(path)
    watch = Watch(tmp_path)
    watch_locks(watch, part(kata, "store"), app_module)
    before = threads_now()
    with audited_by(watch), served(app) as (base, loop_thread):
        client, answer = start_upload(base, hang_after())
        wait_for(client, watch, hang_after() + 0.5)
        if client.is_alive() or "timed out" in answer:
            raise upload_hang(UPLOAD, base, watch, before, loop_thread)
        if "error" in answer:
            raise answer["error"]
        r = answer["response"]
        assert r.status_code == 200, f"expected {UPLOAD} to answer 200, got {r.status_code}: {r.text}"
        assert r.json().get("rules") == 3, f"expected {UPLOAD} to count 3 rules in its answer, got {r.json()}"
        assert path.exists(), f"expected {UPLOAD} to write {path.name}, but there is no such file"
        doc = json.loads(path.read_text())
        assert doc.get("uploads") == 1 and "q3.csv" in doc.get("rule_sets", {}), (
            f"expected the document to record 1 upload of q3.csv after one POST /rules to the served app, got {doc}"
        )
        h = httpx.get(f"{base}/health", timeout=hang_after(), verify=NO_TLS)
        assert h.status_code == 200, f"expected GET /health, sent to the served app, to answer 200, got {h.status_code}"



class _AccessLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


# A second rules file: the same cost center on three lines, with shares that need six decimals.
MORE_RULES = b"eng,6300,0.3333333\neng,6400,0.3333333\n\nfinance,7200,0.25\neng,6500,0.0000004\n"
MORE_SUMMARY = {"rules": 4, "cost_centers": 2, "shares": {"eng": 0.666666, "finance": 0.25}}  # kept to 6 decimals at each addition
REFUSED = [  # (what, file, words its 400 must say)
    ("a line of 4 fields", b"ops,6100,0.5\nops,6200,0.5,extra\n", "line 2"),
    ("a line of 2 fields", b"# header\nops,6100\n", "line 2"),
    ("a share that is no number", b"ops,6100,half\n", "line 1"),
    ("a file that is not UTF-8", "ops,6100,0.5,caf\u00e9\n".encode("latin-1"), ""),
]


def test_the_service_keeps_its_contract(kata, tmp_path):
    """a second upload counts 2 and keeps both summaries, a malformed file gets 400 naming its line, and the access log times each request"""
    path = tmp_path / "rules.json"
    app_module = part(kata, "app")
    app = app_module.create_app(path)
    access, access_logger = _AccessLog(), logging.getLogger("rules.access")
    access_logger.addHandler(access)
    level, access_logger.level = access_logger.level, logging.INFO
    real_time, app_module.time = app_module.time, SteppingClock(clocks=("perf_counter",), start=100.0)
    try:
        with serving(app) as base:
            def post(name, data):
                return httpx.post(f"{base}/rules", files={"file": (name, data, "text/csv")}, timeout=hang_after(),
                                  verify=NO_TLS)

            first, second = post("q3.csv", RULES), post("q4.csv", MORE_RULES)
            refused = [(what, words, post(f"bad-{i}.csv", data)) for i, (what, data, words) in enumerate(REFUSED)]
    finally:
        app_module.time = real_time
        access_logger.removeHandler(access)
        access_logger.level = level
    assert first.status_code == second.status_code == 200, (
        f"expected two uploads of well-formed rules files to answer 200, got {first.status_code} and "
        f"{second.status_code}: {second.text}")
    assert second.json().get("uploads") == 2, (
        f"expected the second upload's answer to count 2 uploads, got {second.json()}: an update of the document "
        f"was lost, or the count is not kept")
    doc = json.loads(path.read_text())
    assert doc.get("uploads") == 2 and set(doc.get("rule_sets", {})) == {"q3.csv", "q4.csv"}, (
        f"expected the document to record 2 uploads, of q3.csv and q4.csv, got {doc}")
    assert doc["rule_sets"]["q4.csv"] == MORE_SUMMARY, (
        f"expected the summary of q4.csv to count its 4 rules and 2 cost centers and add up each center's shares "
        f"(kept to 6 decimals at each addition), {MORE_SUMMARY}, got {doc['rule_sets']['q4.csv']}")
    for what, words, answer in refused:
        assert answer.status_code == 400 and words in answer.text, (
            f"expected an upload of {what} to be refused with 400" + (f" saying {words!r}" if words else "")
            + f", got {answer.status_code}: {answer.text[:300]}")
    assert json.loads(path.read_text()) == doc, "expected the refused uploads to leave the document as it was"
    expected = f"POST /rules 200 {SteppingClock.STEP * 1000:.0f} ms"
    assert access.lines.count(expected) == 2 and "POST /rules 400 1500 ms" in access.lines, (
        f"expected the access log to show each request with its status and the time it took, "
        f"{expected!r} for each upload (a clock that moves {SteppingClock.STEP:g} s between the middleware's two "
        f"readings), got {access.lines}")

# --- nothing that blocks runs on the event loop --------------------------------
#
# Parsing is spied on through app.parse_rules and the threading locks are
# wrapped (above); file locks, file opens and os.replace are seen through
# Python's audit hooks (sys.addaudithook), whichever code of the store makes
# them. An audit hook cannot be removed, so one is installed once and does
# nothing unless a test is watching.

AUDITED = {
    # event: (kind, why it must not run on the event loop)
    "fcntl.flock": ("file lock", "while another worker process holds the file lock, /health cannot answer"),
    "fcntl.lockf": ("file lock", "while another worker process holds the file lock, /health cannot answer"),
    "open": ("file", "while the disk is slow, /health cannot answer"),
    "os.rename": ("file", "while the disk is slow, /health cannot answer"),  # os.rename and os.replace
}
_audited_watch = None  # the Watch of the running test, if any
_audit_installed = False


def _audit(event, args):
    watch = _audited_watch
    if watch is not None and event in AUDITED:
        try:
            watch.audited(event, args)
        except Exception:  # noqa: BLE001 - an audit hook must never break the call it watches
            pass


@contextmanager
def audited_by(watch: Watch):
    """Let `watch` see the audited calls of this process until the block ends."""
    global _audited_watch, _audit_installed
    if not _audit_installed:
        sys.addaudithook(_audit)
        _audit_installed = True
    _audited_watch = watch
    try:
        yield watch
    finally:
        _audited_watch = None


def test_blocking_work_runs_off_the_event_loop(kata, tmp_path):
    """the upload is parsed, locked and written off the event loop, so /health keeps answering"""
    app_module = part(kata, "app")
    app = app_module.create_app(tmp_path / "rules.json")
    original = app_module.parse_rules
    watch = Watch(tmp_path)

    def spy(raw):
        watch.saw("parse_rules", "parsing", "while a file is parsed there, /health cannot answer")
        return original(raw)

    app_module.parse_rules = spy
    watch_locks(watch, part(kata, "store"), app_module)
    before = threads_now()
    with audited_by(watch), served(app) as (base, loop_thread):
        watch.loop_ident = loop_thread.ident
        client, answer = start_upload(base, hang_after())
        wait_for(client, watch, hang_after() + 0.5, until=watch.on_loop.is_set)
        if watch.on_loop.is_set():
            client.join(0.05)  # what else the request does on the loop, it does at once
            raise AssertionError(watch.first_on_loop())
        if client.is_alive() or "timed out" in answer:
            raise upload_hang(UPLOAD, base, watch, before, loop_thread)
        if "error" in answer:
            raise answer["error"]
        r = answer["response"]
        assert any(c.what == "parse_rules" for c in watch.calls), (
            f"expected {UPLOAD} to call app.parse_rules (the tests spy on it), "
            f"but it answered {r.status_code} without calling it: {r.text}"
        )
        assert r.status_code == 200, f"expected {UPLOAD} to answer 200, got {r.status_code}: {r.text}"
        files = [c.what for c in watch.calls if c.kind == "file"]
        assert any(w.startswith(("writing", "os.replace")) for w in files), (
            f"expected to see {UPLOAD} write {tmp_path.name}/rules.json (a file opened for writing, or "
            f"os.replace), but the only file calls seen were: {files or 'none'}"
        )


# --- another worker process holds the file lock ------------------------------

HOLDER = textwrap.dedent(
    """
    import fcntl, select, sys
    lock_file = open(sys.argv[1], "a+")
    fcntl.flock(lock_file, fcntl.LOCK_EX)
    fcntl.lockf(lock_file, fcntl.LOCK_EX)  # the POSIX kind too, for a store that uses lockf
    print("held", flush=True)
    select.select([sys.stdin], [], [], float(sys.argv[2]))  # until told to let go, at most argv[2] s
    fcntl.lockf(lock_file, fcntl.LOCK_UN)
    fcntl.flock(lock_file, fcntl.LOCK_UN)
    """
)
PROBES = 2


def waits_for_lock(lock_path: Path):
    """Is a thread of this process waiting for a lock on `lock_path`? (Linux /proc/locks; None if unknown.)"""
    try:
        inode = str(os.stat(lock_path).st_ino)
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    pid = str(os.getpid())
    for line in table.splitlines():
        fields = line.split()
        if "->" in fields:  # "7: -> FLOCK  ADVISORY  WRITE 4242 00:2b:1234 0 EOF": a request that waits
            rest = fields[fields.index("->") + 1:]
            if len(rest) >= 5 and rest[3] == pid and rest[4].rsplit(":", 1)[-1] == inode:
                return True
    return False


def test_health_answers_while_another_process_holds_the_file_lock(kata, tmp_path):
    """/health keeps answering while the upload waits for a file lock another process holds"""
    path = tmp_path / "rules.json"
    lock_path = Path(f"{path}.lock")
    app_module = part(kata, "app")
    app = app_module.create_app(path)
    watch = Watch(tmp_path)
    watch_locks(watch, part(kata, "store"), app_module)
    before = threads_now()
    holder = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", HOLDER, str(lock_path), str(hang_after() + 1)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        with audited_by(watch), served(app) as (base, loop_thread):  # sees a thread re-take its own flock
            try:
                ready, _, _ = select.select([holder.stdout], [], [], 10)
                said = holder.stdout.readline() if ready else ""
                assert said.strip() == "held", (
                    f"expected the other process to take the flock on {lock_path.name}, it said {said!r}"
                    + (f": {holder.stderr.read()}" if holder.poll() is not None else "")
                )
                client, answer = start_upload(base, hang_after() + 1)
                # Wait until the upload is queued behind the other process's lock.
                deadline, waiting = time.monotonic() + hang_after(), False
                while client.is_alive() and time.monotonic() < deadline and not watch.deadlocks:
                    waiting = waits_for_lock(lock_path)
                    if waiting is not False:
                        break
                    time.sleep(0.005)
                if waiting is None:
                    client.join(0.2)  # no /proc/locks here: give the upload time to reach the lock
                if watch.deadlocks:
                    raise upload_hang(UPLOAD, base, watch, before, loop_thread)
                if not client.is_alive():
                    if "error" in answer:
                        raise answer["error"]
                    r = answer.get("response")
                    status = f"answered {r.status_code}" if r is not None else "timed out"
                    assert r is None or r.status_code == 200, (
                        f"expected {UPLOAD} to answer 200, got {r.status_code}: {r.text}"
                    )
                    raise AssertionError(
                        f"expected POST /rules to wait while another process holds the flock on {lock_path.name} "
                        "(a second process of the test took it, then the upload was sent to the served app), "
                        f"but it {status} while that lock was still held"
                    )
                with httpx.Client(timeout=PROBE_SECONDS, verify=NO_TLS) as probe:
                    for _ in range(PROBES):
                        try:
                            h = probe.get(f"{base}/health")
                        except httpx.TimeoutException:
                            at = where_in(frames_of(loop_thread))
                            line = at.split(", called from")[0]
                            state = "waiting for the file lock" if "flock(" in line or "lockf(" in line else "blocked"
                            raise AssertionError(
                                f"expected GET /health to answer within {PROBE_SECONDS:g} s while the upload waits "
                                f"for the file lock another process holds (both sent to the served app, the lock "
                                f"taken by a second process of the test), but it got no answer: the event loop "
                                f"thread is {state} at {at}"
                            ) from None
                        assert h.status_code == 200, (
                            f"expected GET /health, sent to the served app, to answer 200, got {h.status_code}"
                        )
            finally:
                holder.stdin.close()  # let go of the lock
            wait_for(client, watch, hang_after())
            if client.is_alive() or "timed out" in answer:
                raise upload_hang(
                    f"{UPLOAD[:-1]} after the other process let go of the file lock,", base, watch, before,
                    loop_thread,
                )
            if "error" in answer:
                raise answer["error"]
            r = answer["response"]
            assert r.status_code == 200, f"expected {UPLOAD} to answer 200, got {r.status_code}: {r.text}"
            doc = json.loads(path.read_text()) if path.exists() else None
            assert doc and doc.get("uploads") == 1, (
                f"expected {UPLOAD} to be saved once the other process let go of the lock, got {doc}"
            )
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()
        for pipe in (holder.stdin, holder.stdout, holder.stderr):
            pipe.close()
