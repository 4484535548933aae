"""A real JupyterHub for a workshop room: three learners pull the collection and grade a kata.

The hub is jupyterhub from this venv with docs/workshop/jupyterhub_config.py, loaded from a small
config of the test's own that adds ports on 127.0.0.1 and a service token. Each learner's server
pulls the collection through nbgitpuller from a file:// clone of this project and runs
`loopkata check` in a terminal of its own; one learner first saves the reference fix over the
kata through the contents API. Started as root, as in CI, the hub runs each learner as a uid of
their own: a learner's terminal then tries to read the hub's cookie secret and another learner's
home, and must fail. Everything the hub started is stopped whatever happens, and the test fails
if a process of it is left. `pytest -s` prints the time of each phase.

The quick tests load the config alone: its defaults (loopback only, a private folder for the
hub's secrets, no root for learners), HTTPS, and the per-learner password authenticator.
"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect
from traitlets.config.loader import PyFileConfigLoader
from traitlets.utils.importstring import import_item

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "docs" / "workshop" / "jupyterhub_config.py"
# Only against a hang: the verdict comes from what the room did, never from how fast. Quiet, the
# room takes about 15 s here; under a loaded suite several times that.
DEADLINE = 300.0
USERS = ("ada", "grace", "linus")
SOLVER = "ada"  # saves the reference fix before checking
KATA, KATA_FILE = "bound-semaphore", "01_bound_semaphore.py"
FOLDER = "loop-katas"
SERVICE_SCOPES = ["admin:users", "admin:servers", "access:servers", "tokens"]
MARKER_VAR = "LOOPKATA_HUB_TEST"  # every process of the room carries it, so none can hide
AS_ROOT = os.geteuid() == 0  # then each learner runs as a uid of their own


def _missing_tools() -> str | None:
    """One sentence naming what to install, or None."""
    bin_dir = Path(sys.executable).parent
    missing = []
    if not (bin_dir / "jupyterhub").exists() or importlib.util.find_spec("jupyterhub") is None:
        missing.append("jupyterhub (pip install -r requirements-dev.txt, which pins jupyterhub==6.1.1)")
    if importlib.util.find_spec("nbgitpuller") is None:
        missing.append("nbgitpuller (pip install -r requirements-dev.txt, which pins nbgitpuller==1.3.0)")
    if not _chp().exists():
        missing.append(f"configurable-http-proxy (npm install --prefix {Path(sys.prefix) / 'chp'} "
                       "configurable-http-proxy@5.3.0, which make does when npm is installed)")
    if not shutil.which("node"):
        missing.append("Node.js, which runs configurable-http-proxy")
    if not shutil.which("git"):
        missing.append("git, which nbgitpuller runs")
    if not missing:
        return None
    return f"The workshop hub test needs {' and '.join(missing)} in {sys.prefix}."


def _chp() -> Path:
    return Path(sys.prefix) / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Room:
    """One hub and everything it starts; stop() leaves nothing running.

    Its folder is in open_tmp, which learners' uids can walk through; its config in tmp_path.
    """

    def __init__(self, tmp_path: Path, open_tmp: Path):
        self.state = open_tmp / "room"           # LOOPKATA_HUB_DIR: hub/ (db, secrets), homes/
        self.conf = (tmp_path / "hub" / "jupyterhub_config.py").resolve()  # unique: names the hub's processes
        self.log_path = self.conf.parent / "hub.log"
        self.marker = secrets.token_hex(8)
        self.token = secrets.token_hex(32)
        self.proc: subprocess.Popen | None = None
        self.spawned: list[str] = []
        self.stopped = False
        self.url = ""

    def home(self, user: str) -> Path:
        return self.state / "homes" / user

    def secret(self) -> Path:
        return self.state / "hub" / "jupyterhub_cookie_secret"

    def ports_taken(self) -> int:
        """How many single-user servers so far could not start because their port was taken."""
        try:
            return self.log_path.read_text(errors="replace").count("could not be started because port")
        except OSError:
            return 0

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return "(no hub log)"
        return "\n".join(text)

    def start(self, git_config: Path) -> None:
        """git_config: the learners' global git config (GIT_CONFIG_GLOBAL)."""
        public, proxy_api, hub_api = _free_ports(3)
        self.url = f"http://127.0.0.1:{public}"
        self.conf.parent.mkdir(parents=True)
        self.conf.write_text(
            "c = get_config()  # noqa: F821\n"
            f"load_subconfig({str(CONFIG)!r})  # noqa: F821\n"
            f"c.JupyterHub.bind_url = {self.url!r}\n"
            f"c.JupyterHub.hub_bind_url = 'http://127.0.0.1:{hub_api}'\n"
            f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{proxy_api}'\n"
            f"c.JupyterHub.services = [{{'name': 'room-test', 'api_token': {self.token!r}}}]\n"
            "c.JupyterHub.load_roles = [{'name': 'room-test', 'services': ['room-test'], "
            f"'scopes': {SERVICE_SCOPES!r}}}]\n"
            f"c.Spawner.environment = dict(c.Spawner.environment, {MARKER_VAR}={self.marker!r}, "
            f"GIT_CONFIG_GLOBAL={str(git_config)!r})\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOPKATA_", "JUPYTERHUB_"))}
        env.update(LOOPKATA_HUB_PASSWORD=secrets.token_hex(8), LOOPKATA_HUB_DIR=str(self.state),
                   **{MARKER_VAR: self.marker})
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [str(Path(sys.executable).parent / "jupyterhub"), "-f", str(self.conf)],
                cwd=self.conf.parent, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)

    def wait_up(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"The hub exited with status {self.proc.returncode} before answering; "
                            f"its log ends:\n{self.log_tail()}", pytrace=False)
            try:
                if httpx.get(f"{self.url}/hub/api", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        pytest.fail(f"The hub did not answer {self.url}/hub/api in time; its log ends:\n{self.log_tail()}",
                    pytrace=False)

    # --- stopping ---------------------------------------------------------------------------

    def processes(self) -> list[str]:
        """Every live process of this room: its marker in the environment, or the config in argv."""
        found = []
        needle, conf = f"{MARKER_VAR}={self.marker}".encode(), str(self.conf).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                stat = (entry / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] == "Z":
                    continue
                environ = (entry / "environ").read_bytes().split(b"\0")
                argv = (entry / "cmdline").read_bytes()
            except (OSError, IndexError):
                continue
            if needle in environ or conf in argv:
                command = argv.replace(b"\0", b" ").decode(errors="replace").strip()
                found.append(f"{entry.name} {command}")
        return found

    def stop(self) -> list[str]:
        """Stop every server through the hub, then the hub; return what was still running (and kill it)."""
        if self.stopped or self.proc is None:
            return []
        self.stopped = True
        if self.proc.poll() is None and self.spawned:
            headers = {"Authorization": f"token {self.token}"}
            try:
                with httpx.Client(base_url=self.url, headers=headers, timeout=10) as api:
                    # The hub answers each DELETE once that server has stopped: send them all at once.
                    with ThreadPoolExecutor(len(self.spawned)) as pool:
                        list(pool.map(lambda user: api.delete(f"/hub/api/users/{user}/server"), self.spawned))
                    until = time.monotonic() + 10
                    pending = set(self.spawned)
                    while pending and time.monotonic() < until:
                        for user in list(pending):
                            r = api.get(f"/hub/api/users/{user}")
                            if r.status_code != 200 or not r.json().get("servers"):
                                pending.discard(user)
                        time.sleep(0.1)
            except httpx.HTTPError:
                pass  # the hub is gone or stuck: the signals below and the sweep still run
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        left = []
        until = time.monotonic() + 3  # a process exiting on its own needs a moment to disappear
        while time.monotonic() < until:
            left = self.processes()
            if not left:
                break
            time.sleep(0.1)
        for line in left:  # each carries this room's marker: ours to kill
            try:
                os.kill(int(line.split()[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass
        return left


@pytest.fixture
def open_tmp():
    """A temporary folder every uid may walk through (pytest's own is closed to other users)."""
    folder = Path(tempfile.mkdtemp(prefix="loopkata-hub-test-")).resolve()
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def room(tmp_path, open_tmp):
    missing = _missing_tools()
    if missing:
        pytest.fail(missing, pytrace=False)
    room = Room(tmp_path, open_tmp)
    try:
        yield room
    finally:
        room.stop()


def _uid(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _collection(open_tmp: Path) -> tuple[Path, str, Path]:
    """A clone of this project on a branch of its own, readable by every learner: what they pull;
    and a git config for the learners that trusts it.

    git refuses a repository another user owns ("dubious ownership"); a room pulls over https
    and never meets that.
    """
    clone = open_tmp / "collection"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True, timeout=30)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "-B", "workshop"], check=True, timeout=10)
    git_config = open_tmp / "gitconfig"
    git_config.write_text(f"[safe]\n\tdirectory = {clone / '.git'}\n")
    git_config.chmod(0o644)
    return clone, "workshop", git_config


class Learner:
    def __init__(self, room: Room, http: httpx.AsyncClient, name: str, token: str):
        self.room, self.http, self.name = room, http, name
        self.headers = {"Authorization": f"token {token}"}
        self.base = f"/user/{name}"

    async def pull(self, repo: str, branch: str) -> list[dict]:
        """GET git-pull/api: nbgitpuller's event stream, until it finishes or fails."""
        events = []
        params = {"repo": repo, "branch": branch, "targetpath": FOLDER}
        async with self.http.stream("GET", f"{self.base}/git-pull/api", params=params,
                                    headers=self.headers) as r:
            assert r.status_code == 200, f"{self.name}: git-pull answered {r.status_code}"
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    events.append(json.loads(line[5:]))
                    if events[-1].get("phase") in ("finished", "error"):
                        break
        return events

    async def save_reference_fix(self) -> None:
        """Through the contents API, as the editor would: the solution's text over the kata."""
        r = await self.http.get(f"{self.base}/api/contents/{FOLDER}/solutions/{KATA_FILE}",
                                params={"type": "file", "format": "text", "content": "1"}, headers=self.headers)
        assert r.status_code == 200, f"{self.name}: reading the solution answered {r.status_code}: {r.text}"
        r = await self.http.put(f"{self.base}/api/contents/{FOLDER}/katas/{KATA_FILE}", headers=self.headers,
                                json={"type": "file", "format": "text", "content": r.json()["content"]})
        assert r.status_code in (200, 201), f"{self.name}: saving the kata answered {r.status_code}: {r.text}"

    async def check(self) -> int:
        """Run `loopkata check KATA --json` in a terminal of the learner's server; its exit status."""
        copy = f"$HOME/{FOLDER}"
        seen = await self.terminal(
            f"cd {copy} && LOOPKATA_ROOT={copy} LOOPKATA_STATE={copy}/.loopkata "
            f"loopkata check {KATA} --json > $HOME/check.json 2> $HOME/check.err; echo @@rc=$?@@",
            r"@@rc=(\d+)@@")  # the echoed command shows $?, not a number
        return int(seen[0])

    async def trespass(self, secret: Path, other_home: Path) -> dict[str, str]:
        """From a terminal: the learner's uid, and the exit status of reading the hub's cookie
        secret and of listing another learner's home."""
        seen = await self.terminal(
            f"cat {secret} > /dev/null 2>&1; s=$?; ls {other_home} > /dev/null 2>&1; o=$?; "
            "echo @@uid=$(id -u),secret=$s,other=$o@@",
            r"@@uid=(\d+),secret=(\d+),other=(\d+)@@")
        return dict(zip(("uid", "secret", "other"), seen))

    async def terminal(self, command: str, until: str) -> tuple[str, ...]:
        """Type command in a new terminal of the learner's server; the groups of `until` once it shows."""
        r = await self.http.post(f"{self.base}/api/terminals", headers=self.headers, json={})
        assert r.status_code == 200, f"{self.name}: opening a terminal answered {r.status_code}: {r.text}"
        term = r.json()["name"]
        ws = await websocket_connect(HTTPRequest(
            f"{self.room.url.replace('http', 'ws', 1)}{self.base}/terminals/websocket/{term}",
            headers=self.headers))
        ws.write_message(json.dumps(["stdin", command + "\r"]))
        seen = ""
        try:
            while True:
                msg = await ws.read_message()
                assert msg is not None, f"{self.name}: the terminal closed; it showed:\n{seen[-2000:]}"
                kind, *rest = json.loads(msg)
                if kind == "stdout":
                    seen += rest[0]
                    found = re.search(until, seen)
                    if found:
                        return found.groups()
        finally:
            ws.close()
            await self.http.delete(f"{self.base}/api/terminals/{term}", headers=self.headers)


async def _workshop(room: Room, repo: str, branch: str, times: dict) -> dict[str, int]:
    service = {"Authorization": f"token {room.token}"}
    async with httpx.AsyncClient(base_url=room.url, timeout=30) as http:
        r = await http.post("/hub/api/users", json={"usernames": list(USERS)}, headers=service)
        assert r.status_code == 201, f"creating users answered {r.status_code}: {r.text}"
        learners = {}
        for name in USERS:
            r = await http.post(f"/hub/api/users/{name}/tokens", headers=service,
                                json={"note": "workshop hub test", "expires_in": 600})
            assert r.status_code == 201, f"a token for {name} answered {r.status_code}: {r.text}"
            learners[name] = Learner(room, http, name, r.json()["token"])

        async def spawned(name: str) -> str:
            """'' once the server is up, else why not."""
            r = await http.post(f"/hub/api/users/{name}/server", headers=service)
            if r.status_code not in (201, 202):
                return f"starting {name}'s server answered {r.status_code}: {r.text}"
            while True:
                r = await http.get(f"/hub/api/users/{name}", headers=service)
                server = r.json().get("servers", {}).get("")
                if server and server.get("ready"):
                    return ""
                if not server:
                    return f"{name}'s server failed to start; the hub log ends:\n{room.log_tail()}"
                await asyncio.sleep(0.2)

        async def ready(name: str) -> None:
            # The hub answers this POST only once the server is up or after its slow_spawn_timeout,
            # so the three go out at once.
            room.spawned.append(name)
            taken = room.ports_taken()
            failed = await spawned(name)
            # The spawner picks a free port, which another process can bind before the server does
            # ("port N is not available"): as a learner would, start it once more; nothing else is retried.
            if failed and room.ports_taken() > taken:
                failed = await spawned(name)
            assert not failed, failed
            r = await http.get(f"/user/{name}/api/status", headers=learners[name].headers)
            assert r.status_code == 200, f"{name}'s server answered {r.status_code} through the proxy"

        t = time.monotonic()
        await asyncio.gather(*(ready(n) for n in USERS))
        times["servers ready"] = time.monotonic() - t

        t = time.monotonic()
        pulls = await asyncio.gather(*(learners[n].pull(repo, branch) for n in USERS))
        times["pull"] = time.monotonic() - t
        for name, events in zip(USERS, pulls):
            assert events and events[-1] == {"phase": "finished"}, \
                f"{name}'s pull did not finish: {events[-3:]}"
            assert (room.home(name) / FOLDER / "katas" / "catalogue.toml").is_file(), \
                f"{name}'s pull finished but {room.home(name) / FOLDER} holds no collection"

        t = time.monotonic()
        await learners[SOLVER].save_reference_fix()
        codes = await asyncio.gather(*(learners[n].check() for n in USERS))
        times["checks"] = time.monotonic() - t

        if AS_ROOT:
            intruder, victim = USERS[1], SOLVER
            tried = await learners[intruder].trespass(room.secret(), room.home(victim))
            assert tried["uid"] != "0" and tried["secret"] != "0" and tried["other"] != "0", (
                f"{intruder}'s terminal should run as a uid other than root and fail to read the hub's "
                f"cookie secret and {victim}'s home; it ran as uid {tried['uid']}, reading the secret "
                f"ended {tried['secret']} and listing the home ended {tried['other']} (0 is success)")
        return dict(zip(USERS, codes))


def test_a_workshop_room_of_three_learners_on_a_real_hub(room, open_tmp):
    """three learners on a real JupyterHub pull the collection, and each check grades their own copy"""
    begin = time.monotonic()
    deadline = begin + DEADLINE
    times: dict[str, float] = {}
    repo, branch, git_config = _collection(open_tmp)
    times["clone"] = time.monotonic() - begin

    t = time.monotonic()
    room.start(git_config)
    room.wait_up(deadline)
    times["hub up"] = time.monotonic() - t

    phase_deadline = deadline - time.monotonic() - 15  # keep time to stop everything
    try:
        codes = asyncio.run(asyncio.wait_for(_workshop(room, f"file://{repo}", branch, times), phase_deadline))
    except TimeoutError:
        stuck = next((p for p in ("servers ready", "pull", "checks") if p not in times), "the checks")
        pytest.fail(f"The room did not get through {stuck} within {DEADLINE:.0f} s, so it counts as hung; "
                    f"the hub log ends:\n{room.log_tail()}", pytrace=False)

    running = room.processes()  # the sweep must see the room before it can vouch that nothing is left
    servers = [p for p in running if "jupyterhub-singleuser" in p]
    assert len(servers) == len(USERS) and any("configurable-http-proxy" in p for p in running), \
        "the process sweep should see the proxy and one server per learner; it saw:\n" + "\n".join(running)
    if AS_ROOT:
        uids = [_uid(int(p.split()[0])) for p in servers]
        assert None not in uids and 0 not in uids and len(set(uids)) == len(USERS), \
            f"started as root, the hub should run each learner's server as a uid of its own, not root; their uids: {uids}"

    t = time.monotonic()
    left = room.stop()
    times["stop"] = time.monotonic() - t
    times["total"] = time.monotonic() - begin
    print("\nworkshop hub phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()))

    assert not left, "processes of the hub or its servers were still running after it stopped:\n" + "\n".join(left)

    for name, code in codes.items():
        home = room.home(name)
        report = (home / "check.json").read_text() if (home / "check.json").exists() else ""
        errors = (home / "check.err").read_text() if (home / "check.err").exists() else ""
        assert report, f"{name}'s check wrote no report (exit status {code}); stderr: {errors[-1500:]}"
        verdict = json.loads(report)["verdict"]
        if name == SOLVER:
            assert (code, verdict) == (0, "passed"), \
                f"{name} saved the reference fix, so the check should pass; it ended {code} with {verdict!r}: {errors[-1500:]}"
        else:
            assert code == 1 and verdict != "passed", \
                f"{name} kept the starter, so the check should fail; it ended {code} with {verdict!r}: {errors[-1500:]}"

        progress = home / FOLDER / ".loopkata" / "progress.json"
        assert progress.is_file(), f"{name}'s check recorded no progress in {progress}"
        entry = json.loads(progress.read_text()).get(KATA, {})
        expected = "solved" if name == SOLVER else "attempted"
        assert (entry.get("status"), entry.get("checks")) == (expected, 1), \
            f"{name}'s own progress file should show one check, {expected}; it holds {entry}"


# --- the config alone ---------------------------------------------------------------------------

def _load(monkeypatch, state: Path, **env: str):
    """docs/workshop/jupyterhub_config.py as JupyterHub loads it, with only these LOOPKATA_HUB_ variables."""
    for name in list(os.environ):
        if name.startswith("LOOPKATA_HUB_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LOOPKATA_HUB_DIR", str(state))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return PyFileConfigLoader(CONFIG.name, str(CONFIG.parent)).load_config()


def _refusal(monkeypatch, state: Path, **env: str) -> str:
    with pytest.raises(SystemExit) as stopped:
        _load(monkeypatch, state, **env)
    return str(stopped.value.code)


def test_the_trial_hub_listens_on_this_machine_only_unless_told(monkeypatch, tmp_path, capsys):
    """the trial hub listens on 127.0.0.1 unless told, and warns when told to speak plain HTTP to a network"""
    config = _load(monkeypatch, tmp_path / "room", LOOPKATA_HUB_PASSWORD="a-password")
    assert config.JupyterHub.bind_url == "http://127.0.0.1:8000", \
        f"with no LOOPKATA_HUB_IP the hub should listen on http://127.0.0.1:8000; it listens on {config.JupyterHub.bind_url}"
    assert "WARNING" not in capsys.readouterr().err, "on 127.0.0.1 the hub should not warn about plain HTTP"
    config = _load(monkeypatch, tmp_path / "room", LOOPKATA_HUB_PASSWORD="a-password", LOOPKATA_HUB_IP="0.0.0.0")
    warned = capsys.readouterr().err
    assert config.JupyterHub.bind_url == "http://0.0.0.0:8000" and "WARNING: plain HTTP" in warned, \
        ("with LOOPKATA_HUB_IP=0.0.0.0 and no certificate the hub should listen on http://0.0.0.0:8000 and warn "
         f"about plain HTTP; it listens on {config.JupyterHub.bind_url} and printed {warned!r}")
    config = _load(monkeypatch, tmp_path / "room", LOOPKATA_HUB_PASSWORD="a-password",
                   LOOPKATA_HUB_IP="0.0.0.0", LOOPKATA_HUB_PORT="8443",
                   LOOPKATA_HUB_SSL_CERT="/etc/hub.crt", LOOPKATA_HUB_SSL_KEY="/etc/hub.key")
    assert (config.JupyterHub.bind_url, config.JupyterHub.ssl_cert, config.JupyterHub.ssl_key) == \
        ("https://0.0.0.0:8443", "/etc/hub.crt", "/etc/hub.key"), \
        ("with LOOPKATA_HUB_IP=0.0.0.0, port 8443 and a certificate the hub should serve "
         f"https://0.0.0.0:8443 with it; it serves {config.JupyterHub.bind_url} with "
         f"{config.JupyterHub.ssl_cert!r} and {config.JupyterHub.ssl_key!r}")


def test_the_hubs_secrets_are_in_a_folder_only_its_user_opens(monkeypatch, tmp_path):
    """the hub's database and cookie secret are in a folder no learner can open"""
    state = tmp_path / "room"
    config = _load(monkeypatch, state, LOOPKATA_HUB_PASSWORD="a-password")
    private = state / "hub"
    mode = stat.S_IMODE(private.stat().st_mode)
    assert mode == 0o700, f"{private} should be open to the hub's user alone (0700); it is {oct(mode)}"
    for setting in (config.JupyterHub.cookie_secret_file, config.JupyterHub.db_url.removeprefix("sqlite:///")):
        assert Path(setting).parent == private, f"{setting} should be in {private}"


@pytest.mark.skipif(not AS_ROOT, reason="started by any other user, every learner runs as that user")
def test_started_as_root_no_learner_gets_root(monkeypatch, tmp_path):
    """started as root, the hub runs learners as uids of their own and never allows root servers"""
    config = _load(monkeypatch, tmp_path / "room", LOOPKATA_HUB_PASSWORD="a-password")
    spawner = config.JupyterHub.spawner_class
    assert getattr(spawner, "__name__", spawner) == "LearnerUidSpawner", \
        f"as root the hub should use LearnerUidSpawner; it uses {spawner}"
    assert not any("allow-root" in arg for arg in config.Spawner.args), \
        f"no learner's server may be allowed to run as root; its arguments are {config.Spawner.args}"


def test_started_by_another_user_the_hub_keeps_its_folders_to_that_user(monkeypatch, tmp_path):
    """started by any other user than root, learners run as that user, and only that user opens the hub's folders"""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # what the config asks to decide who it runs as
    state = tmp_path / "room"
    config = _load(monkeypatch, state, LOOPKATA_HUB_PASSWORD="a-password")
    assert config.JupyterHub.spawner_class == "simple", \
        f"not as root, the hub should run every learner as its own user (simple); it uses {config.JupyterHub.spawner_class}"
    modes = {folder.name: oct(stat.S_IMODE(folder.stat().st_mode)) for folder in (state, state / "hub", state / "homes")}
    assert set(modes.values()) == {"0o700"}, f"every folder of the hub should be 0700 for its user alone; they are {modes}"


def test_a_shared_password_must_be_set_and_long_enough(monkeypatch, tmp_path):
    """the hub refuses to start with no shared password, a short one, or an unknown way to log in"""
    for env, expected in (({}, "LOOPKATA_HUB_PASSWORD"), ({"LOOPKATA_HUB_PASSWORD": "short"}, "8 characters"),
                          ({"LOOPKATA_HUB_AUTH": "ldap"}, "'shared'")):
        said = _refusal(monkeypatch, tmp_path / "room", **env)
        assert said.startswith("loopkata hub:") and expected in said and "\n" not in said, \
            f"with {env or 'no variable'} the hub should stop with one line naming {expected!r}; it said: {said!r}"


def test_per_learner_passwords_load(monkeypatch, tmp_path):
    """LOOPKATA_HUB_AUTH=firstuse gives each learner a password of their own, kept in the hub's private folder"""
    state = tmp_path / "room"
    config = _load(monkeypatch, state, LOOPKATA_HUB_AUTH="firstuse")
    authenticator = import_item(config.JupyterHub.authenticator_class)(config=config)
    assert type(authenticator).__name__ == "FirstUseAuthenticator", \
        f"LOOPKATA_HUB_AUTH=firstuse should load FirstUseAuthenticator; it loaded {type(authenticator).__name__}"
    assert Path(authenticator.dbm_path).parent == state / "hub" and authenticator.create_users, \
        (f"learners' password hashes should be kept in {state / 'hub'} and learners created at first login; "
         f"dbm_path is {authenticator.dbm_path}, create_users {authenticator.create_users}")
