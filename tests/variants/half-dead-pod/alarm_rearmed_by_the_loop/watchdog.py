"""The worker's event-loop watchdog, as an alarm clock the loop keeps pushing back.

Every quarter of the limit the loop sets the process's real-time timer to the
whole limit again. A frozen loop stops doing so, the timer runs out, and the
SIGALRM handler ends the process. Python runs a signal handler in the main
thread, the loop's own, but between two bytecodes or when a blocking call is
interrupted by the signal, so it runs while the loop is frozen in a call.
"""
import asyncio
import os
import signal

MESSAGE = b"exports.watchdog: event loop frozen past its limit: exiting so that the worker is replaced\n"


def _frozen(signum, frame) -> None:
    os.write(2, MESSAGE)
    os._exit(1)


def start(limit: float) -> asyncio.TimerHandle:
    """Arm the alarm and let the running loop push it back; call it on the loop, in the main thread."""
    loop = asyncio.get_running_loop()
    signal.signal(signal.SIGALRM, _frozen)

    def push_back() -> asyncio.TimerHandle:
        signal.setitimer(signal.ITIMER_REAL, limit)
        return loop.call_later(limit / 4, push_back)

    return push_back()
