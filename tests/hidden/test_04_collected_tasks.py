"""Hidden tests for kata 04, collected-tasks.

Every test gets a fresh copy of the implementation (`kata`) and a real price
store: an asyncio TCP server on 127.0.0.1 (an ephemeral port), on a thread of
its own, started and stopped by the test. Each `kata.handler(...)` call is one
`asyncio.run`, in one process, as in a warm Lambda container, and runs under a
hang guard.

Under load the store is slow to answer: `PriceStore(gc_during_auth=N)` holds
the replies to AUTH until N connections wait for one (or nothing new arrives
for a while), runs one garbage collection, then answers everything. That is a
collection cycle hitting while the writes wait for the store, made
deterministic. Reads queue behind the writes in flight, as on a busy store: a
GET is answered once every other open connection has sent its command (or
closed), so a write that is alive after the collection lands before the quote
comes back, whether or not the handler waits for it.

A store can also be slow to write: `PriceStore(slow={"price:sku": 3.0})` answers
SET price:sku after 3 s, and writes the value only then, if the client is
still connected: a write its client gave up on (closed the connection) never
lands.

A store can hang up: `PriceStore(hang_up_after="AUTH")` closes each connection
once it has read an AUTH, answering nothing.

A store can refuse a read: `PriceStore(refuse={"price:sku": "-ERR ..."})` answers
GET price:sku with that error once the writes in flight have sent their
commands, and then holds every SET until the refused GET's connection has
closed and a moment more has passed: a write whose client has given up by then
(closed its connection: asyncio.run cancels what is pending when the handler
raises) never lands; a write still waiting for its reply lands then.

And a loaded machine can hand the event loop many replies in one wake-up:
`PriceStore(together=6)` holds the replies to the first 6 commands until all 6
are in, then sends the SET replies and the GET reply last, in one burst; the
invocation's loop, made by `WakesOnceForABurst`, sleeps through the burst and
handles all of it in one turn, the GET's reply last. The writes have then
finished by the time the quote comes back, and their done callbacks have not
run yet: made deterministic, a moment that otherwise comes only now and then.
Automatic garbage collections are off meanwhile, so that test fails for that
moment alone (the collector has a test of its own).
"""
import asyncio
import contextlib
import gc
import logging
import selectors
import socket
import threading
import time
import warnings
import weakref

from loopkata.testing import Hang, hang_after, run_bounded


class PriceStore:
    """A real in-memory price store speaking the kata's line protocol over TCP."""

    QUIET = 0.25  # hold replies at most this long after the last new connection
    SETTLE = 0.05  # after the N-th waiting connection, let the client's loop go idle
    READ_QUEUE_LIMIT = 1.0  # a GET waits at most this long for the writes in flight
    AFTER_REFUSAL = 0.1  # after the refused GET's connection closes, the held SETs wait this long for theirs

    def __init__(self, gc_during_auth: int = 0, fail: dict | None = None, token: str = "dev", get_delay: float = 0.0,
                 slow: dict | None = None, together: int = 0, refuse: dict | None = None, hang_up_after: str = ""):
        self.data: dict[str, str] = {}
        self.hang_up_after = hang_up_after  # a verb (AUTH, SET...) after which the store closes, answering nothing
        self.get_delay = get_delay  # seconds the store takes to answer a GET (a slow read)
        self.fail = dict(fail or {})  # key -> error line answered to SET key
        self.slow = dict(slow or {})  # key -> seconds the store takes to answer SET key (a slow write)
        self.refuse = dict(refuse or {})  # key -> error line answered to GET key (a refused read)
        self.token = token
        self.gc_during_auth = gc_during_auth
        self.collections = 0
        self.collected_at = None  # when the garbage collection ran (server loop time)
        self.events: list[tuple[int, str, float]] = []  # (connection number, what, when): for timelines
        self._connections = 0
        self._undecided: set[int] = set()  # connected, no command sent yet, not closed
        self._holding = gc_during_auth > 0
        self._waiting = 0
        self._last_arrival = 0.0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="price-store", daemon=True)
        self.together = together  # hold the replies to this many commands, then send them in one burst
        self._held: list[tuple[str, asyncio.StreamWriter, str]] = []
        self.burst_started, self.burst_sent = threading.Event(), threading.Event()
        self.answered_last: set[int] = set()  # client ports whose reply ends the burst (the GETs)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def landed(self, skus) -> list[str]:
        return [s for s in skus if f"price:{s}" in self.data]

    def __enter__(self):
        self._thread.start()
        if not self._ready.wait(5):
            raise RuntimeError("the price store did not start within 5 s")
        return self

    def __exit__(self, *exc):
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)

    def _run(self):
        asyncio.run(self._main())

    async def _main(self):
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._gate = asyncio.Event()
        if not self._holding:
            self._gate.set()
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        watcher = asyncio.create_task(self._release_when_loaded()) if self._holding else None
        self._burst = asyncio.Event()
        self._refused = asyncio.Event()  # a refused GET's connection has closed
        bursting = asyncio.create_task(self._answer_together()) if self.together else None
        self._ready.set()
        try:
            await self._stop.wait()
            await self._take_the_backlog()
        finally:
            for task in (watcher, bursting):
                if task is not None:
                    task.cancel()
            server.close()

    async def _take_the_backlog(self):
        # A client can connect and stop us before this thread gets the GIL back: its
        # connections then wait in the listen backlog. Take them before closing, so the
        # events tell the whole story (quiet for two rounds: nothing more is coming).
        seen = -1
        while seen != self._connections:
            seen = self._connections
            await asyncio.sleep(0.01)
            await asyncio.sleep(0.01)

    async def _release_when_loaded(self):
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(0.005)
            if not self._waiting:
                continue
            quiet = loop.time() - self._last_arrival
            if (self._waiting >= self.gc_during_auth and quiet >= self.SETTLE) or quiet >= self.QUIET:
                break
        self.collected_at = loop.time()
        gc.collect()
        self.collections += 1
        self._holding = False
        self._gate.set()

    async def _answer_together(self):
        """Once `together` replies wait (or nothing new came for QUIET s), send them all at once,
        the SETs' first and the GETs' last, each with one write on its idle socket."""
        loop = asyncio.get_running_loop()
        while len(self._held) < self.together and not (
            self._held and loop.time() - self._last_arrival >= self.QUIET
        ):
            await asyncio.sleep(0.002)
        held = sorted(self._held, key=lambda h: h[0] == "GET")
        self.answered_last.update(w.get_extra_info("peername")[1] for verb, w, _ in held if verb == "GET")
        self.burst_started.set()
        for _, writer, reply in held:
            writer.write(reply.encode() + b"\n")
        self.burst_sent.set()
        self._burst.set()

    async def _behind_writes_in_flight(self):
        deadline = asyncio.get_running_loop().time() + self.READ_QUEUE_LIMIT
        while self._undecided and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.002)

    async def _after_the_refusal(self):
        """Hold a SET until the refused GET's connection has closed (at most QUIET s if no GET
        is refused), then a moment more: long enough for a client that gave up to close too."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._refused.wait(), self.QUIET)
        await asyncio.sleep(self.AFTER_REFUSAL)

    async def _serve(self, reader, writer):
        self._connections += 1
        number, now = self._connections, asyncio.get_running_loop().time
        self.events.append((number, "connected", now()))
        self._undecided.add(number)
        refused = False
        try:
            authed = False
            while line := (await reader.readline()).decode().strip():
                verb, _, rest = line.partition(" ")
                self.events.append((number, verb, now()))
                if verb == self.hang_up_after:
                    break  # no reply: the connection closes
                if verb != "AUTH":
                    self._undecided.discard(number)
                if verb == "AUTH":
                    if self._holding:
                        self._waiting += 1
                        self._last_arrival = asyncio.get_running_loop().time()
                        await self._gate.wait()
                    authed = rest == self.token
                    reply = "+OK" if authed else "-WRONGPASS invalid token"
                elif not authed:
                    reply = "-NOAUTH Authentication required."
                elif verb == "SET":
                    key, _, value = rest.partition(" ")
                    if self.refuse:
                        await self._after_the_refusal()
                        if reader.at_eof():  # the client gave up on this write meanwhile: nothing is written
                            self.events.append((number, "abandoned", now()))
                            break
                    if key in self.slow:
                        await asyncio.sleep(self.slow[key])
                        if reader.at_eof():  # the client hung up meanwhile: nothing is written
                            self.events.append((number, "abandoned", now()))
                            break
                    if key in self.fail:
                        reply = self.fail[key]
                    else:
                        self.data[key] = value
                        reply = "+OK"
                elif verb == "GET":
                    await self._behind_writes_in_flight()
                    if rest in self.refuse:
                        refused = True
                        writer.write(self.refuse[rest].encode() + b"\n")
                        await writer.drain()
                        continue
                    await asyncio.sleep(self.get_delay)
                    reply = f"+{self.data[rest]}" if rest in self.data else "_"
                else:
                    reply = f"-ERR unknown command '{verb}'"
                if self.together and verb in ("SET", "GET") and not self._burst.is_set():
                    self._held.append((verb, writer, reply))  # answered in the burst
                    self._last_arrival = asyncio.get_running_loop().time()
                    await self._burst.wait()
                    continue
                writer.write(reply.encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._undecided.discard(number)
            self.events.append((number, "closed", now()))
            writer.close()
            if refused:
                self._refused.set()


class Records(logging.Handler):
    """Keeps every record a logger emits (attached by hand: no pytest fixture needed)."""

    def __init__(self, logger: logging.Logger):
        super().__init__(logging.DEBUG)
        self.logger, self.records = logger, []

    def emit(self, record):
        self.records.append(record)

    def __enter__(self):
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self)

    def count(self, text: str) -> int:
        return sum(text in r.getMessage() for r in self.records)


@contextlib.contextmanager
def no_automatic_collection():
    """No automatic garbage collection in the block: a test about something else is not decided by when the
    collector happens to destroy a write that nothing holds (the collector has a test of its own)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def prices(n: int, prefix: str = "sku") -> dict[str, str]:
    return {f"{prefix}-{i}": f"{10 + i}.99" for i in range(n)}


def invoke(kata, store, event, invocation=1, seconds=None):
    kata.STORE_ADDRESS = store.address
    return run_bounded(kata.handler, event, what=f"handler, called directly for invocation {invocation},",
                       seconds=seconds)


def logged(records) -> str:
    """What the module's logger recorded, for an assertion message."""
    seen = "; ".join(f"{r.levelname} {r.getMessage()!r}" for r in records)
    return f"the module's logger recorded only {seen}" if seen else "the module's logger recorded nothing"


def alive_tasks() -> list[asyncio.Task]:
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, asyncio.Task)]


def test_writes_survive_a_garbage_collection(kata):
    """100 writes all land, even when the garbage collector runs while they wait for the store"""
    batch = prices(100)
    with Records(logging.getLogger("asyncio")) as asyncio_log, PriceStore(gc_during_auth=101) as store:
        store.data["price:quoted"] = "5.00"
        out = invoke(kata, store, {"prices": batch, "quote": "quoted"})
        landed = store.landed(batch)
    destroyed = asyncio_log.count("Task was destroyed but it is pending!")
    assert len(landed) == len(batch), (
        f"expected {len(batch)} of {len(batch)} writes to land, {len(landed)} landed "
        f"(calling handler directly for one invocation, against a real store that ran one garbage collection "
        f'while the writes waited for its reply; asyncio logged "Task was destroyed but it is pending!" '
        f"{destroyed} times)"
    )
    assert out == {"sku": "quoted", "price": "5.00"}, (
        f"expected handler, called directly, to return the quote {{'sku': 'quoted', 'price': '5.00'}}, got {out!r}"
    )


def test_writes_land_when_the_handler_has_nothing_to_await(kata):
    """5 writes land even when the handler returns at once (the quote is already cached)"""
    batch = prices(5)
    with Records(logging.getLogger()) as root_log, PriceStore() as store:
        out = invoke(kata, store, {"prices": batch, "quote": "sku-0"})
        landed = store.landed(batch)
    logged = f"{len(root_log.records)} log records were written" if root_log.records else "nothing was logged"
    assert len(landed) == len(batch), (
        f"expected {len(batch)} of {len(batch)} writes to land, {len(landed)} landed "
        f"(the handler returned before they finished, and {logged}): calling handler directly for one "
        "invocation whose quote is one of its own new prices, so it had nothing to await"
    )
    assert out == {"sku": "sku-0", "price": batch["sku-0"]}, (
        f"expected handler, called directly, to return the quote of sku-0, got {out!r}"
    )


def test_every_warm_invocation_lands_its_writes(kata):
    """3 warm invocations in a row each land their 5 writes"""
    with PriceStore() as store:
        for i in (1, 2, 3):
            batch = prices(5, prefix=f"inv{i}")
            invoke(kata, store, {"prices": batch, "quote": f"inv{i}-0"}, invocation=i)
            landed = store.landed(batch)
            assert len(landed) == len(batch), (
                f"invocation {i} of 3, calling handler directly in one process (a warm container): "
                f"expected {len(batch)} of {len(batch)} writes to land, {len(landed)} landed"
            )


def test_finished_writes_are_not_kept_forever(kata):
    """after 10 warm invocations, finished writes are not kept alive (nothing grows without bound)"""
    before = weakref.WeakSet(alive_tasks())
    with PriceStore() as store:
        for i in range(1, 11):
            batch = prices(5, prefix=f"inv{i}")
            invoke(kata, store, {"prices": batch, "quote": f"inv{i}-0"}, invocation=i)
    kept = [t for t in alive_tasks() if t not in before]
    loops = {id(t.get_loop()) for t in kept}
    assert len(kept) <= 5, (
        f"expected at most 5 finished write tasks alive after calling handler directly 10 times in one process "
        f"(10 warm invocations of 5 writes) and gc.collect(), found {len(kept)}, keeping {len(loops)} finished "
        "event loops alive with them"
    )


def test_a_failed_write_is_logged_with_its_traceback(kata):
    """a write the store refuses is logged with its traceback, and the other writes still land"""
    batch = prices(4)
    batch["sku-broken"] = "1.00"
    error = "-READONLY You can't write against a read only replica."
    module_logger = logging.getLogger(kata.__name__)
    with Records(module_logger) as module_log, PriceStore(fail={"price:sku-broken": error}) as store:
        out = invoke(kata, store, {"prices": batch, "quote": "sku-0"})
        logged_by_return = list(module_log.records)
    with_traceback = [
        r for r in logged_by_return
        if r.levelno >= logging.ERROR and r.exc_info and isinstance(r.exc_info[1], kata.StoreError)
    ]
    seen = "; ".join(f"{r.levelname} {r.getMessage()!r}" for r in logged_by_return) or "no record at all"
    assert with_traceback, (
        "expected the refused write's StoreError to be logged at ERROR with its traceback "
        f"(exc_info) on the module's logger before the invocation returned, got {seen} (calling handler "
        "directly for one invocation of 5 writes, against a real store that refuses one of them)"
    )
    said = str(with_traceback[0].exc_info[1])
    assert said.startswith(error[1:]), (
        f"expected the logged StoreError to say what the store answered, {error[1:]!r} (its reply without the '-' "
        f"that marks an error), got {said!r}: whoever reads the log learns why the write failed from those words"
    )
    others = [s for s in batch if s != "sku-broken"]
    assert store.landed(others) == others, (
        f"expected the {len(others)} other writes to land, {len(store.landed(others))} landed (calling handler "
        "directly, against a real store that refuses one of 5 writes)"
    )
    assert out == {"sku": "sku-0", "price": batch["sku-0"]}, (
        f"expected handler, called directly, to return its quote although one write failed, got {out!r}"
    )



def test_the_token_stays_out_of_the_log_when_the_store_hangs_up(kata):
    """when the store hangs up after AUTH, each write's failure names what it sent last, AUTH, and never the token"""
    batch = prices(2)
    token = "tok-3f9a1c"
    kata.STORE_TOKEN = token
    with no_automatic_collection(), Records(logging.getLogger(kata.__name__)) as module_log, \
            PriceStore(token=token, hang_up_after="AUTH") as store:
        try:
            invoke(kata, store, {"prices": batch, "quote": "sku-0"})
        except Hang:
            raise
        except Exception:  # noqa: BLE001 - the quote fails too: only the log is judged here
            pass
    failures = [r for r in module_log.records if r.exc_info and isinstance(r.exc_info[1], kata.StoreError)]
    assert failures, (
        f"expected each write to fail with a StoreError logged with its traceback, the store having closed the "
        f"connection after AUTH, but {logged(module_log.records)}"
    )
    said = [str(r.exc_info[1]) for r in failures]
    assert all("AUTH" in text and token not in text for text in said), (
        f"expected each logged StoreError to say the store closed the connection after AUTH, without the token "
        f"({token!r}) sent with it; they say {said!r}: a log is read by many, and a secret in it is a secret lost"
    )


def test_a_product_the_store_has_no_price_for_is_quoted_as_none_until_it_is_priced(kata):
    """a product nobody priced is quoted with price None, and once another container prices it, its price"""
    with PriceStore() as store:
        first = invoke(kata, store, {"prices": {}, "quote": "sku-new"})
        store.data["price:sku-new"] = "7.50"  # another container's write lands
        second = invoke(kata, store, {"prices": {}, "quote": "sku-new"}, invocation=2)
    how = ("calling handler twice in one warm process, against a real store that had no value for price:sku-new "
           "(it answered '_'), then had 7.50, written by another container")
    assert first == {"sku": "sku-new", "price": None}, f"expected the first quote to have price None, got {first!r} ({how})"
    assert second == {"sku": "sku-new", "price": "7.50"}, (
        f"expected the second quote to have the price another container wrote, 7.50, got {second!r} ({how}): "
        "a price that was never there must not be remembered"
    )

def carries(exc: BaseException | None, kind: type) -> bool:
    """Is `exc`, or an exception it wraps (its cause, its context, a group's members), a `kind`?"""
    seen = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, kind):
            return True
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]
    return False


def test_writes_land_when_the_quote_fails(kata):
    """3 writes still land when the invocation's quote fails, and the handler still raises the store's error"""
    batch = prices(3)
    refusal = "-LOADING the store is loading its data set in memory"
    with no_automatic_collection(), PriceStore(refuse={"price:quoted": refusal}) as store:
        try:
            out, raised = invoke(kata, store, {"prices": batch, "quote": "quoted"}), None
        except Hang:
            raise
        except Exception as exc:  # noqa: BLE001 - what the handler raised is checked below
            out, raised = None, exc
        landed = store.landed(batch)
    how = (
        "calling handler directly for one invocation of 3 writes whose quote the store refused "
        "after the writes had sent their SET"
    )
    ended = f"raised {type(raised).__name__}: {raised}" if raised is not None else f"returned {out!r}"
    assert len(landed) == len(batch), (
        f"expected {len(batch)} of {len(batch)} writes to land, {len(landed)} landed ({how}): the handler "
        f"{ended}, and the writes it had started were dropped on the way out"
    )
    assert carries(raised, kata.StoreError), (
        f"expected handler to raise the store's refusal (StoreError: {refusal[1:]}) after its writes landed, "
        f"but it {ended} ({how})"
    )


# sku -> seconds the store takes to answer its SET. A drain that gives up after a
# second loses this write; every check whose drain is right waits this long.
SLOW_WRITES = {"sku-slow": 1.25}  # slower than a 1 s drain deadline, by a margin a loaded machine keeps


def test_a_slow_write_still_lands(kata):
    """a write the store takes 1.25 s to answer still lands, or its failure is logged with its traceback"""
    batch = prices(5)
    quick = list(batch)
    batch.update({sku: "1.00" for sku in SLOW_WRITES})
    slowest = max(SLOW_WRITES.values())
    module_logger = logging.getLogger(kata.__name__)
    with Records(module_logger) as module_log, PriceStore(slow={f"price:{s}": d for s, d in SLOW_WRITES.items()}) as store:
        started = time.monotonic()
        # A correct fix takes as long as the slowest write (or all of them, one after the other): not a hang.
        out = invoke(kata, store, {"prices": batch, "quote": "sku-0"}, seconds=slowest + hang_after())
        took = time.monotonic() - started
        landed = store.landed(batch)
        logged_by_return = list(module_log.records)
    with_traceback = [
        r for r in logged_by_return
        if r.levelno >= logging.ERROR and r.exc_info and r.exc_info[1] is not None
    ]
    lost_quick = [s for s in quick if s not in landed]
    lost_slow = [f"{SLOW_WRITES[s]:g} s" for s in SLOW_WRITES if s not in landed]
    slow_ones = (
        f"the write{'s' if len(lost_slow) > 1 else ''} the store answers after {' and '.join(lost_slow)}"
        if lost_slow else ""
    )
    if lost_quick:
        lost = f"{len(lost_quick)} of the {len(quick)} quick writes" + (f" and {slow_ones}" if slow_ones else "")
        what = f"the invocation returned after {took:.1f} s without {lost}"
    else:
        what = f"every quick write landed, but the invocation returned after {took:.1f} s without {slow_ones}"
    assert len(landed) == len(batch) or with_traceback, (
        f"expected {len(batch)} of {len(batch)} writes to land, {len(landed)} landed (calling handler directly, "
        f"against a real store that takes {slowest:g} s to answer one of them): {what}, "
        f"and no failure was logged at ERROR with its traceback ({logged(logged_by_return)})"
    )
    assert out == {"sku": "sku-0", "price": batch["sku-0"]}, (
        f"expected handler, called directly, to return the quote of sku-0, got {out!r}"
    )


class WakesOnceForABurst(selectors.DefaultSelector):
    """The selector of the invocation's event loop, as on a loaded machine: the loop sleeps
    through the store's burst of replies and handles all of it in one turn, the GET's reply last."""

    def __init__(self, store: PriceStore):
        super().__init__()
        self.store, self.handled = store, False

    def select(self, timeout=None):
        ready = super().select(timeout)
        if ready and not self.handled and self.store.burst_started.is_set():
            self.handled = True
            self.store.burst_sent.wait(5)
            seen = {key.fd for key, _ in ready}
            ready += [(key, mask) for key, mask in super().select(0) if key.fd not in seen]
            ready.sort(key=lambda event: _local_port(event[0].fd) in self.store.answered_last)
        return ready


def _local_port(fd: int) -> int | None:
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return None  # not a socket
    try:
        name = sock.getsockname()
        return name[1] if isinstance(name, tuple) else None
    except OSError:
        return None
    finally:
        sock.detach()  # the fd stays the event loop's


@contextlib.contextmanager
def loops_made_with(selector, store):
    """Meanwhile, every event loop that asyncio.run makes (the kata's own call, unchanged) runs
    on `selector(store)`: an event loop policy is the hook asyncio gives for that."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the policy API is deprecated from 3.14 on

        class Policy(asyncio.DefaultEventLoopPolicy):
            def new_event_loop(self):
                return asyncio.SelectorEventLoop(selector(store))

        previous = asyncio.get_event_loop_policy()
        asyncio.set_event_loop_policy(Policy())
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            asyncio.set_event_loop_policy(previous)


def test_the_handler_returns_when_its_writes_finish_as_the_quote_comes_back(kata):
    """the handler returns when its writes finish at the very moment its quote comes back"""
    batch = prices(5)
    with PriceStore(together=len(batch) + 1) as store:
        store.data["price:quoted"] = "5.00"
        collecting = gc.isenabled()
        gc.disable()  # this test is about the done callbacks; the garbage collector has a test of its own
        with loops_made_with(WakesOnceForABurst, store):
            try:
                out = invoke(kata, store, {"prices": batch, "quote": "quoted"})
            except Hang as hang:
                n = len(batch)
                said = (
                    f"expected the invocation to return its quote once its {n} writes were done, but it did not "
                    f"finish: it is stuck (calling handler directly, against a real price store that answered the "
                    f"{n} writes and then the quote in one "
                    "burst, and the invocation's event loop took the whole burst in one turn: when the quote came "
                    "back, every write had finished and their done callbacks had not run yet)"
                )
                hang.args = (said,)  # the same stacks, with what was expected and how the test got there
                raise
            finally:
                if collecting:
                    gc.enable()
        landed = store.landed(batch)
    assert len(landed) == len(batch), (
        f"expected {len(batch)} of {len(batch)} writes to land, {len(landed)} landed (calling handler directly, "
        "against a real store that answered the writes and then the quote in one burst, which the invocation's "
        "event loop took in one turn)"
    )
    assert out == {"sku": "quoted", "price": "5.00"}, (
        f"expected handler, called directly, to return the quote {{'sku': 'quoted', 'price': '5.00'}}, got {out!r}"
    )
