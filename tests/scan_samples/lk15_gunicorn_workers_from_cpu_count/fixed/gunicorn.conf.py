"""Gunicorn settings for the API container."""
import multiprocessing
import os

from cpus import cpu_limit

bind = f"0.0.0.0:{os.environ.get('PORT', '8000')}"
worker_class = "uvicorn.workers.UvicornWorker"
workers = cpu_limit() * 2 + 1
threads = 1
timeout = 30
print(f"gunicorn on a machine with {multiprocessing.cpu_count()} CPUs")
