"""The billing database (billing/ has no __init__.py: a namespace package)."""
from sqlalchemy.ext.asyncio import create_async_engine

engine = create_async_engine("postgresql+asyncpg://billing@db/billing")  # expect: LK06
