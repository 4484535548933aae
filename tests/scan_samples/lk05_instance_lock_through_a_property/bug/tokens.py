"""An access token cache shared by the threads of a worker."""
import threading
import time


class TokenCache:
    def __init__(self, fetch):
        self._fetch = fetch
        self._lock = threading.Lock()
        self._token, self._expires = None, 0.0

    @property
    def expired(self) -> bool:
        with self._lock:
            return time.monotonic() >= self._expires

    def _store(self, token: str, ttl: float) -> None:
        with self._lock:
            self._token, self._expires = token, time.monotonic() + ttl

    def token(self) -> str:
        with self._lock:
            if self.expired:  # expect: LK05
                self._store(*self._fetch())  # expect: LK05
            return self._token
