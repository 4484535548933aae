"""POST /summaries: the document's summary, from the vendor."""
from fastapi import APIRouter, Depends, FastAPI
from pydantic import BaseModel

from .vendor import SummaryClient

router = APIRouter()


class Document(BaseModel):
    text: str


def get_client() -> SummaryClient:
    return SummaryClient("https://summaries.example")


@router.post("/summaries")
async def summarize(doc: Document, client: SummaryClient = Depends(get_client)):
    summary = client.summarize(doc.text)  # expect: LK08
    return {"summary": summary}


def create_app() -> FastAPI:
    app = FastAPI()
    app.include_router(router)
    return app
