"""A hard wall-clock budget for one task on a worker's main thread.

The CPU tier runs one task at a time per process (`-P solo`) for every tenant, and
Celery's own time limits are enforced only by its prefork pool, not by solo. So the
budget is an interval timer: when it fires, `BudgetExceeded` is raised in the task's
own frame, wherever it is (the same mechanism as Celery's soft time limit), and the
worker goes on to the next request. Code in C (RE2, the tokenizer) finishes its call
first; that is bounded by the input's length, which the web tier caps."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class BudgetExceeded(BaseException):
    """A BaseException, so that no `except Exception` on the way swallows it."""


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Raise BudgetExceeded in this block once `seconds` have passed. Off (no timer) when
    `seconds` is 0 or the block is not on the main thread (signals reach only it: a
    threads pool has no budget)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise BudgetExceeded(f"over the {seconds:g} s budget")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def disarm() -> None:
    """End the running budget early (nothing when none runs): the caller's remaining work
    is not the request's own (e.g. reporting it, which may wait out a database outage)."""
    if threading.current_thread() is threading.main_thread():
        signal.setitimer(signal.ITIMER_REAL, 0)
