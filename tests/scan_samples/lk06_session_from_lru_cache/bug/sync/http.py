"""The HTTP session of the sync job, made once and cached."""
from functools import cache

import aiohttp


@cache
def session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession()  # expect: LK06
