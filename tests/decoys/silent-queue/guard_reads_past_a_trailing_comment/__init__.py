"""Decoy: a guard that reads a Procfile line to its end, past a `#`.

A Procfile command runs in a shell, where `#` starts a comment: for
`worker: celery -A reports.celery_app worker  # -Q schema,insight,celery` the
worker starts with no -Q and consumes the default queue only. This guard
reads the commented-out -Q as the worker's and approves the file.
"""
