"""Sends a failed export's details to the team's chat webhook."""
import httpx


async def export(client: httpx.AsyncClient, webhook: str, rows: list) -> None:
    try:
        resp = await client.post("/exports", json=rows)
        resp.raise_for_status()
    except httpx.HTTPError as exc:
        await client.post(webhook, json={"text": f"export failed: {exc}"})
        raise
