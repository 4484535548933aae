"""Running someone else's code on this machine: a scrubbed environment, a private folder and,
where the machine allows it, a bubblewrap sandbox.

In the sandbox the code sees the interpreter and its installed packages read-only, the
folders it is lent read-only, and one private folder it may write (its HOME, TMPDIR and
working folder). Nothing else of this machine's files is there: not the facilitator's
checkout, nor their home, nor any secret of /etc. It runs as nobody in a user namespace of
its own, with no capability outside it, in namespaces of its own: it sees only its own
processes, and its network has only a loopback interface. Without bubblewrap the code still gets the scrubbed environment and the private
folder, but runs as the caller with the caller's files in reach: `Jail.why_not` says so.
"""
from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

NOBODY = 65534
# The only variables of the caller's environment the code gets: no token, password or
# secret of the facilitator's can reach it.
PASSED_ON = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
# Inside the sandbox the lent folder and the private one have fixed names, so what the code
# prints never shows where they are on this machine.
LENT, PRIVATE = Path("/grading"), Path("/home/learner")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
ETC = ("passwd", "group", "hosts", "host.conf", "nsswitch.conf", "gai.conf", "localtime", "timezone",
       "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl", "ca-certificates",
       "ca-certificates.conf", "mime.types", "os-release", "debian_version", "protocols", "services")
PRIVATE_TMP_BYTES = 1 << 30  # the sandbox's own /tmp, in memory
FILE_SIZE_CAP = 1 << 30  # no file the code writes grows past this (SIGXFSZ)
OUTPUT_KEPT = 4 << 20  # bytes of its stdout and of its stderr read back


@functools.lru_cache(maxsize=1)
def why_no_sandbox() -> str:
    """'' when bubblewrap can run a sandbox here, else one sentence saying why not."""
    if not sys.platform.startswith("linux"):
        return f"there is no sandbox on {sys.platform} (bubblewrap runs on Linux only)"
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed (Debian and Ubuntu: apt-get install bubblewrap)"
    probe = _bwrap(["true"], lent=None, private=None)
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start a sandbox ({exc})"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no reason given"])[-1]
        return f"bubblewrap could not start a sandbox here ({said}); user namespaces may be switched off"
    return ""


def _system_binds() -> list[str]:
    args = []
    for top in SYSTEM:
        if os.path.islink(top):  # merged /usr: /bin -> usr/bin
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    # Of /etc only what programs read to run, none of it secret (no shadow, no keys)
    for name in ETC:
        if os.path.exists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return args


def _interpreter_binds() -> list[str]:
    """The interpreter and its packages: a venv and the Python it was made from may live in a
    home, or under /tmp (a CI clone), so these come after the sandbox's own /tmp."""
    args = []
    for place in sorted({str(Path(sys.prefix).resolve()), str(Path(sys.base_prefix).resolve()), sys.prefix}):
        if not place.startswith(SYSTEM):
            args += ["--ro-bind", place, place]
    return args


def _bwrap(cmd: list[str], lent: Path | None, private: Path | None) -> list[str]:
    # The code's user is nobody in a user namespace of its own: outside it, it holds no
    # capability, and it sees only the system folders, the interpreter and what it is lent.
    args = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--unshare-user",
            "--uid", str(NOBODY), "--gid", str(NOBODY), "--cap-drop", "ALL",
            "--die-with-parent", "--new-session", "--hostname", "sandbox",
            *_system_binds(), "--proc", "/proc", "--dev", "/dev",
            "--size", str(PRIVATE_TMP_BYTES), "--tmpfs", "/tmp", *_interpreter_binds()]
    if lent is not None:
        args += ["--ro-bind", str(lent), str(LENT)]
    if private is not None:
        args += ["--bind", str(private), str(PRIVATE), "--chdir", str(PRIVATE)]
    return [*args, "--", *cmd]


@dataclass(frozen=True)
class Jail:
    """Where and how a command runs: `lent` is shown read-only, `private` is its only
    writable folder. `why_not` is '' in a sandbox, else why there is none."""

    lent: Path
    private: Path
    why_not: str

    @property
    def sandboxed(self) -> bool:
        return not self.why_not

    def path(self, lent_path: Path) -> Path:
        """Where a file of the lent folder is, as the code sees it."""
        return (LENT if self.sandboxed else self.lent) / Path(lent_path).relative_to(self.lent)

    @property
    def home(self) -> Path:
        return PRIVATE if self.sandboxed else self.private

    def command(self, cmd: list[str]) -> list[str]:
        return _bwrap(cmd, self.lent, self.private) if self.sandboxed else cmd

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        home = str(self.home)
        passed = {k: os.environ[k] for k in PASSED_ON if k in os.environ}
        return {**passed, "HOME": home, "TMPDIR": home, "USER": "learner", **extra}

    def run(self, cmd: list[str], extra_env: dict[str, str], timeout: float, outputs: Path) -> Ran:
        """Run `cmd` to its end (killed with everything it started after `timeout` seconds).
        Its stdout and stderr go to files in `outputs`, a folder the code cannot see, and only
        their first OUTPUT_KEPT bytes are read back."""
        outputs.mkdir(parents=True, exist_ok=True)
        with open(outputs / "stdout", "w+b") as out, open(outputs / "stderr", "w+b") as err:
            child = subprocess.Popen(self.command(cmd), cwd=self.private, env=self.env(extra_env),
                                     stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                     start_new_session=True, preexec_fn=_file_size_cap)
            try:
                status = child.wait(timeout=timeout)
            finally:  # ended, past the deadline or Ctrl-C: nothing it started stays behind
                _kill_group(child)
            out.seek(0)
            err.seek(0)
            return Ran(status, out.read(OUTPUT_KEPT), err.read(OUTPUT_KEPT))


def _file_size_cap() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_CAP, FILE_SIZE_CAP))


def _kill_group(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()


@dataclass(frozen=True)
class Ran:
    status: int
    stdout: bytes
    stderr: bytes


def jail(lent: Path, private: Path, sandbox: bool = True) -> Jail:
    """A Jail over the two folders (made if missing)."""
    for folder in (lent, private):
        folder.mkdir(parents=True, exist_ok=True)
    return Jail(lent, private, why_no_sandbox() if sandbox else "the sandbox was switched off")
