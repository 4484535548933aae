"""Running someone else's code on this machine: a scrubbed environment, a private folder and,
where the machine allows it, a bubblewrap sandbox.

In the sandbox the code sees the interpreter and its installed packages read-only, the
folder it is lent read-only, and two folders it may write, its home (also its working folder
and TMPDIR) and /tmp: both in memory, with their total size and number of files capped, gone
when it ends. Nothing else of this machine's files is there: not the facilitator's checkout,
nor their home, nor any file of /etc that is not readable by everyone. It runs as nobody in
a user namespace of its own that may make no other, with no capability, in namespaces of its
own: it sees only its own processes, and its network has only a loopback interface.

Who nobody is outside depends on who starts it. Started by a user, it is that user. Started by
root, bubblewrap itself is started as the host's nobody (uid 65534), never root: the kernel checks
writes to /proc/sys and to cgroup files by that uid, so the code cannot change a sysctl nor a
cgroup. As root the whole sandbox also runs in a cgroup of its own that caps its memory (in-memory
files included) and its number of processes and threads. The README's table says what holds where.

Without bubblewrap the code still gets the scrubbed environment and the private folder, but
runs as the caller with the caller's files in reach: `Jail.why_not` says so.
"""
from __future__ import annotations

import contextlib
import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..grading.supervise import tree
from ..services import containers

NOBODY = 65534
# The only variables of the caller's environment the code gets: no token, password or
# secret of the facilitator's can reach it.
PASSED_ON = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
# Inside the sandbox the lent folder and the private one have fixed names, so what the code
# prints never shows where they are on this machine.
LENT, PRIVATE = Path("/grading"), Path("/home/learner")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
# Of /etc only what programs read to run; an entry is lent only if everyone may read all of it.
ETC = ("passwd", "group", "hosts", "host.conf", "nsswitch.conf", "gai.conf", "localtime", "timezone",
       "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl/certs", "ssl/openssl.cnf",
       "ca-certificates", "ca-certificates.conf", "mime.types", "os-release", "debian_version", "protocols",
       "services")
# The home and /tmp together (one in-memory file system): a PostgreSQL cluster takes about 40 MB
# and 1,000 files, a check's own files far less.
SPACE_BYTES, SPACE_FILES = 512 << 20, 20_000
SHM_BYTES = 64 << 20  # /dev/shm (multiprocessing's semaphores and queues)
FILE_SIZE_CAP = 1 << 30  # no file the code writes grows past this (SIGXFSZ)
OUTPUT_KEPT = 4 << 20  # bytes of its stdout and of its stderr read back
TASKS = 512  # processes and threads: a check with PostgreSQL and Celery workers uses under 100
LOOK_EVERY = 0.2  # seconds between looks at whether the code has stopped itself


def promise() -> str:
    """What the sandbox holds here, in one line for the facilitator (the README's table in full)."""
    who = ("as the host's nobody (uid 65534), not root" if _as_root() else "as you in a user namespace, no capability")
    memory = ("memory and processes capped by a cgroup" if _as_root() else f"memory capped per process, {TASKS} more processes")
    return (f"{who}, loopback only, nothing of your home or checkout; home and /tmp in memory "
            f"({SPACE_BYTES >> 20} MiB, {SPACE_FILES:,} files); {memory}")


# Run before bubblewrap, in a mount namespace of the sandbox's own: mounts its home and /tmp (one
# tmpfs, sized and with a cap on files), puts a view of each lent folder in it, and shows it at
# STAGE, where the sandbox's user can reach it whatever folders lead to the originals (a venv may
# sit in a home only its owner can enter); then starts bubblewrap, as nobody when this is root.
STAGE = Path("/tmp")  # every Linux has it, open to all; covered in that mount namespace only
_LAUNCH = r"""
space=$1 options=$2 owner=$3 stage=$4; shift 4
mount -t tmpfs -o "$options" loopkata-space "$space" || exit 125
mkdir "$space/home" "$space/tmp" || exit 125
if [ "$owner" != - ]; then chown "$owner:$owner" "$space/home" "$space/tmp" || exit 125; fi
chmod 0700 "$space/home" "$space/tmp" || exit 125
i=0
while [ "$1" != -- ]; do
  mkdir "$space/lent$i" && mount --bind "$1" "$space/lent$i" || exit 125
  i=$((i + 1)); shift
done
shift
mount --rbind "$space" "$stage" || exit 125
if [ "$owner" = - ]; then exec "$@"; fi
exec setpriv --reuid="$owner" --regid="$owner" --clear-groups --no-new-privs -- "$@"
"""


def _as_root() -> bool:
    return os.geteuid() == 0


@functools.lru_cache(maxsize=1)
def why_no_sandbox() -> str:
    """'' when bubblewrap can run a sandbox here, else one sentence saying why not."""
    if not sys.platform.startswith("linux"):
        return f"there is no sandbox on {sys.platform} (bubblewrap runs on Linux only)"
    for tool, package in (("bwrap", "bubblewrap"), ("unshare", "util-linux"), ("setpriv", "util-linux"),
                          ("mount", "mount")):
        if not shutil.which(tool):
            return f"`{tool}` is not installed (Debian and Ubuntu: apt-get install {package})"
    with _scratch() as space:
        probe = Jail(space / "lent", space / "private", "")
        try:
            ran = probe.run([sys.executable, "-I", "-c", "pass"], {}, timeout=60, outputs=space / "out")
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap could not start a sandbox ({exc})"
    if ran.status != 0:
        said = (ran.stderr.decode(errors="replace").strip().splitlines() or ["no reason given"])[-1]
        return f"bubblewrap could not start a sandbox here ({said[:300]}); user namespaces may be switched off"
    return ""


@contextlib.contextmanager
def _scratch():
    import tempfile

    with tempfile.TemporaryDirectory(prefix="loopkata-sandbox-") as tmp:
        for name in ("lent", "private"):
            (Path(tmp) / name).mkdir()
        yield Path(tmp)


def _world_readable(path: str) -> bool:
    """Whether everyone may read `path` and, for a folder, everything in it (links not followed)."""
    def readable(p: str, folder: bool) -> bool:
        mode = os.lstat(p).st_mode
        return bool(mode & 0o004) and (not folder or bool(mode & 0o001))

    try:
        if not os.path.isdir(path):
            return readable(path, False) if not os.path.islink(path) else True
        if not readable(path, True):
            return False
        for top, folders, files in os.walk(path):
            for name in folders:
                if not os.path.islink(os.path.join(top, name)) and not readable(os.path.join(top, name), True):
                    return False
            for name in files:
                if not os.path.islink(os.path.join(top, name)) and not readable(os.path.join(top, name), False):
                    return False
    except OSError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def _system_binds() -> tuple[str, ...]:
    args = []
    for top in SYSTEM:
        if os.path.islink(top):  # merged /usr: /bin -> usr/bin
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in ETC:
        if os.path.lexists(f"/etc/{name}") and _world_readable(f"/etc/{name}"):
            if "/" in name:  # its folder, made open to all as on the host (bubblewrap's own is 0700)
                args += ["--perms", "0755", "--dir", f"/etc/{name.rsplit('/', 1)[0]}"]
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return tuple(args)


def _interpreter_places() -> list[str]:
    """The interpreter and its packages: a venv and the Python it was made from may live in a
    home, or under /tmp (a CI clone)."""
    return [place for place in sorted({str(Path(sys.prefix).resolve()), str(Path(sys.base_prefix).resolve()),
                                       sys.prefix}) if not place.startswith(SYSTEM)]


def _bwrap(cmd: list[str], views: dict[str, Path], space: Path) -> list[str]:
    """bubblewrap's command line; `views` maps each lent place (as the code sees it) to where the
    launcher put a view of it, `space` is the in-memory home and /tmp."""
    args = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--unshare-user", "--disable-userns",
            "--uid", str(NOBODY), "--gid", str(NOBODY), "--cap-drop", "ALL",
            "--die-with-parent", "--new-session", "--hostname", "sandbox",
            *_system_binds(), "--proc", "/proc", "--dev", "/dev",
            "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
            "--bind", str(space / "tmp"), "/tmp", "--bind", str(space / "home"), str(PRIVATE)]
    for inside, view in views.items():
        args += ["--ro-bind", str(view), inside]
    # Nothing else is writable: the root, and /dev (its devices still work), are read-only.
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", str(PRIVATE)]
    return [*args, "--", *cmd]


@dataclass(frozen=True)
class Jail:
    """Where and how a command runs: `lent` is shown read-only, `private` is its only writable
    folder (in the sandbox, an in-memory folder mounted over it and gone when the command ends).
    `why_not` is '' in a sandbox, else why there is none."""

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

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        home = str(self.home)
        passed = {k: os.environ[k] for k in PASSED_ON if k in os.environ}
        sandboxed = {containers.SANDBOXED: "1"} if self.sandboxed else {}
        return {**passed, "HOME": home, "TMPDIR": home, "USER": "learner", **sandboxed, **extra}

    def _command(self, cmd: list[str], memory_bytes: int | None) -> tuple[list[str], containers.Cgroup | None]:
        """The whole command line (launcher, bubblewrap, `cmd`) and, as root, the cgroup it starts in."""
        places = {**{p: Path(p) for p in _interpreter_places()}, str(LENT): self.lent}
        views = {inside: STAGE / f"lent{i}" for i, inside in enumerate(places)}
        owner = str(NOBODY) if _as_root() else "-"
        options = f"size={SPACE_BYTES},nr_inodes={SPACE_FILES},mode=0755"
        namespace = ["--mount"] if _as_root() else ["--user", "--map-root-user", "--mount"]
        argv = [shutil.which("unshare") or "unshare", *namespace, "--propagation", "private", "--",
                "/bin/sh", "-c", _LAUNCH, "sandbox", str(self.private), options, owner, str(STAGE),
                *map(str, places.values()), "--", *_bwrap(cmd, views, STAGE)]
        cgroup = _cgroup(memory_bytes)
        return (cgroup.command(argv) if cgroup else argv), cgroup

    def run(self, cmd: list[str], extra_env: dict[str, str], timeout: float, outputs: Path,
            memory_bytes: int | None = None) -> Ran:
        """Run `cmd` to its end (killed with everything it started after `timeout` seconds, or as
        soon as every process it started has stopped itself). Its stdout and stderr go to files in
        `outputs`, a folder the code cannot see, and only their first OUTPUT_KEPT bytes are read back.
        `memory_bytes` caps what the sandbox holds in memory, in-memory files included, where a
        cgroup can be made (as root)."""
        outputs.mkdir(parents=True, exist_ok=True)
        cgroup = None
        if self.sandboxed:
            argv, cgroup = self._command(cmd, memory_bytes)
        else:
            argv = cmd
        try:
            with open(outputs / "stdout", "w+b") as out, open(outputs / "stderr", "w+b") as err:
                child = subprocess.Popen(argv, cwd=self.private, env=self.env(extra_env),
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         start_new_session=True, preexec_fn=_limits)
                try:
                    status, stopped = _wait(child, timeout)
                finally:  # ended, past the deadline or Ctrl-C: nothing it started stays behind
                    _kill_group(child)
                out.seek(0)
                err.seek(0)
                return Ran(status, out.read(OUTPUT_KEPT), err.read(OUTPUT_KEPT), stopped)
        finally:
            if cgroup:
                cgroup.close()


def _cgroup(memory_bytes: int | None) -> containers.Cgroup | None:
    """A cgroup of the sandbox's own capping its processes (and its memory), where this process
    may make one: as root."""
    if not _as_root() or containers._cgroup_refused("pids") or containers._cgroup_refused("memory"):
        return None
    return containers.Cgroup(memory_bytes=memory_bytes, tasks=TASKS)


def _wait(child: subprocess.Popen, timeout: float) -> tuple[int, str]:
    """The child's exit status, and '' or why it was ended: 'timed out', or 'stopped' when every
    process under it has stopped itself (SIGSTOP), which no deadline inside could then end."""
    deadline, stopped_since = time.monotonic() + timeout, None
    while True:
        try:
            return child.wait(timeout=min(LOOK_EVERY, max(0.0, deadline - time.monotonic()))), ""
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if now >= deadline:
            raise subprocess.TimeoutExpired(child.args, timeout)
        if _all_stopped(child.pid):
            stopped_since = stopped_since or now
            if now - stopped_since >= 2 * LOOK_EVERY:
                return -signal.SIGSTOP, "stopped"
        else:
            stopped_since = None


def _all_stopped(top: int) -> bool:
    """Whether every process under `top` that is not a bubblewrap of ours is stopped."""
    states = []
    for pid in tree(top):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        name, state = stat[stat.find(b"(") + 1:stat.rfind(b")")], stat[stat.rfind(b")") + 2:][:1]
        if name in (b"bwrap", b"unshare", b"sh", b"setpriv"):  # the launch, waiting for the code
            continue
        states.append(state in (b"T", b"t"))
    return bool(states) and all(states)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_CAP, FILE_SIZE_CAP))
    if not _as_root():  # as root the cgroup caps processes; a user's count is per uid, so add to theirs
        running = _processes_of(os.getuid())
        resource.setrlimit(resource.RLIMIT_NPROC, (running + TASKS, running + TASKS))


def _processes_of(uid: int) -> int:
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                count += os.stat(f"/proc/{name}").st_uid == uid
    return count


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
    stopped: str = ""  # '' or 'stopped': every process of the code had stopped itself


def jail(lent: Path, private: Path, sandbox: bool = True) -> Jail:
    """A Jail over the two folders (made if missing)."""
    for folder in (lent, private):
        folder.mkdir(parents=True, exist_ok=True)
    return Jail(lent, private, why_no_sandbox() if sandbox else "the sandbox was switched off")
