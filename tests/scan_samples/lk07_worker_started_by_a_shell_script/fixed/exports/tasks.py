"""Exports go to their own queue, so that a big export never delays the small tasks."""
from celery import Celery

app = Celery("exports", broker="redis://broker:6379/0")
app.conf.task_routes = {"exports.tasks.export_*": {"queue": "exports"}}


@app.task
def export_month(month: str) -> str:
    return month
