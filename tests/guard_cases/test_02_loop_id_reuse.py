"""The receipt classifier (kata 02), tested as its team would: warm invocations against a stand-in tool server.

A Lambda container calls `handler` again and again in one process; each call
is one asyncio.run, on a new event loop.
"""
import pytest

from conftest import JSONService, http_server

# The bug: get_session() keeps one session in a module global and rebuilds it when id(loop) changes; no
# session is ever closed, and a new loop that gets a dead loop's id is handed the dead loop's session.
BUG = [("02_loop_id_reuse.py", "get_session")]

CATEGORIES = {"coffee": "meals", "taxi": "travel", "paper": "office"}


class ToolServer(JSONService):
    def answer(self, request):
        return {"category": CATEGORIES.get(request["text"], "other")}


@pytest.fixture
def tool_url():
    with http_server(ToolServer) as url:
        yield url


def test_a_warm_container_classifies_every_receipt(kata, tool_url):
    """Four invocations in one process, as a warm container serves them: each classifies its receipt's items."""
    for _ in range(4):
        answer = kata.handler({"tool_url": tool_url, "items": ["coffee", "taxi", "paper"]})
        assert answer == {"categories": ["meals", "travel", "office"]}
