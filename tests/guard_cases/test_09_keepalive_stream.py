"""The draft stream (kata 09), tested as its team would: the SSE endpoint read through the app, with a quick model.

The model is made fast (MODEL.seconds), and the keepalive interval shorter
than a section takes, as the load balancer's 350 s are shorter than a slow section.
"""
from fastapi.testclient import TestClient

from conftest import submodule

# The bug: with_keepalive waits for each step of the generator with asyncio.wait_for, whose timeout
# cancels the step, and a cancelled step closes the generator: the stream ends after one keepalive.
BUG = [("keepalive.py", "with_keepalive")]


def test_every_section_of_a_draft_is_streamed(kata, monkeypatch):
    """GET /drafts/d1/events streams one event per section, in order, with keepalives between them."""
    drafts = submodule(kata, "drafts")
    monkeypatch.setattr(drafts.MODEL, "seconds", 0.03)
    client = TestClient(submodule(kata, "app").create_app(keepalive_seconds=0.02))
    with client.stream("GET", "/drafts/d1/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        body = response.read().decode()
    ids = [line for line in body.splitlines() if line.startswith("id: ")]
    assert ids == [f"id: {n}" for n in range(len(drafts.SECTIONS))], body
    assert ": keepalive" in body


def test_a_reconnecting_browser_resumes_after_the_last_section_it_saw(kata, monkeypatch):
    """With Last-Event-ID: 2, the stream starts at section 3."""
    drafts = submodule(kata, "drafts")
    monkeypatch.setattr(drafts.MODEL, "seconds", 0.01)
    client = TestClient(submodule(kata, "app").create_app(keepalive_seconds=1.0))
    body = client.get("/drafts/d1/events", headers={"Last-Event-ID": "2"}).text
    assert [line for line in body.splitlines() if line.startswith("id: ")] == ["id: 3", "id: 4"]
