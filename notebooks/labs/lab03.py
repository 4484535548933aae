"""The harness of notebook 03 (The weak dictionary that kept every loop): loops counted, for real.

Every measurement runs a kata file (the starter's private copy, a decoy, your
copy) in a fresh Python process: the notebook's kernel runs an event loop of
its own, and a fresh process starts with clean memory, so the loops counted
are the ones the code under test left behind.

- `run_with(path, script)`: run `script` in a fresh process, after the file's
  code, in the same globals (so the script sees `handler`, `LoopLocalLock`...);
- `measure(path, invocations, new, copies, every)`: play warm invocations and
  count the event loops still alive after `gc.collect()`, with the RSS;
- `growth(series)`: RSS growth over a measurement;
- `find_python39()`: a Python 3.9 on this machine, if there is one;
- `two_loops_at_once(path)`: two threads, each with its own event loop, using
  one `LoopLocalLock` at the same time.

Nothing here is a fix: the code under test always comes from the file given.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from pathlib import Path


def _head(path) -> str:
    """The start of a child's script: the kata file's code, run in the script's own globals.

    exec() rather than pasting the text, so a `from __future__` line in the file
    stays the first line of what is compiled.
    """
    path = str(Path(path).resolve())
    return f"exec(compile(open({path!r}, encoding='utf-8').read(), {path!r}, 'exec'))\n"


def run_with(path, script: str, timeout: float = 30):
    """Run `script` in a fresh process after the code of the file `path`; returns run_isolated's Outcome."""
    from loopkata import run_isolated

    return run_isolated(_head(path) + script, timeout=timeout)


# Runs in the child, after the kata file. It wraps the model call to keep a
# weak reference to each invocation's loop (a weak one: counting must not keep
# a loop alive), plays the invocations and prints the checkpoints as JSON.
# Plain Python 3.9, so that the same script runs on an older interpreter.
MEASURE = """
import asyncio, gc, json, weakref

def rss_mib():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None                                 # not Linux: no /proc

loops = []                                          # a weak reference to each invocation's loop
_model = embed_remote

async def embed_remote(text):
    loops.append(weakref.ref(asyncio.get_running_loop()))
    return await _model(text)

def queries(i):
    new = [f"query {i}{c}" for c in "abc"[:NEW]] or ["an already cached text"]
    return new * COPIES                             # each text asked for COPIES times at once

def alive():
    gc.collect()
    return len({id(loop) for loop in (r() for r in loops) if loop is not None})

series = [(0, 0, rss_mib())]
for i in range(1, INVOCATIONS + 1):
    handler({"queries": queries(i)})
    if i % EVERY == 0 or i == INVOCATIONS:
        series.append((i, alive(), rss_mib()))
print(json.dumps(series))
"""


def measure(path, invocations, new=2, copies=3, every=50, python=None):
    """[(invocations so far, loops alive after gc.collect(), RSS in MiB), ...] from a fresh process.

    A contended invocation asks for `new` new texts, each `copies` times at
    once; with copies=1 and new=1 nobody ever waits on the lock.
    """
    params = f"INVOCATIONS, NEW, COPIES, EVERY = {invocations}, {new}, {copies}, {every}\n"
    if python is None:
        out = run_with(path, params + MEASURE, timeout=120)
        if out.returncode != 0:
            out.show()
            raise RuntimeError("the measurement did not finish")
        return json.loads(out.stdout)
    done = subprocess.run([python, "-c", _head(path) + params + MEASURE],
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the measurement failed:\n{done.stderr}")
    return json.loads(done.stdout)


def growth(series):
    """RSS growth in MiB from the first checkpoint to the last (None without /proc)."""
    first, last = series[1][2], series[-1][2]
    return None if first is None or last is None else last - first


def _version(python: str) -> str:
    """The version an interpreter reports, or '' if it does not run."""
    try:
        done = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                              capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def find_python39():
    """(path, version) of a Python 3.9 on this machine (on the PATH or under pyenv), or (None, '')."""
    candidates = [shutil.which("python3.9"), *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python")))]
    for python in filter(None, candidates):
        version = _version(python)
        if version.startswith("3.9"):
            return python, version
    return None, ""


# Runs in the child, after the kata file: only its LoopLocalLock is used. Real
# threads and events decide the order, never sleeps: thread A's loop takes the
# lock and calls the model; meanwhile thread B's loop asks for the lock; then a
# second request of loop A asks for the same text.
TWO_LOOPS = """
import asyncio, threading

lll = LoopLocalLock()
cache = {}
b_go, b_asked, a2_asked = threading.Event(), threading.Event(), threading.Event()
report = {who: {"locks": set(), "inside": 0, "most inside": 0, "model calls": 0} for who in "AB"}

async def model_call(who):
    if who == "B":
        b_asked.set()                          # B holds its lock and calls the model...
    await asyncio.to_thread(a2_asked.wait, 5)  # ...which lasts until A's second request asks

async def request(text, who, second=False):
    # One request through the double-checked cache, counted per loop.
    stats = report[who]
    if text in cache:
        return
    lock = lll.get()
    stats["locks"].add(lock)
    if second:
        a2_asked.set()
    async with lock:
        stats["inside"] += 1
        stats["most inside"] = max(stats["most inside"], stats["inside"])
        if text not in cache:
            stats["model calls"] += 1
            await model_call(who)
            cache[text] = "vector"
        stats["inside"] -= 1

async def loop_a():                            # thread A: one invocation, two requests for one text
    first = asyncio.create_task(request("q", "A"))
    await asyncio.sleep(0)                     # the first request takes the lock and calls the model
    b_go.set()
    await asyncio.to_thread(b_asked.wait, 5)   # meanwhile thread B's loop asks for the lock
    await asyncio.gather(first, request("q", "A", second=True))

def thread_b():                                # thread B: another invocation, at the same time
    b_go.wait(5)
    asyncio.run(request("q", "B"))

b = threading.Thread(target=thread_b)
b.start()
asyncio.run(loop_a())
b.join()
for who in "AB":
    s = report[who]
    print(f"  loop {who}: {len(s['locks'])} lock(s) handed out, at most {s['most inside']} request(s) "
          f"inside the lock at once, {s['model calls']} model call(s) for one text")
"""


def two_loops_at_once(path) -> None:
    """Play two event loops at once, on two threads, with the LoopLocalLock of the file `path`, and print what each saw."""
    run_with(path, TWO_LOOPS, timeout=20).show()
