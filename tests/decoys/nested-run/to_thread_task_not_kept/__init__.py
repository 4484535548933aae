"""Decoy: run the job with asyncio.create_task(asyncio.to_thread(...)) and keep nothing: the job runs, but the runner has let go of it.

The loop holds tasks only weakly, and nothing else holds this one: it
survives only because the worker thread's future happens to lead back to it.
Nothing the runner owns knows that the job exists, so drain(), which the
app's shutdown awaits, returns at once while jobs still run: the server
reports itself stopped with reports half built.
"""
