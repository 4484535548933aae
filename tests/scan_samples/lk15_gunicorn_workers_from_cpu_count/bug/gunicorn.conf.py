"""Gunicorn settings for the API container."""
import multiprocessing
import os

bind = f"0.0.0.0:{os.environ.get('PORT', '8000')}"
worker_class = "uvicorn.workers.UvicornWorker"
workers = multiprocessing.cpu_count() * 2 + 1  # expect: LK15
threads = 1
timeout = 30
print(f"gunicorn on a machine with {multiprocessing.cpu_count()} CPUs")
