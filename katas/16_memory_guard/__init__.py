"""Ingest worker: reads records from a feed, hands each one downstream, and checkpoints where it got to.

`ingest.py` is the worker. `main(argv)` connects to the feed (`--feed
HOST:PORT`, an HTTP endpoint whose body is a stream of records), reads
records into an `asyncio.Queue` (the producer) and hands them downstream one
at a time (the consumer, `--handle-seconds` per record). Its `finally` writes
the checkpoint (`--checkpoint PATH`): how many records were handled, so that
the next start resumes there. `feed.py` is the feed's client (leave it as it
is: it reads each record straight into a buffer of its own). `limits.py` says
how much memory the worker has.

In production the worker runs in a container with a memory limit of 256 MiB.
One morning the feed sent a backlog faster than downstream took it: the queue
grew with every record read, and about a second later the kernel's OOM
killer ended the worker with SIGKILL. No `finally`, no checkpoint, exit
status 137; the platform restarted it, it replayed the same backlog from the
last checkpoint, and it was killed again. Its start-up log said it had
60.9 GiB of memory: the host's, not the container's.

Your task, in `limits.py`:
1. `memory_limit(root=Path("/"))`: the memory limit of this process's
   cgroup, in bytes, or None when there is none. `root` is where the
   file system starts (the tests pass a folder holding a fake
   `proc/self/cgroup` and `sys/fs/cgroup/...`, for cgroup v2 and v1). A
   missing or unreadable file means no limit, never an exception.
2. `memory_usage(root=Path("/"))`: how many bytes that cgroup uses now
   (everything the limit counts), or None when it cannot be read.
3. `queue_bound(limit, *, item_bytes, baseline)`: the maxsize for a queue of
   items of `item_bytes` each, so that `baseline` (what the cgroup uses
   before the queue holds anything: every process of the container, as
   memory_usage() reads it at start) plus a full queue takes at most 75% of
   the limit (and at least half of it), well under the guard's threshold;
   with no limit (None), a default you state. At least 1:
   asyncio.Queue(maxsize=0) has no bound at all.
4. `shed_at(limit)`: the usage, in bytes, at which the worker stops taking
   work: 80% of the limit; None when there is no limit.

And in `ingest.py`: bound the queue from the limit, and guard the memory.
Until its last record is handled (after the feed's end too), the worker
looks at the cgroup's usage at least every 0.05 s, on a cadence of its own,
not only between two records: downstream may spend seconds on one. Once
usage reaches `shed_at(limit)`, it stops reading the feed and stops handling
records at once (the record in hand too; the queue is not handed on first),
its `finally` writes the checkpoint, and `main()` returns `EXIT_SHED`. When the feed ends, it handles every record it read and returns
`EXIT_DONE`. Read the limit through `--cgroup-root` (default `/`), as the
shipped `main()` already parses it.

The hidden tests run the worker as a child process in a real cgroup with a
memory limit (128 MiB), the feed on 127.0.0.1 much faster than downstream,
and judge it by its exit status, its checkpoint and the cgroup's own oom_kill
counter. Where this machine cannot make a cgroup, they run it under an
address-space limit instead, and the check says "could not run here" rather
than "solved". Keep the names `main`, `EXIT_DONE`, `EXIT_SHED`,
`RECORD_BYTES`, `memory_limit`, `memory_usage`, `queue_bound` and `shed_at`.

Run `loopkata check memory-guard` to grade your fix.
"""
