"""The work the API hands to workers. Names are explicit: routes match them."""
import time

from .celery_app import app


@app.task(name="schema.sync_source", queue="celery")  # the queue the worker reads
def sync_source(source_id: int) -> dict:
    """Read a data source's tables and columns, so questions can be asked about it."""
    return {"source": source_id, "tables": 3, "columns": 17}


@app.task(name="insight.answer", queue="celery")
def answer_question(question: str, think_seconds: float = 0.0) -> str:
    """Answer a question about a source (the model call is the slow part)."""
    time.sleep(think_seconds)
    return f"answer to {question!r}"


@app.task(name="digest.send")
def send_digest(user: str) -> str:
    """Mail a user the week's answers."""
    return f"digest sent to {user}"
