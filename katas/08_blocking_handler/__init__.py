"""Drafts service: an API that asks a language model for a first draft of a reply.

`app.py` is the FastAPI app: `POST /drafts` sends the prompt to the model and
returns its draft, `GET /health` is the liveness probe's endpoint. `client.py`
is the model vendor's client as the team wraps it: synchronous, like most
SDKs, and a call takes seconds. `access_log.py` writes the access log, one
line per request on the logger `drafts.access`, each naming the request's
X-Request-ID.

In production the model slowed down. While a draft was being written, the
worker answered nothing else, /health included: the liveness probe timed out
and the pod was restarted in the middle of the request. The access log had no
line for the request that hung, so the first reading was that it had never
arrived.

Your task:
- while slow model calls run, one or several at once, GET /health answers
  without waiting for them, each call still returns its draft, and calls
  made at the same time run at the same time;
- a request leaves a line in the access log as soon as it arrives, marked as
  in flight (it names no status yet), even while it waits for a free thread
  or for the rest of a body whose upload stalls, and a completion line naming
  its status when it ends, even when its handler raises (500): a request that
  hangs is then the one with an arrival line and no completion line;
- a handler's error still reaches the server's log with its traceback;
- every `async def` endpoint is one the team reviewed: listed in
  `app.REVIEWED_ASYNC` (reviewed: it only awaits, nothing in it blocks).

The hidden tests serve `app.create_app(model_url)` with uvicorn on 127.0.0.1
against a stand-in for the model's HTTP API, send X-Request-ID headers, and
read the logger `drafts.access` and the server's log: keep those names, the `/drafts` and
`/health` paths, the draft's JSON shape, and the request id in every line.

Run `loopkata check blocking-handler` to grade your fix.
"""
