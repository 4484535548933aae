"""The reports API: start a report job, ask how it is doing, and a health check."""
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel

from . import jobs, tasks


class ReportRequest(BaseModel):
    customer: str


def create_app(warehouse_url: str) -> FastAPI:
    """The API, building reports from the warehouse whose HTTP API is at `warehouse_url`."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await jobs.drain()  # a deploy stops the server: let the jobs still running finish first

    app = FastAPI(title="reports", lifespan=lifespan)
    app.state.warehouse_url = warehouse_url

    @app.post("/reports", status_code=202)
    async def start_report(body: ReportRequest, request: Request):
        job_id = jobs.dispatch(tasks.build_report, request.app.state.warehouse_url, body.customer)
        return {"job_id": job_id}

    @app.get("/jobs/{job_id}")
    async def job_status(job_id: str):
        found = jobs.status(job_id)
        if found["state"] == "unknown":
            raise HTTPException(status_code=404, detail=f"no job {job_id}")
        return found

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    return app
