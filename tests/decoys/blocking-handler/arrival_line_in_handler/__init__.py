"""Decoy: the arrival line written by the endpoint, as the first thing it does, and the completion line in the middleware's finally: a request still waiting for a thread has no line at all.

A plain def endpoint runs only once a thread of FastAPI's threadpool is free
(40 threads by default). While the model holds every one of them, the next
request waits in the queue for a thread: it has arrived, but its endpoint has
not started, so it has written nothing. In the log it looks exactly like a
request that never arrived, which is the incident all over again, just with
more requests in flight. The arrival line must be written before the request
waits for anything, on the event loop, as it comes in.
"""
