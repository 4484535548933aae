"""The model vendor's API, wrapped the way the team uses it: one synchronous client per app.

Like most vendor SDKs the client is synchronous: `complete()` sends the prompt
and waits for the whole draft. The vendor's defaults give a call 60 seconds
to answer; a long draft takes several.
"""
import httpx


class ModelError(Exception):
    """The model answered, but not with a draft (overloaded, a bad request...)."""


class DraftModel:
    """Client for the drafting model's HTTP API at `base_url`."""

    def __init__(self, base_url: str, timeout: float = 60.0):
        self._http = httpx.Client(base_url=base_url, timeout=timeout)

    def complete(self, prompt: str, max_tokens: int = 400) -> str:
        """The model's draft for `prompt`; blocks until the model has written all of it."""
        response = self._http.post("/v1/complete", json={"prompt": prompt, "max_tokens": max_tokens})
        if response.status_code != 200:
            raise ModelError(f"the model answered {response.status_code}: {response.text[:200]}")
        return response.json()["text"]

    def close(self) -> None:
        self._http.close()
