"""Draft service: streams a long document to the browser as Server-Sent Events.

`GET /drafts/{draft_id}/events` (`app.py`) answers with `text/event-stream`:
one event per finished section of the draft, with an `id:` line so that a
browser that reconnects can resume after the last section it saw. The
sections come from `drafts.draft_events()`, an async generator: the model
writes a section, then post-processing checks its citations. Either step can
take minutes, and sends nothing while it runs.

The load balancer in front of the service drops a connection that has sent
nothing for 350 s. So `keepalive.with_keepalive()` wraps the generator and
sends an SSE comment, `: keepalive`, whenever the generator has been quiet for
`KEEPALIVE_SECONDS` (25 s). Since it shipped, a long draft stops right after
the first keepalive: the browser gets one comment, then the end of the
stream, and no section at all. Nothing is logged.

Your task, in `keepalive.py` (and `app.py` if you need it):
- every section arrives, in order, and the stream ends only after the last;
- while the generator is quiet, a keepalive goes out at least every
  interval: the stream is never silent for much longer than that; and one
  per interval, no more (never a flood of them);
- no step of the generator is started twice (each one is a model call);
- a step that raises fails the stream: the server logs its exception with
  the traceback, and the response is cut, not ended as if the draft were
  complete;
- when the client goes away mid-stream, the generator is closed (its
  `finally` runs), nothing it started keeps running, and the server logs no
  error.

The hidden tests serve `app.create_app(events, keepalive_seconds)` with
uvicorn and read the stream over HTTP, with an `events(draft_id, start)`
generator of their own that counts its steps: keep those names and that
signature.

Run `loopkata check keepalive-stream` to grade your fix.
"""
