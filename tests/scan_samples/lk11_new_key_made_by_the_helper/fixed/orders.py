"""Places orders at the supplier (requests, from a worker thread), with a key per request and retries."""
import time
import uuid

import requests

SESSION = requests.Session()


def _post_order(url: str, order: dict, key: str) -> dict:
    headers = {"Idempotency-Key": key}
    resp = SESSION.post(url, json=order, headers=headers, timeout=10)
    resp.raise_for_status()
    return resp.json()


def place(url: str, order: dict) -> dict:
    key = uuid.uuid4().hex  # one key for every attempt of this order
    attempt = 0
    while True:
        try:
            return _post_order(url, order, key)
        except requests.ConnectionError:
            attempt += 1
            if attempt == 3:
                raise
            time.sleep(attempt)


def cancel(url: str, order_id: str) -> None:
    key = str(uuid.uuid4())
    for attempt in (1, 2):
        try:
            SESSION.post(f"{url}/{order_id}/cancel", headers={"Idempotency-Key": key},
                         timeout=10).raise_for_status()
            break
        except requests.ConnectionError:
            if attempt == 2:
                raise
