"""The harness of notebook 15 (The service that counted the host's CPUs): a real CPU quota.

`measure(starter, cpus, busy, seconds)` runs one experiment in a fresh Python
process with a hard deadline (`run_isolated`). Where the kernel allows it
(services.containers), that process first moves itself into a fresh cgroup
whose CPU quota is `cpus` (or, for `cpus=None`, a quota four times the
machine's CPUs, which it can never use up: as good as none, and its cpu.stat
still counts the periods); a cgroup with a real quota gets the largest CPU
weight, so that a busy machine cannot keep it from using its quota up. Where it does not, the process is stopped for
(1 - cpus) of every 0.1 s with SIGSTOP by a small helper process instead (the
fallback: the same stops, and no counter). Then, in that process:

- what it sees: os.cpu_count(), its affinity, os.process_cpu_count() (3.13),
  its line of /proc/self/cgroup and its cgroup's quota files;
- the package's start-up: `runtime.effective_cpus()`, `sizing().workers`, and
  the threads the default executor that `install(loop)` gives a loop starts
  for forty blocking jobs at once;
- with `busy`, a thread that keeps the CPU busy in pure Python (holding the
  GIL but for the switch interval), while the loop's lag is sampled every
  10 ms beside the package's own `lagmon.watch(seconds)`; each sample
  records the cgroup's nr_throttled as it was then.

`report(run)` prints a run in words; `draw(runs, title)` plots the lag of each
run over time, with the throttled periods marked.
"""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from loopkata import run_isolated
from loopkata.services import containers

ROOT = Path(__file__).resolve().parents[2]  # the project: notebooks/labs/ -> notebooks/ -> .
SAMPLE = 0.01  # seconds between two lag samples
FLOOD = 40  # blocking jobs sent to the default executor at once
ROOMY = 4 * (os.cpu_count() or 1)  # CPUs of the quota that stands for "no quota": more than the machine has
# The fallback's helper: stops process PID for (1 - CPUS) of every 0.1 s until its stdin closes.
_DUTY = ("import sys\nfrom loopkata.services.containers import duty_cycle\n"
         "with duty_cycle(int(sys.argv[1]), float(sys.argv[2])):\n    sys.stdin.read()\n")


def real() -> bool:
    """Whether this machine gives a real cgroup with a CPU quota (else: the SIGSTOP fallback)."""
    return containers.missing(containers.CPU_LIMIT) == ""


def favour(cgroup) -> None:
    """The largest CPU weight for `cgroup` (cpu.shares on v1, cpu.weight on v2): on a busy machine it still
    gets the CPU time to use its quota up, as a pod whose CPU request matches its limit does."""
    folder = cgroup.dirs.get("cpu")
    for name, value in (("cpu.shares", "262144"), ("cpu.weight", "10000")):
        if folder is not None and (folder / name).is_file():
            with contextlib.suppress(OSError):
                (folder / name).write_text(value)


# --- inside the experiment's process -------------------------------------------------------------

def _load(impl: Path):
    name = f"lab15_package_{len(sys.modules)}"
    spec = importlib.util.spec_from_file_location(name, impl / "__init__.py", submodule_search_locations=[str(impl)])
    sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[name])
    return importlib.import_module(f"{name}.runtime"), importlib.import_module(f"{name}.lagmon")


def _counters(stat: str) -> dict:
    counters = {}
    with contextlib.suppress(OSError):
        for line in Path(stat).read_text().splitlines():
            name, _, value = line.partition(" ")
            if value.strip().isdigit():
                counters[name] = int(value)
    return counters


def _threads_started(loop) -> int:
    gate = threading.Event()

    async def flood() -> int:
        before = set(threading.enumerate())
        jobs = [loop.run_in_executor(None, gate.wait, 30) for _ in range(FLOOD)]
        started = len([t for t in threading.enumerate() if t not in before])
        gate.set()
        await asyncio.gather(*jobs)
        return started

    return loop.run_until_complete(flood())


def experiment(impl: str, procs: list[str], stat: str, duty: float | None, busy: bool, seconds: float) -> None:
    """Join the cgroup (or start the fallback's helper), then measure; print one JSON line."""
    for path in procs:
        Path(path).write_text(str(os.getpid()))  # from here on, every thread of this process is under its quota
    helper = None
    if duty is not None:
        helper = subprocess.Popen([sys.executable, "-c", _DUTY, str(os.getpid()), str(duty)], stdin=subprocess.PIPE)
    runtime, lagmon = _load(Path(impl))
    folder = Path(stat).parent if stat else None
    quota = {f: (folder / f).read_text().strip() for f in ("cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.max")
             if folder and (folder / f).exists()}
    cgroup_line = next((line for line in Path("/proc/self/cgroup").read_text().splitlines()
                        if line.split(":")[1] in ("", "cpu") or "cpu" in line.split(":")[1].split(",")), "")
    run = {
        "real": bool(stat), "quota_files": quota, "cgroup_line": cgroup_line, "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "process_cpu_count": os.process_cpu_count() if hasattr(os, "process_cpu_count") else None,
        "effective_cpus": runtime.effective_cpus(), "workers": runtime.sizing().workers,
    }
    loop = asyncio.new_event_loop()
    runtime.install(loop)
    run["threads"] = _threads_started(loop)
    stop = threading.Event()

    def spin() -> None:  # pure Python: it holds the GIL but for the switch interval
        n = 0
        while not stop.is_set():
            n += 1

    async def sample() -> list:
        samples, start = [], loop.time()
        while loop.time() - start < seconds:
            asked = loop.time()
            await asyncio.sleep(SAMPLE)
            woke = loop.time()
            samples.append((woke - start, max(0.0, woke - asked - SAMPLE) * 1000,
                            _counters(stat).get("nr_throttled", 0) if stat else 0))
        return samples

    async def both():
        return await asyncio.gather(lagmon.watch(seconds), sample())

    if busy:
        threading.Thread(target=spin, daemon=True).start()
    before = _counters(stat) if stat else {}
    report, samples = loop.run_until_complete(both())
    after = _counters(stat) if stat else {}
    stop.set()
    if helper is not None:
        helper.stdin.close()
        helper.wait()
    run.update(samples=samples, report=str(report), cause=report.cause, busy=busy, seconds=seconds,
               periods=after.get("nr_periods", 0) - before.get("nr_periods", 0),
               throttled=after.get("nr_throttled", 0) - before.get("nr_throttled", 0))
    print(json.dumps(run))


# --- in the notebook --------------------------------------------------------------------------------

def measure(starter: Path, cpus: float | None, busy: bool = True, seconds: float = 1.0) -> dict:
    """The package at `starter`, in a cgroup whose quota is `cpus` CPUs (None: more than the machine has)."""
    def go(procs: list[str], stat: str, duty: float | None) -> dict:
        code = (f"import sys\nsys.path.insert(0, {str(ROOT / 'notebooks')!r})\nfrom labs.lab15 import experiment\n"
                f"experiment({str(starter)!r}, {procs!r}, {stat!r}, {duty!r}, {busy!r}, {seconds!r})\n")
        out = run_isolated(code, timeout=seconds + 30)
        lines = out.stdout.strip().splitlines()
        if out.returncode != 0 or not lines:
            out.show()
            raise RuntimeError("the experiment did not finish; its output is above")
        return json.loads(lines[-1])

    if real():
        with containers.Cgroup(cpus=cpus if cpus is not None else ROOMY) as cgroup:
            if cpus is not None:
                favour(cgroup)
            procs = [str(d / "cgroup.procs") for d in dict.fromkeys(cgroup.dirs.values())]
            run = go(procs, str(cgroup.dirs["cpu"] / "cpu.stat"), None)
    else:
        run = go([], "", cpus)
    run["cpus"] = cpus
    return run


def p99(run: dict) -> float:
    lags = sorted(lag for _, lag, _ in run["samples"])
    return lags[min(len(lags) - 1, int(0.99 * len(lags)))] if lags else 0.0


def quota_words(run: dict) -> str:
    if run["cpus"] is None:
        return f"a quota of {ROOMY} CPUs, more than the machine has" if run["real"] else "no CPU limit"
    if run["real"]:
        return f"a CPU quota of {run['cpus']:g} (a real cgroup)"
    return f"stopped {(1 - run['cpus']) * 100:.0f}% of every 0.1 s by SIGSTOP (the fallback for a quota of {run['cpus']:g})"


def report(run: dict) -> None:
    """One run in words."""
    print(f"{quota_words(run)}, {'a busy thread beside the loop' if run['busy'] else 'no busy thread'}:")
    print(f"  os.cpu_count() {run['cpu_count']}, affinity {run['affinity']} CPUs; the service's effective_cpus() "
          f"{run['effective_cpus']}, {run['workers']} workers, a default executor of {run['threads']} threads")
    print(f"  loop lag p99 {p99(run):.1f} ms over {len(run['samples'])} samples")
    if run["real"]:
        print(f"  the cgroup's cpu.stat: throttled in {run['throttled']} of {run['periods']} periods")
    else:
        print("  no cgroup, so no cpu.stat: the fallback's stops are counted nowhere")
    print(f"  the service's lag monitor says: {run['cause']}")


def draw(runs: list[dict], title: str) -> None:
    """Each run's lag samples against time, one panel per run; a sample in which nr_throttled grew is red."""
    import matplotlib.pyplot as plt  # here, not at the top: each experiment's process imports this module, draws nothing

    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 2.4 * len(runs) + 0.6), sharex=True, sharey=True,
                             squeeze=False)
    for ax, run in zip(axes[:, 0], runs):
        samples = run["samples"]
        last = samples[0][2] if samples else 0
        for at, lag, throttled in samples:
            hit = throttled > last
            last = throttled
            ax.vlines(at, 0, lag, color="tab:red" if hit else "tab:blue", linewidth=2)
        ax.axhline(p99(run), color="0.4", linestyle="--", linewidth=1)
        ax.text(0.995, 0.95, f"p99 {p99(run):.0f} ms", transform=ax.transAxes, ha="right", va="top", fontsize=9)
        ax.set_title(f"{quota_words(run)}: throttled in {run['throttled']} of {run['periods']} periods"
                     if run["real"] else quota_words(run), fontsize=10, loc="left")
        ax.set_ylabel("loop lag (ms)")
    axes[-1, 0].set_xlabel("time since the monitor started (s)")
    handles = [plt.Line2D([], [], color="tab:red", linewidth=2), plt.Line2D([], [], color="tab:blue", linewidth=2)]
    fig.legend(handles, ["a sample during which the cgroup's nr_throttled grew", "any other sample"],
               loc="lower center", ncol=2, fontsize=9, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
