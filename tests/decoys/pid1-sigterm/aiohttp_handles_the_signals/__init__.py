"""Decoy: exec, and `web.AppRunner(app, handle_signals=True)`.

aiohttp's handler raises GracefulExit (a SystemExit) from a loop callback. web.run_app catches it
and shuts down in order; under a hand-made asyncio.run it leaves the loop, asyncio.run cancels the
request in flight, and the program ends with status 1.
"""
