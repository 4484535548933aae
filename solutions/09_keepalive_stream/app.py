"""The draft service: one Server-Sent Events endpoint that streams a draft, section by section."""
from fastapi import FastAPI, Header
from fastapi.responses import StreamingResponse

from . import drafts
from .keepalive import with_keepalive

# The load balancer drops a connection after 350 s of silence: a keepalive every 25 s stays well under it.
KEEPALIVE_SECONDS = 25.0


def create_app(events=drafts.draft_events, keepalive_seconds: float = KEEPALIVE_SECONDS) -> FastAPI:
    """The service. `events(draft_id, start)` is an async generator of SSE events, from section `start` on."""
    app = FastAPI(title="drafts")

    @app.get("/drafts/{draft_id}/events")
    async def draft_stream(draft_id: str, last_event_id: int | None = Header(default=None)):
        start = 0 if last_event_id is None else last_event_id + 1  # a browser that reconnects resumes
        stream = with_keepalive(events(draft_id, start), keepalive_seconds)
        return StreamingResponse(
            stream,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},  # no proxy may buffer it
        )

    return app
