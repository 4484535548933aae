"""Decoy: the arrival line written by a plain def dependency of the drafts router, the completion line in the middleware's finally: a request waiting for a free thread has no line.

FastAPI runs a plain def dependency the way it runs a plain def endpoint: on a
thread of its threadpool (40 threads by default). While the model holds every
thread, the next request waits in the queue for one before its dependency can
run, so it has arrived and written nothing: in the log it looks like a request
that never came. On a quiet machine with requests sent together, every
dependency may run before the slow calls take the threads, and the log looks
right; under load it does not. The arrival line must be written on the event
loop as the request comes in, before it waits for anything.
"""
