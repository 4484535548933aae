"""Decoy: exec, and `signal.signal(SIGTERM, lambda *_: sys.exit(0))`.

SystemExit is raised wherever the main thread is, which is the event loop's select(): it leaves
the loop, and asyncio.run cancels every task still running, the export in flight among them. The
container exits 0 quickly, and the client's export is cut off.
"""
