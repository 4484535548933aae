"""An access token cache shared by the threads of a worker: the lock is taken once, at the entry point."""
import threading
import time


class TokenCache:
    def __init__(self, fetch):
        self._fetch = fetch
        self._lock = threading.Lock()
        self._token, self._expires = None, 0.0

    def _expired(self) -> bool:  # called with the lock held
        return time.monotonic() >= self._expires

    def token(self) -> str:
        with self._lock:
            if self._expired():
                token, ttl = self._fetch()
                self._token, self._expires = token, time.monotonic() + ttl
            return self._token
