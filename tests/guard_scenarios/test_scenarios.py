"""Small programs with one bug each, and their fixed twins: tests/test_guard.py runs them under the guard.

Each test's name says what it expects: `test_LGnn_...` must get a finding of
that kind (and no other), `test_clean_...` none at all. Not collected by the
project's own suite (pyproject.toml's norecursedirs): only run guarded.
"""
import asyncio
import gc
import logging
import os
import subprocess
import sys
import threading
import time

import pytest

log = logging.getLogger("scenarios")

# --- LG01: a loop-bound object used on a second loop -----------------------------------------

LIMIT = asyncio.Semaphore(2)  # made at import, outside any loop: bound at first use


async def limited():
    async with LIMIT:
        await asyncio.sleep(0)


def test_LG01_semaphore_used_by_two_asyncio_runs():
    asyncio.run(limited())
    asyncio.run(limited())  # never had to wait: asyncio raises nothing


def test_clean_semaphore_made_per_run():
    async def main():
        sem = asyncio.Semaphore(2)
        async with sem:
            await asyncio.sleep(0)
    asyncio.run(main())
    asyncio.run(main())


def test_LG01_queue_used_on_a_second_loop():
    queue = asyncio.Queue()
    asyncio.run(queue.put(1))
    assert asyncio.run(queue.get()) == 1


def test_LG01_transport_used_from_another_loop(tcp_echo):
    async def open_():
        return await asyncio.open_connection(*tcp_echo)

    loop = asyncio.new_event_loop()
    _, writer = loop.run_until_complete(open_())

    async def write_from_here():
        writer.write(b"x")  # this connection belongs to `loop`

    try:
        asyncio.run(write_from_here())
    finally:
        writer.close()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


@pytest.fixture
def tcp_echo():
    import socket
    server = socket.create_server(("127.0.0.1", 0))
    yield server.getsockname()
    server.close()


# --- LG02: loops kept alive after the test ------------------------------------------------------

_LOCKS = {}  # loop -> lock: keeps every loop


async def remember_lock():
    lock = _LOCKS.setdefault(asyncio.get_running_loop(), asyncio.Lock())
    async with lock:
        await asyncio.sleep(0)


def test_LG02_module_dict_keeps_every_loop():
    for _ in range(3):
        asyncio.run(remember_lock())


def test_clean_loops_let_go():
    for _ in range(3):
        asyncio.run(asyncio.sleep(0))


# A team's suite: each test one invocation (one asyncio.run), the leak one loop per test. The first loop
# kept is what a cache of the last loop would keep; the second, left by the next test, is the finding.

_CLIENTS = {}  # loop -> client: one entry per invocation, none ever removed


async def client_for_this_loop():
    return _CLIENTS.setdefault(asyncio.get_running_loop(), object())


def test_leak_one_loop_per_test_1_the_first_loop_is_what_a_cache_may_keep():
    asyncio.run(client_for_this_loop())


def test_LG02_leak_one_loop_per_test_2_the_second_loop_kept():
    asyncio.run(client_for_this_loop())


def test_leak_one_loop_per_test_3_reported_once_already():
    asyncio.run(client_for_this_loop())


_LAST = {}  # the fixed twin: the client of the last loop only


async def client_for_the_last_loop():
    loop = asyncio.get_running_loop()
    if loop not in _LAST:
        _LAST.clear()
        _LAST[loop] = object()
    return _LAST[loop]


def test_clean_cache_of_the_last_loop_1():
    asyncio.run(client_for_the_last_loop())


def test_clean_cache_of_the_last_loop_2():
    asyncio.run(client_for_the_last_loop())


def test_clean_cache_of_the_last_loop_3():
    asyncio.run(client_for_the_last_loop())


# --- LG03: a pending task lost ----------------------------------------------------------------

async def slow_write(box):
    await asyncio.sleep(0.05)
    box.append(1)


def test_LG03_task_cancelled_by_asyncio_run_shutdown():
    box = []

    async def handler():
        asyncio.create_task(slow_write(box))  # fire and forget

    asyncio.run(handler())
    assert box == []


def test_LG03_task_destroyed_by_the_garbage_collector():
    async def handler():
        loop = asyncio.get_running_loop()
        async def waits(future):
            await future

        asyncio.create_task(waits(loop.create_future()))  # a future nothing will ever set
        await asyncio.sleep(0)
        gc.collect()  # the task waits on a future that only it references: collected

    asyncio.run(handler())


async def ticks():
    n = 0
    while True:
        yield n
        n += 1


def test_clean_an_abandoned_async_generator_closed_by_asyncio():
    """A generator dropped after its first item: asyncio itself makes the task that closes it (aclose), and
    asyncio.run's shutdown finishes it; none of the test's work is lost."""
    async def first_tick():
        gen = ticks()
        first = await anext(gen)
        del gen  # abandoned on purpose: asyncio's finalizer hook schedules gen.aclose() as a task
        return first

    assert asyncio.run(first_tick()) == 0


def test_clean_task_awaited():
    box = []

    async def handler():
        await asyncio.create_task(slow_write(box))

    asyncio.run(handler())
    assert box == [1]


# --- LG04: the loop blocked ---------------------------------------------------------------------

def test_LG04_sleep_on_the_loop():
    async def handler():
        time.sleep(0.4)  # noqa: ASYNC251 - the bug: a blocking call on the loop

    asyncio.run(handler())


def test_clean_sleep_in_a_thread():
    async def handler():
        await asyncio.to_thread(time.sleep, 0.2)

    asyncio.run(handler())


def spin(seconds: float) -> None:
    """Keep this thread on a CPU for `seconds` of its own CPU time, however long that takes on the clock."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_LG04_computing_on_the_loop():
    async def handler():
        spin(0.4)  # the bug: a long computation in a callback holds the loop as surely as a blocking call

    asyncio.run(handler())


def test_clean_a_loop_waiting_for_a_busy_cpu():
    """Short callbacks (40 ms of CPU each) on a loop whose CPU three other processes keep busy: each takes
    about four times as long on the clock, waiting for its turn on the CPU, and none holds the loop."""
    cpu = min(os.sched_getaffinity(0))
    mine = os.sched_getaffinity(0)
    burn = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    burners = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(3)]
    try:
        os.sched_setaffinity(0, {cpu})  # this thread only (Linux): the guard's monitor runs where it likes

        async def handler():
            for _ in range(5):
                spin(0.04)
                await asyncio.sleep(0)

        asyncio.run(handler())
    finally:
        os.sched_setaffinity(0, mine)
        for burner in burners:
            burner.kill()
            burner.wait()


def test_clean_a_loop_waiting_a_moment_for_a_thread_kept_off_the_cpu():
    """A callback that waits for a thread's 5 ms of work (as `Thread.start` waits for the new thread's first
    lines, which anyio's to_thread does on a library's loop): the thread, pinned to a CPU three other processes
    keep busy and at the lowest priority, waits there for hundreds of ms, and the loop with it. On an idle
    machine the callback takes 5 ms; the time its helper waits for a CPU is the machine's, not the loop's."""
    cpu = min(os.sched_getaffinity(0))
    burn = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    burners = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(3)]

    def helper(done):
        os.sched_setaffinity(0, {cpu})  # this thread only (Linux)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        spin(0.005)
        done.set()

    async def handler():
        for _ in range(2):
            done = threading.Event()
            threading.Thread(target=helper, args=(done,)).start()
            done.wait()  # a short wait on the loop's thread, by design
            await asyncio.sleep(0)

    try:
        asyncio.run(handler())
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


# --- LG05: a thread asks for a lock it holds ---------------------------------------------------

_store_lock = threading.Lock()


def load():
    with _store_lock:
        return {}


def update():
    with _store_lock:
        return load()  # takes _store_lock again


def test_LG05_lock_taken_twice():
    with pytest.raises(RuntimeError, match="already holds"):
        update()


def test_clean_lock_taken_once():
    with _store_lock:
        pass
    assert load() == {}


# --- LG06: exceptions swallowed -----------------------------------------------------------------

async def failing():
    raise ValueError("bad input on line 3")


def test_LG06_gathered_exception_logged_without_traceback():
    async def runner():
        for outcome in await asyncio.gather(failing(), return_exceptions=True):
            if isinstance(outcome, BaseException):
                log.error("step failed: %s", type(outcome).__name__)

    asyncio.run(runner())


def test_clean_gathered_exception_logged_with_traceback():
    async def runner():
        for outcome in await asyncio.gather(failing(), return_exceptions=True):
            if isinstance(outcome, BaseException):
                log.error("step failed", exc_info=outcome)

    asyncio.run(runner())


def test_LG06_task_exception_never_retrieved():
    async def runner():
        task = asyncio.create_task(failing())
        await asyncio.sleep(0.01)
        del task

    asyncio.run(runner())
    gc.collect()


# --- LG07: unclosed resources -------------------------------------------------------------------

def test_LG07_event_loop_never_closed():
    loop = asyncio.new_event_loop()
    loop.run_until_complete(asyncio.sleep(0))
    del loop
    gc.collect()


def test_clean_event_loop_closed():
    loop = asyncio.new_event_loop()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()


def test_LG07_aiohttp_session_never_closed():
    aiohttp = pytest.importorskip("aiohttp")

    async def make():
        aiohttp.ClientSession()

    asyncio.run(make())
    gc.collect()


# --- LG08: a timeout cancels an async generator's step -----------------------------------------

async def sections():
    yield "a"
    await asyncio.sleep(0.2)
    yield "b"


def test_LG08_wait_for_on_anext():
    async def consume():
        gen, got = sections(), []
        while True:
            try:
                got.append(await asyncio.wait_for(anext(gen), timeout=0.05))
            except TimeoutError:
                got.append(":keepalive")
            except StopAsyncIteration:
                return got

    assert asyncio.run(consume()) == ["a", ":keepalive"]  # "b" is lost


async def late_each(stream, seconds):
    """An operator whose documented purpose is to end the stream with TimeoutError when an item is late:
    the stream is never stepped again after a timeout."""
    while True:
        try:
            item = await asyncio.wait_for(anext(stream), seconds)
        except StopAsyncIteration:
            return
        yield item


def test_clean_a_timeout_operator_that_ends_the_stream():
    async def consume():
        got = []
        with pytest.raises(TimeoutError):
            async for item in late_each(sections(), 0.05):
                got.append(item)
        return got

    assert asyncio.run(consume()) == ["a"]


def test_clean_wait_for_on_a_coroutine():
    async def consume():
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.sleep(1), timeout=0.01)

    asyncio.run(consume())


# --- LG09: a Celery task sent to a queue no worker consumes -----------------------------------

@pytest.fixture(scope="module")
def celery_app():
    """A Celery app whose worker, started once for the module, consumes only the default queue."""
    celery = pytest.importorskip("celery")
    from celery.contrib.testing.worker import start_worker
    app = celery.Celery("scenarios", broker="memory://", backend="cache+memory://")
    app.conf.task_routes = {"reports.*": {"queue": "reports"}}

    @app.task(name="reports.build")
    def build():
        return 1

    @app.task(name="ping")
    def ping():
        return 1

    with start_worker(app, perform_ping_check=False, loglevel="WARNING"):
        yield app


def test_LG09_task_routed_to_a_queue_the_worker_does_not_consume(celery_app):
    celery_app.send_task("reports.build")


def test_clean_task_on_the_queue_the_worker_consumes(celery_app):
    assert celery_app.send_task("ping").get(timeout=10) == 1


# --- LG10: asyncio patched so that loops nest (kata 12) -----------------------------------------
# nest_asyncio2.apply() patches asyncio for the rest of the process: the scenario with the bug runs in a
# child process (guarded too), so that the scenarios after it run on asyncio as it is.

NESTED = """
import asyncio
import nest_asyncio2

def report_job():
    return asyncio.run(asyncio.sleep(0, result="report"))

async def endpoint():
    return report_job()

nest_asyncio2.apply()
assert asyncio.run(endpoint()) == "report"
"""


def test_LG10_nest_asyncio_lets_asyncio_run_nest():
    subprocess.run([sys.executable, "-c", NESTED], check=True, timeout=60)


def test_clean_job_as_a_task_of_the_running_loop():
    async def report_job():
        return await asyncio.sleep(0, result="report")

    async def endpoint():
        return await asyncio.create_task(report_job())

    assert asyncio.run(endpoint()) == "report"


# --- LG11: a pool sized above the CPUs allowed (kata 15) ---------------------------------------

def cpus_allowed() -> int:
    """The CPUs this process may use: the affinity's count, lowered to the cgroup's quota."""
    n = len(os.sched_getaffinity(0))
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()
        if quota != "max":
            n = min(n, -(-int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, n)


def test_LG11_process_pool_of_two_workers_per_cpu():
    from concurrent.futures import ProcessPoolExecutor
    pool = ProcessPoolExecutor(max_workers=cpus_allowed() * 2)
    pool.shutdown()


def test_clean_process_pool_sized_from_the_cpus_allowed():
    from concurrent.futures import ProcessPoolExecutor
    pool = ProcessPoolExecutor(max_workers=cpus_allowed())
    pool.shutdown()


# --- LG12: an unbounded asyncio.Queue that grows (kata 16) -------------------------------------

async def ingest(queue: asyncio.Queue, records: int):
    async def consume():
        while True:
            await queue.get()
            await asyncio.sleep(0.01)  # downstream is slower than the feed

    consumer = asyncio.create_task(consume())
    for i in range(records):
        await queue.put(i)
        if i % 1000 == 0:
            await asyncio.sleep(0)  # the feed's next read
    consumer.cancel()
    try:
        await consumer
    except asyncio.CancelledError:
        pass


def test_LG12_unbounded_queue_fed_faster_than_drained():
    asyncio.run(ingest(asyncio.Queue(), 120_000))


def test_clean_bounded_queue_makes_the_feed_wait():
    asyncio.run(ingest(asyncio.Queue(maxsize=1000), 1500))


# --- a child process is guarded too -----------------------------------------------------------

def test_LG04_in_a_child_process():
    import subprocess
    import sys
    code = "import asyncio, time\nasync def main():\n    time.sleep(0.4)\nasyncio.run(main())\n"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
