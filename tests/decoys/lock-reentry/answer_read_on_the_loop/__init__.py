"""Decoy: offload parsing and the update, then read the document back on the loop.

upload_rules awaits asyncio.to_thread() for parse_rules and for store.update(),
then calls store.load() directly to build its answer ("only a small read").
But load() takes the store's thread lock, and a threadpool thread holds that
lock for as long as it waits for another process's flock: the event loop then
waits behind it, and reads the file on the loop besides. /health stops
answering whenever two uploads meet a busy file lock.
"""
