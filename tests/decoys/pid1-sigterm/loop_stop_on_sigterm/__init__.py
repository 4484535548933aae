"""Decoy: exec, and `loop.add_signal_handler(SIGTERM, loop.stop)`.

Stopping the loop under asyncio.run ends run_until_complete with "Event loop stopped before
Future completed": main's finally never runs, nothing is flushed, and the exit status is 1.
"""
