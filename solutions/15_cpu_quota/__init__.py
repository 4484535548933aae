"""Search service: an asyncio API run as several worker processes in a pod with a CPU limit.

`runtime.py` decides, once at start-up, how many CPUs the service may use and
what it sizes from that number: the launcher starts `sizing().workers` worker
processes, and every worker calls `install(loop)` before it serves, which gives
its event loop the default executor (the thread pool behind
`loop.run_in_executor(None, ...)` and `asyncio.to_thread`). `lagmon.py` is the
loop-lag monitor each worker runs: `watch(seconds)` measures how late the loop
runs its callbacks and returns a `LagReport` whose `cause` the on-call reads.

In production the pods ran with a CPU limit of 2 on 24-core nodes. Python said
24 CPUs, so every pod started 24 workers, each with a default executor of 28
threads, all of them sharing 2 CPUs' worth of time. A CPU limit is a CFS quota
(cpu.max on cgroup v2, cpu.cfs_quota_us / cpu.cfs_period_us on v1): once the
cgroup has used its quota for the current period (100 ms), the kernel stops
every thread of it, the event loop's too, until the next period begins. The
p99 loop lag went from about 10 ms to 50-60 ms, and the monitor said "the
event loop was blocked": the team spent a week looking for blocking calls
that were not there. cpu.stat's nr_throttled counted a throttled period in
nearly every period.

Your task:
1. Make `runtime.effective_cpus(root)` return the number of CPUs this process
   may really use: the smallest of its CPU affinity (`os.sched_getaffinity(0)`),
   its cgroup's CPU quota (quota / period, rounded up: 0.5 CPU is 1, 1.2 is 2)
   and `PYTHON_CPU_COUNT` when that is set to a number ("default" or a word
   is no limit); at least 1. A cgroup without a quota ("max" in cpu.max, -1
   in cpu.cfs_quota_us), or one whose files are missing or unreadable, leaves
   the affinity as it is: it never raises.
2. Size from that number: `sizing(root).workers` is one worker per CPU, and
   `install(loop, root)` gives the loop a default executor of Python's own
   size, min(32, CPUs + 4), counted from the CPUs the service may really use.
3. Make `lagmon.watch(seconds, root=...)` read its own cgroup's cpu.stat
   before and after, and name CPU throttling as the cause (with the word
   "throttled" or "throttling") whenever nr_throttled grew while it watched,
   over budget or not, and only then: lag alone is the loop's or the code's.

Every file is read under `root`: "/" in production; the tests pass a folder
of their own that holds `proc/self/cgroup` and `sys/fs/cgroup/...` laid out
as the kernel lays them out. /proc/self/cgroup has one line per hierarchy,
`ID:CONTROLLERS:PATH`. On cgroup v1 the cpu controller's line reads like
`4:cpu,cpuacct:/kubepods/pod1/c1`, and that cgroup's files are in
`sys/fs/cgroup/cpu/kubepods/pod1/c1/` (`cpu` is the controller's mount; it is
often a link to `cpu,cpuacct`). On cgroup v2 the one line is
`0::/kubepods.slice/c1.scope`, and the files are in
`sys/fs/cgroup/kubepods.slice/c1.scope/`. A container with a cgroup
namespace of its own sees its cgroup as `/`. A machine can have both (v1
controllers and a v2 line `0::/`): the cpu controller is where its line says.

The hidden tests read effective_cpus() in fresh processes on folders of their
own (v1, its controllers mounted together or apart, and v2; pinned to one CPU
in some), count the threads install()'s default executor starts under load,
and run `watch()` in a real cgroup with a CPU quota while a thread keeps the
CPU busy (and in one whose quota is never reached). Keep the names `effective_cpus`,
`sizing`, `Sizing.workers`, `install`, `watch` and `LagReport.cause`.

Run `loopkata check cpu-quota` to grade your fix.
"""
