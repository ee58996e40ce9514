"""A hard wall-clock budget for one task on a worker's main thread.

The CPU tier runs one task at a time per process (`-P solo`) for every tenant, and
Celery's own time limits are enforced only by its prefork pool, not by solo. So the
budget is an interval timer: when it fires, `BudgetExceeded` is raised in the task's
own frame, wherever it is (the same mechanism as Celery's soft time limit), and the
worker goes on to the next request. Code in C (RE2, the tokenizer) finishes its call
first; that is bounded by the input's length, which the web tier caps.

Another user of the real-time timer (pytest-timeout, in tests) is left intact: a
budget that would end after the other timer is not armed, and the other timer is put
back, less the time spent, when the budget ends."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


class BudgetExceeded(BaseException):
    """A BaseException, so that no `except Exception` on the way swallows it."""


@dataclass
class _Armed:
    previous_handler: object
    previous_left_s: float  # 0: no other timer was running
    started: float


_armed: _Armed | None = None  # the running budget (main thread only)


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Raise BudgetExceeded in this block once `seconds` have passed. Off (no timer) when
    `seconds` is 0, when the block is not on the main thread (signals reach only it: a
    threads pool has no budget), or when another timer already fires sooner."""
    global _armed
    if seconds <= 0 or _armed is not None or threading.current_thread() is not threading.main_thread():
        yield
        return
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    if left and left <= seconds:
        yield
        return

    def expired(signum, frame):
        disarm()
        raise BudgetExceeded(f"over the {seconds:g} s budget")

    _armed = _Armed(previous_handler=signal.signal(signal.SIGALRM, expired), previous_left_s=left,
                    started=time.monotonic())
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        disarm()


def disarm() -> None:
    """End the running budget now, if one runs (the caller's remaining work is not the
    request's own: reporting it may wait out a database outage), and give the timer back
    to whoever had it."""
    global _armed
    armed = _armed
    if armed is None or threading.current_thread() is not threading.main_thread():
        return
    _armed = None
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, armed.previous_handler)
    if armed.previous_left_s:
        left = armed.previous_left_s - (time.monotonic() - armed.started)
        signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))
