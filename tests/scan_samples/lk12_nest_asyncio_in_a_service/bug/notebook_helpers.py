"""Helpers for the team's analysis notebooks, where Jupyter's own event loop already runs."""
import asyncio

import nest_asyncio
from IPython import get_ipython

if get_ipython() is not None:
    nest_asyncio.apply()


def fetch_all(coros):
    return asyncio.run(asyncio.gather(*coros))
