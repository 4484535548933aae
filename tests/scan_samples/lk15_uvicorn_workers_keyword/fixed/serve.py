"""Start the API: `python serve.py`."""
import os

import uvicorn

if __name__ == "__main__":
    # WEB_CONCURRENCY is set by the deployment from the container's CPU limit
    workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
    uvicorn.run("shop.api:app", host="0.0.0.0", port=8000, workers=workers, log_level="info")
