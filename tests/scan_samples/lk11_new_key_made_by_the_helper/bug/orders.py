"""Places orders at the supplier (requests, from a worker thread), with a key per request and retries."""
import time
import uuid

import requests

SESSION = requests.Session()


def _post_order(url: str, order: dict) -> dict:
    headers = {"Idempotency-Key": uuid.uuid4().hex}  # a new key per request
    resp = SESSION.post(url, json=order, headers=headers, timeout=10)
    resp.raise_for_status()
    return resp.json()


def place(url: str, order: dict) -> dict:
    attempt = 0
    while True:
        try:
            return _post_order(url, order)  # expect: LK11
        except requests.ConnectionError:
            attempt += 1
            if attempt == 3:
                raise
            time.sleep(attempt)


def cancel(url: str, order_id: str) -> None:
    for attempt in (1, 2):
        try:
            SESSION.post(f"{url}/{order_id}/cancel", headers={"Idempotency-Key": str(uuid.uuid4())},  # expect: LK11
                         timeout=10).raise_for_status()
            break
        except requests.ConnectionError:
            if attempt == 2:
                raise
