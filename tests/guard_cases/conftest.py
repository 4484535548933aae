"""What every guard case shares: the code under test, named by LOOPKATA_GUARD_CASE_IMPL.

Each module here is a plain test of the kind a team keeps in its own repository
for one kata's code; tests/test_guard_katas.py runs it under `pytest -p
loopkata.guard` against the kata's starter, its reference fix and each variant.

LOOPKATA_GUARD_CASE_IMPL holds one implementation or several, separated by
os.pathsep: a .py file or a package folder, each optionally labelled
(`starter=/path/to/katas/01_bound_semaphore.py`). Every test that asks for the
`kata` fixture runs once per implementation, with the label as its test id, so
one guarded run covers them all and its report can be read per implementation.
Each implementation is imported once, under a name of its own, and kept for the
whole run, as a team's module is.
"""
import contextlib
import gc
import importlib.util
import itertools
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ENV = "LOOPKATA_GUARD_CASE_IMPL"
_loaded: dict[Path, object] = {}
_numbers = itertools.count(1)


def implementations() -> list[tuple[str, Path]]:
    """(label, path) of each implementation named by LOOPKATA_GUARD_CASE_IMPL, in order."""
    found = []
    for entry in filter(None, os.environ.get(ENV, "").split(os.pathsep)):
        label, sep, path = entry.partition("=")
        if not sep or os.sep in label:
            label, path = Path(entry).stem, entry
        found.append((label, Path(path).resolve()))
    return found


def load(path: Path):
    """Import the file or package at `path` under a unique module name (once; later calls return it)."""
    path = Path(path).resolve()
    if path not in _loaded:
        name = f"guard_case_{next(_numbers)}_{path.stem.lstrip('0123456789_') or 'impl'}"
        if path.is_dir():
            spec = importlib.util.spec_from_file_location(name, path / "__init__.py",
                                                          submodule_search_locations=[str(path)])
        else:
            spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # a package's relative imports find it here
        spec.loader.exec_module(module)
        _loaded[path] = module
    return _loaded[path]


class JSONService(BaseHTTPRequestHandler):
    """A stand-in for a team's upstream service: each POST's JSON body in, `answer(body)` out as JSON."""

    def answer(self, request: dict) -> dict:
        raise NotImplementedError

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps(self.answer(request)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def http_server(handler):
    """A real HTTP server on 127.0.0.1 answering with `handler`, in a thread; yields its URL, stopped after."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def submodule(package, name: str):
    """`package.name` of a package loaded by `load`."""
    return importlib.import_module(f"{package.__name__}.{name}")


def pytest_generate_tests(metafunc):
    if "impl" in metafunc.fixturenames:
        impls = implementations()
        if not impls:
            raise pytest.UsageError(f"set {ENV} to the implementation to test (a .py file or a package folder)")
        metafunc.parametrize("impl", [p for _, p in impls], ids=[label for label, _ in impls], scope="module")


@pytest.fixture(scope="module")
def kata(impl):
    """The implementation under test, imported (a case module overrides this when the code reads its
    environment at import)."""
    return load(impl)


@pytest.fixture(autouse=True)
def _leftovers_found_in_their_own_test():
    """What a test leaves to the garbage collector (a task nothing holds, a session never closed) is
    collected before the next test starts, so anything found in it is charged to this test."""
    yield
    gc.collect()
