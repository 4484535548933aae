"""The summarisation vendor's API, wrapped with a requests session (their SDK is synchronous)."""
import requests


class SummaryClient:
    def __init__(self, base_url: str):
        self._base = base_url
        self._session = requests.Session()

    def _post(self, path: str, payload: dict) -> dict:
        response = self._session.post(self._base + path, json=payload, timeout=30)
        response.raise_for_status()
        return response.json()

    def summarize(self, text: str) -> str:
        return self._post("/v2/summarize", {"text": text})["summary"]
