"""The model vendor's API, wrapped the way the team uses it: one asynchronous client per app."""
import httpx


class ModelError(Exception):
    """The model answered, but not with a draft (overloaded, a bad request...)."""


class DraftModel:
    """Async client for the drafting model's HTTP API at `base_url`."""

    def __init__(self, base_url: str, timeout: float = 60.0):
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout)

    async def complete(self, prompt: str, max_tokens: int = 400) -> str:
        """The model's draft for `prompt`; the event loop serves other requests while the model writes."""
        response = await self._http.post("/v1/complete", json={"prompt": prompt, "max_tokens": max_tokens})
        if response.status_code != 200:
            raise ModelError(f"the model answered {response.status_code}: {response.text[:200]}")
        return response.json()["text"]

    async def close(self) -> None:
        await self._http.aclose()
