"""The nightly job: one asyncio.run per day to rebuild."""
import asyncio

from .repository import ReportRepository


def rebuild(days: list[str]) -> None:
    for day in days:
        asyncio.run(ReportRepository().rows(day))
