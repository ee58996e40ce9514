"""Running torch work on a thread of its own, so that one thread at a time holds an OpenMP
thread pool: the engine's step loop.

torch's CPU ops (oneDNN's matmuls) and our kernels' parallel regions run in libgomp, which
keeps a pool of worker threads for every thread that has started a parallel region, for
as long as that thread lives. Once the pools' threads outnumber the CPUs, libgomp stops
letting workers spin between regions (its "throttled" spin count), so every region, in
every pool, first waits for its workers to be woken. A model loaded on the main thread
leaves such a pool behind; an engine's loop, on its own thread, then starts the second,
and every multi-threaded step after that pays the wake-ups (docs/benchmarks-engine.md).
Work done on a thread that then ends takes its pool with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

R = TypeVar("R")


def on_own_thread(fn: Callable[..., R], *args, **kwargs) -> R:
    """fn(*args, **kwargs) on a new thread, waited for: its result, or its exception raised
    here. The thread inherits the caller's CPU affinity; torch's thread count is global."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as exc:  # re-raised on the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=run, name=f"tandem-{getattr(fn, '__name__', 'work')}")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]
