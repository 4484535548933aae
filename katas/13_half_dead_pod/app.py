"""The exports service, as one uvicorn worker process serves it."""
import csv
import io
import os
from contextlib import asynccontextmanager

from fastapi import FastAPI
from pydantic import BaseModel

from . import watchdog

DEFAULT_FREEZE_LIMIT = 30.0  # seconds


def freeze_limit() -> float:
    """How long this worker's event loop may stay frozen: $WORKER_FREEZE_LIMIT seconds, or the default."""
    try:
        return float(os.environ.get("WORKER_FREEZE_LIMIT") or DEFAULT_FREEZE_LIMIT)
    except ValueError:
        return DEFAULT_FREEZE_LIMIT


class ExportRequest(BaseModel):
    rows: list[dict[str, str]]


def create_app() -> FastAPI:
    """The app each worker serves (`uvicorn --factory ...:create_app --workers 2`)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.watchdog = watchdog.start(freeze_limit())  # one per worker, on its own event loop
        yield

    app = FastAPI(title="exports", lifespan=lifespan)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.post("/exports")
    async def create_export(body: ExportRequest):
        # Renders on the event loop: a big export holds this worker's loop until it is done.
        out = io.StringIO()
        fields = sorted({key for row in body.rows for key in row})
        writer = csv.DictWriter(out, fieldnames=fields)
        writer.writeheader()
        writer.writerows(body.rows)
        return {"csv": out.getvalue()}

    return app
