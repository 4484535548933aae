"""The drafts service (kata 08), tested as its team would: served by uvicorn, against a stand-in for the model's API.

The stand-in answers each completion after MODEL_SECONDS, as the real model
takes its time; the app is served on 127.0.0.1 from a thread of the test.
"""
import threading
import time

import httpx
import pytest
import uvicorn

from conftest import JSONService, http_server, submodule

# The bug: create_draft is an async def endpoint that calls the synchronous model client, so the model's
# slow answer holds the event loop and every other request of the worker (/health included) waits.
BUG = [("app.py", "create_draft")]

MODEL_SECONDS = 0.25


class ModelAPI(JSONService):
    def answer(self, request):
        time.sleep(MODEL_SECONDS)
        return {"text": f"Dear customer, about {request['prompt']!r}: thank you."}


@pytest.fixture
def model_url():
    with http_server(ModelAPI) as url:
        yield url


@pytest.fixture
def service(kata, model_url):
    """The app, served by uvicorn on 127.0.0.1 from a thread; an HTTP client for it."""
    server = uvicorn.Server(uvicorn.Config(submodule(kata, "app").create_app(model_url), host="127.0.0.1", port=0,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        yield client
    server.should_exit = True
    thread.join(10)


def test_health_answers_while_a_draft_is_written(service):
    """While the model writes a draft, GET /health answers ok; then POST /drafts answers with the draft."""
    answers = []
    drafting = threading.Thread(target=lambda: answers.append(
        service.post("/drafts", json={"prompt": "late delivery"}, headers={"X-Request-ID": "r1"})))
    drafting.start()
    time.sleep(0.05)
    assert service.get("/health", headers={"X-Request-ID": "h1"}).json() == {"status": "ok"}
    drafting.join()
    assert answers[0].status_code == 200
    assert answers[0].json() == {"draft": "Dear customer, about 'late delivery': thank you."}
