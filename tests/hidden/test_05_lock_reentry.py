"""Hidden tests for kata 05, lock-reentry.

Every test gets a fresh copy of the package (`kata`) and its own temporary
folder: a thread deadlocked on a threading.Lock cannot be freed, it stays
behind as a daemon thread and keeps its flock, so nothing is shared between
tests. Everything that can deadlock runs under a hang guard (threads are
joined with a deadline, worker processes and HTTP requests have timeouts),
and a hang is reported with the stuck lines of the learner's code.
"""
import asyncio
import concurrent.futures
import importlib
import json
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from loopkata.testing import Hang, describe_frames, hang_after, run_bounded, where_stuck

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


def new_threads_stuck(before: set) -> str:
    """The learner's lines in every thread started since `before`, as "a thread is stuck at" blocks."""
    out = []
    for ident, frame in sys._current_frames().items():
        if ident in before:
            continue
        frames = []
        f = frame
        while f is not None:
            frames.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
            f = f.f_back
        lines = describe_frames(list(reversed(frames)), fallback=False)
        if lines:
            out.append("a thread is stuck at")
            out += [f"    {line}" for line in lines]
    return "\n".join(out)


# --- the store -------------------------------------------------------------

def test_read_modify_write_completes(kata, tmp_path):
    """a guarded read-modify-write finishes and writes the JSON file"""
    store, path = part(kata, "store"), tmp_path / "rules.json"
    doc = run_bounded(store.update, path, bump, what="store.update() (one read-modify-write)")
    assert path.exists(), f"expected {path.name} to be written by store.update(), but there is no such file"
    on_disk = json.loads(path.read_text())
    assert on_disk.get("count") == 1, f"expected the file to hold count 1 after one update, got {on_disk}"
    assert doc == on_disk, f"expected update() to return the document it wrote ({on_disk}), got {doc}"


def test_load_and_save_work_on_their_own(kata, tmp_path):
    """store.save() and store.load() still work outside a read-modify-write"""
    store, path = part(kata, "store"), tmp_path / "rules.json"
    assert run_bounded(store.load, path, what="store.load() of a missing file") == {}, (
        "expected load() of a file that does not exist yet to return {}"
    )
    run_bounded(store.save, path, {"uploads": 3}, what="store.save()")
    got = run_bounded(store.load, path, what="store.load()")
    assert got == {"uploads": 3}, f"expected load() to return what save() wrote, {{'uploads': 3}}, got {got}"


def test_two_threads_lose_no_update(kata, tmp_path):
    """two threads updating at once lose no update"""
    store, path = part(kata, "store"), tmp_path / "rules.json"
    run_bounded(store.update, path, bump, what="the first store.update()")
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
        raise Hang("two threads each running store.update()", hang_after(), stuck_lines(stuck))
    if errors:
        raise errors[0]
    expected = 1 + 2 * UPDATES
    count = json.loads(path.read_text()).get("count")
    assert count == expected, (
        f"expected count {expected} (1 + 2 threads x {UPDATES} updates), got {count}: "
        f"{expected - (count or 0)} updates were lost"
    )


WORKER = textwrap.dedent(
    """
    import importlib, importlib.util, json, os, sys, time
    from pathlib import Path
    from loopkata.testing import Hang, run_bounded

    impl, path, me, updates = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
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

    Path(f"{path}.ready-{me}").touch()
    deadline = time.monotonic() + 20
    while not Path(f"{path}.go").exists() and time.monotonic() < deadline:
        time.sleep(0.002)
    try:
        run_bounded(work, what=f"worker process {me} running store.update()", seconds=float(sys.argv[5]))
        out = {"ok": True}
    except Hang as exc:
        out = {"hang": str(exc), "stacks": exc.stacks}
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out), flush=True)
    os._exit(0)  # a thread stuck on a lock cannot be joined: leave without it
    """
)


def test_two_processes_lose_no_update(kata, tmp_path):
    """two worker processes updating the same file lose no update"""
    store, path = part(kata, "store"), tmp_path / "rules.json"
    run_bounded(store.update, path, bump, what="the first store.update()")
    impl = Path(kata.__file__).parent
    seconds = hang_after() + 0.1 * UPDATES
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(impl), str(path), str(i), str(UPDATES), str(seconds)],
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
            raise Hang(r["hang"].split(" did not finish")[0], seconds, r["stacks"])
    for i, r in enumerate(results, start=1):
        assert "error" not in r, f"expected worker process {i} to finish its updates, it failed with {r['error']}"
    expected = 1 + 2 * UPDATES
    count = json.loads(path.read_text()).get("count")
    assert count == expected, (
        f"expected count {expected} (1 + 2 processes x {UPDATES} updates), got {count}: "
        f"{expected - (count or 0)} updates were lost"
    )


# --- the service -------------------------------------------------------------

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
def serving(app):
    """Serve `app` with uvicorn on 127.0.0.1 (an ephemeral port) in a daemon thread; stop it after."""
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
    wait = 2.0
    try:
        yield f"http://127.0.0.1:{port}"
    except BaseException:
        wait = 0.2  # a deadlocked server cannot stop: it is left behind as a daemon thread
        raise
    finally:
        server.should_exit = True
        thread.join(wait)


def health_now(base: str) -> str:
    """One GET /health with a short timeout, described in words."""
    started = time.perf_counter()
    try:
        r = httpx.get(f"{base}/health", timeout=0.5)
        return f"meanwhile GET /health answered {r.status_code} in {(time.perf_counter() - started) * 1000:.1f} ms"
    except httpx.TimeoutException:
        return "meanwhile GET /health got no answer within 0.5 s either: the event loop itself is stuck"


def test_upload_is_saved(kata, tmp_path):
    """an upload through the served app is saved to the JSON file"""
    path = tmp_path / "rules.json"
    app = part(kata, "app").create_app(path)
    before = set(sys._current_frames())
    with serving(app) as base:
        try:
            r = httpx.post(
                f"{base}/rules", files={"file": ("q3.csv", RULES, "text/csv")}, timeout=hang_after()
            )
        except httpx.TimeoutException:
            raise Hang("POST /rules", hang_after(), health_now(base) + "\n" + new_threads_stuck(before)) from None
        assert r.status_code == 200, f"expected POST /rules to answer 200, got {r.status_code}: {r.text}"
        assert r.json().get("rules") == 3, f"expected the answer to count 3 rules, got {r.json()}"
        assert path.exists(), f"expected the upload to write {path.name}, but there is no such file"
        doc = json.loads(path.read_text())
        assert doc.get("uploads") == 1 and "q3.csv" in doc.get("rule_sets", {}), (
            f"expected the document to record 1 upload of q3.csv, got {doc}"
        )
        h = httpx.get(f"{base}/health", timeout=hang_after())
        assert h.status_code == 200, f"expected GET /health to answer 200, got {h.status_code}"


def test_rules_are_parsed_off_the_event_loop(kata, tmp_path):
    """the rules file is parsed off the event loop, so /health keeps answering"""
    app_module = part(kata, "app")
    app = app_module.create_app(tmp_path / "rules.json")
    original = app_module.parse_rules
    seen = {}
    called = threading.Event()

    def spy(raw):
        try:
            asyncio.get_running_loop()
            seen["on_loop"] = True
        except RuntimeError:  # no loop running in this thread: we are off the loop
            seen["on_loop"] = False
        called.set()
        return original(raw)

    app_module.parse_rules = spy
    before = set(sys._current_frames())
    with serving(app) as base:
        answer = {}

        def upload():
            try:
                answer["response"] = httpx.post(
                    f"{base}/rules", files={"file": ("q3.csv", RULES, "text/csv")}, timeout=hang_after()
                )
            except httpx.TimeoutException:
                answer["timed out"] = True
            except httpx.HTTPError as exc:
                answer["error"] = exc

        client = threading.Thread(target=upload, name="client", daemon=True)
        client.start()
        deadline = time.monotonic() + hang_after()
        while not called.wait(0.01) and client.is_alive() and time.monotonic() < deadline:
            pass
        if not seen and "response" in answer:
            r = answer["response"]
            raise AssertionError(
                "expected the upload to call app.parse_rules (the tests spy on it), "
                f"but it answered {r.status_code} without calling it: {r.text}"
            )
        assert seen, "expected the upload to call app.parse_rules (the tests spy on it), it was never called"
        assert not seen["on_loop"], (
            "expected parse_rules to run off the event loop (asyncio.get_running_loop() raising RuntimeError "
            "inside it), but it ran on the event loop thread: while a file is parsed there, /health cannot answer"
        )
        client.join(hang_after() + 0.5)
        if client.is_alive() or "timed out" in answer:
            raise Hang("POST /rules", hang_after(), health_now(base) + "\n" + new_threads_stuck(before))
        if "error" in answer:
            raise answer["error"]
        r = answer["response"]
        assert r.status_code == 200, f"expected POST /rules to answer 200, got {r.status_code}: {r.text}"
