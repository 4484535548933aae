"""Refunds through the shop's billing service (httpx), sending a refund again when its connection drops."""
import httpx


class Billing:
    def __init__(self, base_url: str):
        self.client = httpx.AsyncClient(base_url=base_url, timeout=10)

    async def refund(self, order_id: str, cents: int) -> dict:
        body = {"order": order_id, "cents": cents}
        headers = {"Idempotency-Key": f"refund/{order_id}/{cents}"}  # the same for both attempts
        try:
            resp = await self.client.post("/refunds", json=body, headers=headers)
        except httpx.TransportError:
            resp = await self.client.post("/refunds", json=body, headers=headers)
        resp.raise_for_status()
        return resp.json()

    async def update_address(self, customer: str, address: dict, key: str) -> dict:
        try:
            resp = await self.client.request("PATCH", f"/customers/{customer}", json=address,
                                              headers={"Idempotency-Key": key})
        except httpx.TransportError:
            resp = await self.client.request("PATCH", f"/customers/{customer}", json=address,
                                              headers={"Idempotency-Key": key})
        return resp.json()
