# JupyterHub for a Loop Katas workshop room, on one machine (a trial or a small room).
#
# WARNING: every learner runs code on this machine. Before opening this hub to anyone but
# yourself, read "Try it on one machine" in docs/workshop/deploy.md: serve it over HTTPS,
# give each learner a password of their own (LOOPKATA_HUB_AUTH=firstuse), and know that
# this file caps no learner's memory or CPU (TLJH and Z2JH do).
#
#   export LOOPKATA_HUB_PASSWORD='at least 8 characters'
#   .venv/bin/jupyterhub -f docs/workshop/jupyterhub_config.py
#
# It listens on http://127.0.0.1:8000 only, until told otherwise. Environment:
#   LOOPKATA_HUB_AUTH      shared (default): one password, any learner name; for a trial
#                          between colleagues. firstuse: each learner picks a name and a
#                          password at their first login (jupyterhub-firstuseauthenticator,
#                          in requirements-dev.txt); for a real room.
#   LOOPKATA_HUB_PASSWORD  the shared password (required with shared, 8 characters or more)
#   LOOPKATA_HUB_IP        the address to listen on (default 127.0.0.1; 0.0.0.0 is every one)
#   LOOPKATA_HUB_PORT      (default 8000)
#   LOOPKATA_HUB_SSL_CERT, LOOPKATA_HUB_SSL_KEY
#                          serve HTTPS with this certificate and key
#   LOOPKATA_HUB_DIR       the hub's folder: hub/ (database, cookie secret, passwords;
#                          only the hub's user can open it) and homes/ (learners' homes).
#                          Default ~/loopkata-hub, or /srv/loopkata-hub when started as root.
#   LOOPKATA_HUB_FIRST_UID started as root, learner number N runs as uid FIRST_UID + N
#                          (default 50000), a uid no account of this machine may use.
#
# Who the learners' servers run as:
#   - started as root: each learner as a Unix uid of their own, not root, with a home only
#     they can open; no learner can read another's files or the hub's secrets. If the venv or
#     its Python sits in a folder closed to other users (a pyenv under /root), each server gets
#     a private view of that folder showing only them (this needs a mount namespace: a machine
#     or VM, not a container without CAP_SYS_ADMIN).
#   - started as any other user: every learner as that same user, with no isolation between
#     them: only for colleagues you trust with that account.
#
# For The Littlest JupyterHub or Zero to JupyterHub, do not use this file:
# docs/workshop/deploy.md gives their settings.
import ctypes
import importlib.util
import ipaddress
import os
import pwd
import resource
import signal
import stat
import sys
from pathlib import Path

from jupyterhub.spawner import SimpleLocalProcessSpawner

c = get_config()  # noqa: F821  (provided by JupyterHub when it loads this file)

AS_ROOT = os.geteuid() == 0
MIN_PASSWORD = 8  # SharedPasswordAuthenticator refuses shorter ones
# A learner's processes and threads together: far above a server, kernels and a check with its
# PostgreSQL, far below what a fork bomb needs to starve the room.
LEARNER_MAX_TASKS = 1024


def refuse(message: str) -> None:
    sys.exit(f"loopkata hub: {message}")


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, "").strip() or default


# --- where it keeps things ------------------------------------------------------------------
state = Path(env("LOOPKATA_HUB_DIR", "/srv/loopkata-hub" if AS_ROOT else "~/loopkata-hub")).expanduser().resolve()
private = state / "hub"    # database, cookie secret, passwords: the hub's user alone
homes = state / "homes"
# As root, learners' uids walk through state and homes to their own home, without listing them;
# otherwise the hub's user alone needs them. A LOOPKATA_HUB_DIR that exists keeps its mode.
walk = 0o711 if AS_ROOT else 0o700
if not state.exists():
    state.mkdir(mode=walk, parents=True)
for folder, mode in ((private, 0o700), (homes, walk)):
    folder.mkdir(exist_ok=True)
    folder.chmod(mode)

c.JupyterHub.db_url = f"sqlite:///{private / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(private / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(private / "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = str(private / "jupyterhub-proxy.pid")

# --- where it listens -----------------------------------------------------------------------
ip = env("LOOPKATA_HUB_IP", "127.0.0.1")
port = env("LOOPKATA_HUB_PORT", "8000")
cert, key = env("LOOPKATA_HUB_SSL_CERT"), env("LOOPKATA_HUB_SSL_KEY")
if bool(cert) != bool(key):
    refuse("set both LOOPKATA_HUB_SSL_CERT and LOOPKATA_HUB_SSL_KEY, or neither.")
if cert:
    c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key = cert, key
try:
    loopback = ipaddress.ip_address(ip).is_loopback
except ValueError:
    loopback = ip == "localhost"
if not cert and not loopback:
    print(f"loopkata hub: WARNING: plain HTTP on {ip}: passwords and code cross the network unencrypted. "
          "Set LOOPKATA_HUB_SSL_CERT and LOOPKATA_HUB_SSL_KEY, or put an HTTPS proxy in front "
          "(docs/workshop/deploy.md).", file=sys.stderr)
host = f"[{ip}]" if ":" in ip else ip
c.JupyterHub.bind_url = f"{'https' if cert else 'http'}://{host}:{port}"

# --- who may log in -------------------------------------------------------------------------
# No admin_users: anyone could log in under an admin's name (knowing the shared password, or
# by being first with firstuse).
c.Authenticator.allow_all = True
# Names become folder names and appear in URLs: keep them plain.
c.Authenticator.username_pattern = r"^[a-z0-9][a-z0-9_.-]{0,31}$"
auth = env("LOOPKATA_HUB_AUTH", "shared")
if auth == "shared":
    password = os.environ.get("LOOPKATA_HUB_PASSWORD", "")
    if len(password) < MIN_PASSWORD:
        refuse(f"set LOOPKATA_HUB_PASSWORD to the password learners will type ({MIN_PASSWORD} characters "
               "or more), or LOOPKATA_HUB_AUTH=firstuse for a password per learner, then start the hub again.")
    # Anyone who knows it can log in as any learner: for a trial between colleagues.
    c.JupyterHub.authenticator_class = "shared-password"
    c.SharedPasswordAuthenticator.user_password = password
elif auth == "firstuse":
    try:
        import firstuseauthenticator  # noqa: F401  (fail here with an install hint, not in the hub's log)
    except ImportError:
        refuse("LOOPKATA_HUB_AUTH=firstuse needs jupyterhub-firstuseauthenticator: "
               f"{Path(sys.executable).parent / 'pip'} install jupyterhub-firstuseauthenticator==1.1.1")
    # The first password typed for a name becomes that name's password (hashed, in hub/).
    c.JupyterHub.authenticator_class = "firstuseauthenticator.FirstUseAuthenticator"
    c.FirstUseAuthenticator.dbm_path = str(private / "passwords.dbm")
    c.FirstUseAuthenticator.create_users = True
    c.FirstUseAuthenticator.min_password_length = MIN_PASSWORD
else:
    refuse(f"LOOPKATA_HUB_AUTH is {auth!r}; it can be 'shared' (one password) or 'firstuse' (one per learner).")


# --- who the learners' servers run as -------------------------------------------------------
CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x00020000, 4096, 16384, 1 << 18
libc = ctypes.CDLL(None, use_errno=True)  # loaded before any fork: the child only calls it


def _sys(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def open_to_learners(path: Path) -> bool:
    """Whether a uid with no group of this machine may walk through path."""
    return bool(path.stat().st_mode & stat.S_IXOTH)


def closed_ancestor(path: Path) -> Path | None:
    """The topmost folder above path that other users cannot walk through (e.g. /root), if any."""
    closed = [p for p in path.parents if not open_to_learners(p)]
    return closed[-1] if closed else None


class LearnerView:
    """What a learner's server sees of folders closed to other users (e.g. a venv under /root).

    Each such folder is covered, in the server's own mount namespace, by a skeleton that holds
    only the paths the server needs, bound from the real ones: nothing else in it shows.
    """

    def __init__(self, needed: list[Path], skeletons: Path):
        self.binds: list[tuple[str, str]] = []   # (real path, where it goes in a skeleton)
        self.covers: list[tuple[str, str]] = []  # (skeleton, the closed folder it covers)
        by_closed: dict[Path, list[Path]] = {}
        for path in needed:
            closed = closed_ancestor(path)
            if closed is not None:
                by_closed.setdefault(closed, []).append(path)
        for number, (closed, paths) in enumerate(sorted(by_closed.items())):
            skeleton = skeletons / str(number)
            skeleton.mkdir(parents=True, exist_ok=True)
            skeleton.chmod(0o755)
            # A path inside another needed path comes along with it.
            outer = [p for p in paths if not any(q != p and q in p.parents for q in paths)]
            for path in sorted(set(outer)):
                target = skeleton / path.relative_to(closed)
                target.mkdir(parents=True, exist_ok=True)
                for folder in (target, *target.parents):
                    if folder == skeleton.parent:
                        break
                    folder.chmod(0o755)
                self.binds.append((str(path), str(target)))
            self.covers.append((str(skeleton), str(closed)))

    def enter(self) -> None:
        """In a forked child, as root: a mount namespace of its own with the skeletons in place."""
        if not self.covers:
            return
        _sys(libc.unshare(CLONE_NEWNS), "unshare a mount namespace")
        _sys(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "keep its mounts to itself")
        for source, target in self.binds + self.covers:
            _sys(libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None),
                 f"bind {source} on {target}")


class LearnerUidSpawner(SimpleLocalProcessSpawner):
    """Each learner's server as an unprivileged uid of its own, in a home only that uid can open.

    Needs no account per learner: the uid is FIRST_UID + the learner's number in the hub's
    database. Started as root only.
    """

    first_uid = int(env("LOOPKATA_HUB_FIRST_UID", "50000"))
    view: LearnerView | None = None

    @property
    def uid(self) -> int:
        return self.first_uid + self.user.id

    def _prepare_home(self) -> None:
        try:
            taken = pwd.getpwuid(self.uid).pw_name
        except KeyError:
            taken = ""
        if taken:
            raise RuntimeError(f"uid {self.uid}, meant for learner {self.user.name}, belongs to the account "
                               f"{taken}: set LOOPKATA_HUB_FIRST_UID to a range no account uses.")
        home = Path(self.home_dir)
        home.mkdir(mode=0o700, exist_ok=True)
        owner = home.stat().st_uid
        if owner not in (0, self.uid):
            # Another learner number once had this name (the hub's database was reset).
            raise RuntimeError(f"{home} belongs to uid {owner}, not to {self.user.name} (uid {self.uid}): "
                               f"give it to them with chown -R {self.uid}:{self.uid} {home}, or move it away.")
        os.chown(home, self.uid, self.uid)
        home.chmod(0o700)

    async def start(self):
        self._prepare_home()
        return await super().start()

    def make_preexec_fn(self, name):
        uid, home, view = self.uid, self.home_dir, self.view

        def become_learner():
            if view is not None:
                view.enter()
            os.setgroups([])
            os.setgid(uid)
            resource.setrlimit(resource.RLIMIT_NPROC, (LEARNER_MAX_TASKS, LEARNER_MAX_TASKS))
            os.setuid(uid)
            os.umask(0o077)
            os.chdir(home)

        return become_learner

    def user_env(self, env):
        env = super().user_env(env)
        env["LOGNAME"] = self.user.name
        env["PS1"] = f"{self.user.name}:\\w\\$ "  # no account: bash's \u says "I have no name!"
        return env

    async def stop(self, now=False):
        await super().stop(now=now)
        # The uid is this learner's alone: whatever a terminal left running in the background goes too.
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat().st_uid == self.uid:
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                pass


venv_bin = Path(sys.executable).parent
if AS_ROOT:
    # What every learner's server reads: the interpreter, the venv, the engine, the homes.
    engine = importlib.util.find_spec("loopkata")
    needed = [Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), homes]
    if engine is not None and engine.origin:
        needed.append(Path(engine.origin).resolve().parent)
    LearnerUidSpawner.view = LearnerView(needed, private / "views")
    c.JupyterHub.spawner_class = LearnerUidSpawner
else:
    c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = str(homes / "{username}")

# The hub's own venv holds jupyterhub-singleuser, JupyterLab, nbgitpuller and loopkata,
# whether or not it was activated before starting the hub.
c.Spawner.cmd = [str(venv_bin / "jupyterhub-singleuser")]
c.Spawner.environment = {"PATH": os.pathsep.join([str(venv_bin), "/usr/local/bin:/usr/bin:/bin"])}
c.Spawner.default_url = "/lab"
# A login shell in the terminal would reset PATH from /etc/profile and lose `loopkata`.
c.Spawner.args = ['--ServerApp.terminado_settings={"shell_command": ["/bin/bash"]}']

# A whole room logs in within a minute; servers start slower than the defaults expect.
c.Spawner.http_timeout = 60
c.Spawner.start_timeout = 120

# configurable-http-proxy from `make` ($(VENV)/chp) if there, else the one on PATH.
chp = Path(sys.prefix) / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"
if chp.exists():
    c.ConfigurableHTTPProxy.command = [str(chp)]
