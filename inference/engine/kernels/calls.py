"""Calling a kernel: over a range split across torch's threads, named in a profile.

ctypes releases the GIL for the duration of a foreign call, so the pieces of a range
called from several Python threads run in parallel. A small pool, started on first use
and grown to the thread count asked for, serves every kernel of the process.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch

# True: each call shows in a torch profile under its kernel's name (benchmarks.engine.step
# sets it). Off by default: a profiler range costs microseconds per call, a visible share
# of a one-row decode step.
PROFILE = False

# Output features per thread below which splitting a row matmul through this pool
# (row_linear; block_linear built without OpenMP) costs more than it saves: handing a piece to
# the pool costs tens of microseconds, as much as streaming a small layer's weights, so of a
# decode step's matmuls only the LM head is split. Kernels built with OpenMP split their own
# work in torch's threads (kernels/parallel.h).
MIN_FEATURES_PER_THREAD = 16384

_pool: ThreadPoolExecutor | None = None
_workers = 0


def kernel_threads(splits_itself: bool) -> int:
    """The thread count a kernel call is given: torch's where the kernel splits its own work
    (its OpenMP build), else 1 (each piece of run_split's runs on one thread)."""
    return torch.get_num_threads() if splits_itself else 1


def run_once(name: str, fn: Callable[..., int], args: tuple, check: Callable[[int], None]) -> None:
    """fn(*args) on this thread, check() its result."""
    if PROFILE:
        with torch.profiler.record_function(name):
            check(fn(*args))
    else:
        check(fn(*args))


def run_split(name: str, fn: Callable[..., int], head: tuple, n: int, tail: tuple, min_per_thread: int,
              check: Callable[[int], None], *, splits_itself: bool) -> None:
    """fn(*head, start, end, *tail, threads) over [0, n); check() each result. A kernel that
    splits its own work gets one call and torch's thread count; otherwise the range goes in
    one piece per thread of this pool (at most torch.get_num_threads(), each at least
    min_per_thread long), each call told 1 thread."""
    if splits_itself:
        run_once(name, fn, (*head, 0, n, *tail, kernel_threads(True)), check)
    elif PROFILE:
        with torch.profiler.record_function(name):
            _run_split(fn, head, n, (*tail, 1), min_per_thread, check)
    else:
        _run_split(fn, head, n, (*tail, 1), min_per_thread, check)


def _run_split(fn, head: tuple, n: int, tail: tuple, min_per_thread: int, check) -> None:
    global _pool, _workers
    threads = min(torch.get_num_threads(), n // max(1, min_per_thread))
    if threads <= 1:
        check(fn(*head, 0, n, *tail))
        return
    if _pool is None or _workers < threads - 1:
        _pool, _workers = ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="tandem-kernel"), threads - 1
    bounds = [n * i // threads for i in range(threads + 1)]
    futures = [_pool.submit(fn, *head, bounds[i], bounds[i + 1], *tail) for i in range(1, threads)]
    check(fn(*head, bounds[0], bounds[1], *tail))
    for f in futures:
        check(f.result())
