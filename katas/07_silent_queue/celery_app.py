"""The Celery app: its broker, its result backend, and which queue each kind of task goes to.

In production the broker is Redis (CELERY_BROKER_URL). Without one, the app
uses kombu's filesystem transport: messages are files in a folder, which is
all a laptop, a test or a notebook needs.
"""
import os
from pathlib import Path

from celery import Celery

DEFAULT_QUEUE = "celery"


def _local_folder() -> Path:
    folder = Path(os.environ.get("CELERY_BROKER_FOLDER", ".celery")).resolve()
    for sub in ("queue", "control", "results"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return folder


_broker = os.environ.get("CELERY_BROKER_URL", "filesystem://")
_folder = _local_folder() if _broker.startswith("filesystem://") else None
_backend = os.environ.get("CELERY_RESULT_BACKEND") or (f"file://{_folder / 'results'}" if _folder else None)

app = Celery("reports", broker=_broker, backend=_backend)
app.conf.update(
    task_default_queue=DEFAULT_QUEUE,
    # Each kind of work gets a queue of its own, so each can get workers of its own:
    # a burst of slow insight questions must not hold up the schema sync that every
    # question depends on.
    task_routes={
        "schema.*": {"queue": "schema"},
        "insight.*": {"queue": "insight"},
    },
    worker_hijack_root_logger=False,
)
if _folder is not None:
    app.conf.broker_transport_options = {
        "data_folder_in": str(_folder / "queue"),
        "data_folder_out": str(_folder / "queue"),
        "control_folder": str(_folder / "control"),
        "polling_interval": 0.1,
    }

from . import tasks  # noqa: E402,F401 - registers the tasks on the app
