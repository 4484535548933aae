"""The API: it queues the work and answers at once with a job id; GET /jobs/{id} reports progress."""
from fastapi import FastAPI

from .celery_app import app as celery_app
from .tasks import answer_question, sync_source

app = FastAPI(title="reports")


@app.post("/sources/{source_id}/sync")
def sync(source_id: int) -> dict:
    return {"job": sync_source.delay(source_id).id}


@app.post("/questions")
def ask(question: str) -> dict:
    return {"job": answer_question.delay(question).id}


@app.get("/jobs/{job_id}")
def job(job_id: str) -> dict:
    return {"job": job_id, "state": celery_app.AsyncResult(job_id).state}
