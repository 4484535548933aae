"""Decoy: give the job a new event loop of its own with new_event_loop() and run_until_complete(): a thread runs one loop at a time, and this one already runs the API's.

asyncio.run() refused for a reason, and building the loop by hand does not
remove it: run_until_complete() on a second loop, in the thread where the
API's loop is running, raises "Cannot run the event loop while another loop is
running". The job has to run on another thread.
"""
