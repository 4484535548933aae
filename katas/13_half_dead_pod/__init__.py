"""Exports service: an API served by `uvicorn --workers 2`, one event loop per worker process.

`app.py` is the FastAPI app each worker serves, made by `create_app()`:
`GET /health` is the liveness probe's endpoint, `POST /exports` renders a
CSV export. `watchdog.py` watches the worker's event loop; the app starts it
when the worker starts, with the limit `WORKER_FREEZE_LIMIT` (seconds, an
environment variable; 30 when unset). `harness.py` is the team's liveness
drill: `check_workers()` sends one slow request and watches `/health` while
it runs.

In production one request froze its worker's event loop for good (a blocking
call on the loop: kata 08's bug, in a handler nobody had found yet). The
pod stayed Ready for hours: uvicorn's supervisor pings each worker, and the
worker answers from a thread of its own that the frozen loop does not stop,
so the worker was never replaced; the kubelet's probes reach the pod's one
listening socket, and the other worker accepted every one of them. Every
user whose keep-alive connection was pinned to the frozen worker waited
until they gave up. The drill passed the whole time.

Your task:
1. Make `harness.check_workers(port, workers, slow_path, limit=...)` a drill
   that cannot pass for the wrong reason. It pins keep-alive connections
   and finds which worker process owns each one (the client's port, then
   the server-side socket's inode in /proc/net/tcp, then the process in
   `workers` whose /proc/PID/fd holds it), and keeps connecting until every
   worker owns one (at most `max_connections` connections). Then it sends
   the slow request `GET slow_path` on a connection of its own, finds the
   worker that serves it, polls /health on every pinned connection while it
   runs, and judges only that worker's connections: "fail" if one of them
   waited longer than `limit` seconds for /health, "pass" if none did. When
   a worker cannot be covered it returns "void", never "pass": a pass that
   never reached one of the workers says nothing about it. Run on a build
   known to have the bug (control mode), it must say "fail"; on a build
   without it (clean mode), "pass". It runs on Linux (it reads /proc).
2. Make the watchdog end a worker whose event loop has been frozen for
   longer than WORKER_FREEZE_LIMIT seconds, while it is frozen, so that the
   supervisor starts a fresh one; a loop that is only busy for less than
   the limit must never cost its worker its life, nor must a step of the
   wall clock (time.time() jumping forward, as NTP steps a resumed VM).

The hidden tests start `uvicorn --workers 2 --factory` on the app from
`create_app()` on 127.0.0.1, in a process group of their own, and add two
routes of their own to it: `GET /_drill/freeze?seconds=S`, which holds the
worker's event loop for S seconds (as the blocking handler did), and
`GET /_drill/wait?seconds=S`, which waits S seconds without holding it.
Keep the names `create_app`, `check_workers`, `Verdict` and its fields, and
read WORKER_FREEZE_LIMIT as `app.py` does.

Run `loopkata check half-dead-pod` to grade your fix.
"""
