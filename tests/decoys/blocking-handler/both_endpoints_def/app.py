"""The drafts service: a drafting endpoint, a health check and the access log."""
from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel

from .access_log import log_requests
from .client import DraftModel

# An async def endpoint runs on the event loop, where every request of this worker
# is served. Each one listed here was read by someone who asked "does anything in
# it block?" and found that it only awaits. CI walks the app's routes and fails on
# an async def endpoint that is not listed.
REVIEWED_ASYNC: set[str] = set()  # no async def endpoint left: nothing to review

router = APIRouter()


class DraftRequest(BaseModel):
    prompt: str


# A plain def: FastAPI runs it on a worker thread of its threadpool (40 threads by
# default), so while the model writes, the event loop goes on serving /health and
# every other request. As an async def, model.complete() ran on the event loop
# itself, and the whole worker waited for the model.
@router.post("/drafts")
def create_draft(body: DraftRequest, request: Request):
    model: DraftModel = request.app.state.model
    text = model.complete(body.prompt)
    return {"draft": text}


def create_app(model_url: str) -> FastAPI:
    """The service, drafting with the model whose HTTP API is at `model_url`."""
    app = FastAPI(title="drafts")
    app.state.model = DraftModel(model_url)
    app.middleware("http")(log_requests)

    @app.get("/health")
    def health():
        return {"status": "ok"}

    app.include_router(router)
    return app
