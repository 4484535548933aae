"""Rules service: upload a cost-allocation rules file, keep a small JSON summary.

The service is a FastAPI app (`app.py`). `POST /rules` takes a rules file
(one `cost_center,account,share` line per rule), parses it, and records a
summary in one JSON document on disk through `store.py`. Two kinds of writers
share that document: the threads of one worker process, and the other worker
processes of the pod. `store.update()` guards its read-modify-write against
both, with a module-level thread lock and an `fcntl.flock` on a lock file.

In production an upload hung and the pod was restarted by its liveness probe,
and the access log showed no trace of the request. The first fix, making the
endpoint a plain `def`, made /health green again, but the upload still never
finished and the JSON file was never written, and now nothing restarted it.

Your task, in `store.py` and `app.py`:
- a read-modify-write through `store.update()` finishes and writes the file,
  and `store.load()` / `store.save()` still work on their own;
- two threads, and two processes, updating at once lose no update;
- an upload through the served app is saved, and the rules file is parsed
  off the event loop, so /health keeps answering while it runs.

The hidden tests call `store.update(path, change)`, `store.load(path)`,
`store.save(path, doc)`, `app.create_app(path)` and replace `app.parse_rules`
with a spy: keep those names and signatures.

Run `loopkata check lock-reentry` to grade your fix.
"""
