"""Decoy: a guard that reads every Procfile line with a colon as `name: command`, comments included.

`#schema_worker: celery ... worker -Q schema` is a comment: honcho and the
platforms skip it and start nothing. This guard splits it at the colon like
any other line, counts a schema worker that never runs, and approves a deploy
that leaves the schema queue without a consumer.
"""
