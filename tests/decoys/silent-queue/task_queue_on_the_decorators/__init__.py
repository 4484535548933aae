"""Decoy: queue="celery" on the schema and insight tasks' decorators (routes left alone), with the deploy files fixed.

A task's own queue= overrides its route wherever the task itself is loaded:
the API's .delay() now sends every schema sync to 'celery', behind the slow
questions, while the same task sent by name from an app that has not loaded
it still goes to 'schema', where the schema worker waits for nothing.
"""
