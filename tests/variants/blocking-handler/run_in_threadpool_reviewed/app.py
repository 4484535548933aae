"""The drafts service: a drafting endpoint, a health check and the access log."""
from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from .access_log import log_requests
from .client import DraftModel

# An async def endpoint runs on the event loop, where every request of this worker
# is served. Each one listed here was read by someone who asked "does anything in
# it block?" and found that it only awaits. CI walks the app's routes and fails on
# an async def endpoint that is not listed.
REVIEWED_ASYNC = {"/health", "/drafts"}

router = APIRouter()


class DraftRequest(BaseModel):
    prompt: str


@router.post("/drafts")
async def create_draft(body: DraftRequest, request: Request):
    model: DraftModel = request.app.state.model
    # The client is synchronous: its call waits on a thread of the threadpool, and this
    # coroutine only awaits it, so the event loop stays free meanwhile.
    text = await run_in_threadpool(model.complete, body.prompt)
    return {"draft": text}


def create_app(model_url: str) -> FastAPI:
    """The service, drafting with the model whose HTTP API is at `model_url`."""
    app = FastAPI(title="drafts")
    app.state.model = DraftModel(model_url)
    app.middleware("http")(log_requests)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    app.include_router(router)
    return app
