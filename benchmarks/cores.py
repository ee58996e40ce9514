"""Which cores (and at what priority) the processes and threads of a benchmark run on.

A model worker pins itself (`EngineConfig.cpu_affinity`, applied by the product's
`pin_process`); these are for what a benchmark moves from outside: another process's
threads (Linux applies affinity and nice per thread, and a thread inherits its creator's
when it starts, so every existing thread is set), or one engine thread of this process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from inference.engine.config import pin_process


def threads_of(pid: int) -> list[int]:
    """The thread ids of process `pid` now."""
    return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]


def _each(tids: Iterable[int], apply: Callable[[int], None]) -> int:
    n = 0
    for tid in tids:
        try:
            apply(tid)
            n += 1
        except (ProcessLookupError, PermissionError):  # ended meanwhile, or not ours to set
            continue
    return n


def pin_threads(tids: Iterable[int], cores: set[int]) -> int:
    """Pin each of `tids` to `cores`; returns how many were pinned."""
    return _each(tids, lambda tid: os.sched_setaffinity(tid, cores))


def renice_threads(tids: Iterable[int], nice: int) -> int:
    """Set the nice value of each of `tids` (negative values need root or CAP_SYS_NICE)."""
    return _each(tids, lambda tid: os.setpriority(os.PRIO_PROCESS, tid, nice))


def isolate_core(procs: dict[str, int], *, keep: int, move_to: int) -> dict[str, int]:
    """An experiment: move `procs` (name -> pid: everything that is not a model worker)
    and this benchmark process off core `keep`, onto core `move_to`, so that the worker
    pinned to `keep` has its core to itself (other sessions' processes aside). The
    shipped launcher leaves those processes free to run on any core. Returns the threads
    moved per process."""
    moved = {name: pin_threads(threads_of(pid), {move_to}) for name, pid in procs.items()}
    pin_process({move_to})
    moved["bench"] = len(threads_of(os.getpid()))
    return moved
