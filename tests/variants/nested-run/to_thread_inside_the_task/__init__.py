"""Variant: keep the async _run_job task, and run the job inside it with `await asyncio.to_thread(task, *args)`."""
