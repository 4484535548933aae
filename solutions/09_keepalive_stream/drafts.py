"""The draft pipeline: a long document, section by section, as Server-Sent Events.

`draft_events(draft_id, start)` yields one event per finished section, from
section `start` on. Each section takes two slow steps that send nothing while
they run: the model writes it, then post-processing checks its citations
against the sources. For a long draft either step can take minutes.
"""
import asyncio
import json

SECTIONS = ("Summary", "Background", "Findings", "Risks", "Recommendations")


class Model:
    """The model client, as the pipeline sees it: every call takes about `seconds`."""

    def __init__(self, seconds: float = 90.0):
        self.seconds = seconds

    async def write(self, draft_id: str, title: str) -> str:
        await asyncio.sleep(self.seconds)  # an HTTPS call to the model provider
        return f"{title} of draft {draft_id}, with citations [1] and [2]."

    async def check_citations(self, text: str) -> str:
        await asyncio.sleep(self.seconds)  # one model call per citation, against the sources
        return text


MODEL = Model()


def sse_event(number: int, data: dict) -> str:
    """One Server-Sent Event: its id (for resuming), a JSON payload, and the blank line that ends it."""
    return f"id: {number}\ndata: {json.dumps(data)}\n\n"


async def draft_events(draft_id: str, start: int = 0):
    """The events of draft `draft_id`, one per section, from section `start` on."""
    for number in range(start, len(SECTIONS)):
        text = await MODEL.write(draft_id, SECTIONS[number])
        text = await MODEL.check_citations(text)
        yield sse_event(number, {"section": number, "title": SECTIONS[number], "text": text})
