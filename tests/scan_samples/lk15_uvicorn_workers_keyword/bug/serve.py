"""Start the API: `python serve.py`."""
import os

import uvicorn

if __name__ == "__main__":
    cpus = os.cpu_count() or 1  # expect: LK15
    uvicorn.run("shop.api:app", host="0.0.0.0", port=8000, workers=cpus, log_level="info")
