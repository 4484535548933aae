# JupyterHub for a Loop Katas workshop room, on one machine (a trial or a small room).
#
#   export LOOPKATA_HUB_PASSWORD='the password on the whiteboard'
#   .venv/bin/jupyterhub -f docs/workshop/jupyterhub_config.py
#
# Then hand out `loopkata workshop link http://THIS-MACHINE:8000`.
# Environment:
#   LOOPKATA_HUB_PASSWORD  the one password every learner types (required)
#   LOOPKATA_HUB_DIR       the hub's database, cookie secret and learners' homes
#                          (default ~/loopkata-hub)
#
# For The Littlest JupyterHub or Zero to JupyterHub, do not use this file:
# docs/workshop/deploy.md gives their settings. In short:
#   TLJH  tljh-config sets the authenticator (auth.type dummy,
#         auth.DummyAuthenticator.password); keep TLJH's SystemdSpawner, which
#         gives every learner a Unix user, a home and a memory limit; the
#         default app is already JupyterLab.
#   Z2JH  the same settings go under hub.config in the Helm values; KubeSpawner
#         runs each learner in a pod of the image built from binder/
#         (singleuser.image), and singleuser.defaultUrl replaces default_url.
import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821  (provided by JupyterHub when it loads this file)

password = os.environ.get("LOOPKATA_HUB_PASSWORD", "")
if not password:
    sys.exit("Set LOOPKATA_HUB_PASSWORD to the password learners will type, then start the hub again.")
state = Path(os.environ.get("LOOPKATA_HUB_DIR") or "~/loopkata-hub").expanduser().resolve()
state.mkdir(parents=True, exist_ok=True)

# Its own folder, so the hub never writes its database into whatever folder it was started from.
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = str(state / "jupyterhub-proxy.pid")

# Learners reach it from their laptops; bind to 127.0.0.1 to try it alone.
c.JupyterHub.bind_url = "http://:8000"

# One shared password, any user name: nothing to set up per learner.
# DummyAuthenticator.password logs a deprecation warning since JupyterHub 5.3
# (SharedPasswordAuthenticator is its successor); TLJH's auth.type dummy uses it too.
# No admin_users: with a shared password, anyone could log in under an admin's name.
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = password
c.Authenticator.allow_all = True

# Every learner's server runs as the hub's own Unix user, in a home of its own.
# Enough for a trial; it isolates nothing (TLJH does).
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = str(state / "homes" / "{username}")

# The hub's own venv holds jupyterhub-singleuser, JupyterLab, nbgitpuller and loopkata,
# whether or not it was activated before starting the hub.
venv_bin = Path(sys.executable).parent
c.Spawner.cmd = [str(venv_bin / "jupyterhub-singleuser")]
c.Spawner.environment = {"PATH": os.pathsep.join([str(venv_bin), os.environ.get("PATH", "")])}
c.Spawner.default_url = "/lab"
# A login shell in the terminal would reset PATH from /etc/profile and lose `loopkata`.
args = ['--ServerApp.terminado_settings={"shell_command": ["/bin/bash"]}']
if os.geteuid() == 0:
    args.append("--allow-root")  # containers and workshop VMs often run as root
c.Spawner.args = args

# A whole room logs in within a minute; servers start slower than the defaults expect.
c.Spawner.http_timeout = 60
c.Spawner.start_timeout = 120

# configurable-http-proxy from `make` ($(VENV)/chp) if there, else the one on PATH.
chp = Path(sys.prefix) / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"
if chp.exists():
    c.ConfigurableHTTPProxy.command = [str(chp)]
