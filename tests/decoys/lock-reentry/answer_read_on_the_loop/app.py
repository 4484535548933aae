"""The rules service: FastAPI app with an upload endpoint, a health check and an access log."""
import asyncio
import csv
import io
import logging
import time
from pathlib import Path

from fastapi import APIRouter, FastAPI, HTTPException, Request, UploadFile

from . import store

access_log = logging.getLogger("rules.access")
router = APIRouter()


def parse_rules(raw: bytes) -> list:
    """Parse a rules file: one `cost_center,account,share` line per rule, `#` for comments."""
    rules = []
    text = raw.decode("utf-8")
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or row[0].lstrip().startswith("#"):
            continue
        if len(row) != 3:
            raise ValueError(f"line {number}: expected cost_center,account,share, got {len(row)} fields")
        center, account, share = (cell.strip() for cell in row)
        try:
            rules.append({"cost_center": center, "account": account, "share": float(share)})
        except ValueError:
            raise ValueError(f"line {number}: share {share!r} is not a number") from None
    return rules


def summarize(rules: list) -> dict:
    """What the document keeps of a rules file: counts and the share allocated per cost center."""
    shares = {}
    for rule in rules:
        shares[rule["cost_center"]] = round(shares.get(rule["cost_center"], 0.0) + rule["share"], 6)
    return {"rules": len(rules), "cost_centers": len(shares), "shares": shares}


@router.post("/rules")
async def upload_rules(request: Request, file: UploadFile):
    raw = await file.read()
    rules_file = request.app.state.rules_file
    try:
        rules = await asyncio.to_thread(parse_rules, raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from None
    summary = summarize(rules)

    def record(doc):
        doc["uploads"] = doc.get("uploads", 0) + 1
        doc.setdefault("rule_sets", {})[file.filename] = summary

    await asyncio.to_thread(store.update, rules_file, record)
    doc = store.load(rules_file)  # only a small read, for the answer
    return {"file": file.filename, "rules": len(rules), "uploads": doc["uploads"]}


def create_app(rules_file) -> FastAPI:
    """The service, keeping its document at `rules_file`."""
    app = FastAPI(title="rules")
    app.state.rules_file = Path(rules_file)

    @app.middleware("http")
    async def log_requests(request: Request, call_next):
        started = time.perf_counter()
        response = await call_next(request)
        took = (time.perf_counter() - started) * 1000
        access_log.info("%s %s %s %.0f ms", request.method, request.url.path, response.status_code, took)
        return response

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    app.include_router(router)
    return app
