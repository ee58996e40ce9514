"""Where the machine's cores went while a round ran: the CPU time of each platform process
(with its children) and of this benchmark's own process (its client threads), divided by
the round's wall time. The engine alone, measured beside it, runs prefill and decode with
the cores to themselves; in a platform round the web processes, the CPU tier and the
simulated visitors take their share of the same cores, and this is that share."""

from __future__ import annotations

import os
import time


def _cpu_s(proc) -> float:
    import psutil

    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:  # a child that ended meanwhile: its time is lost
            continue
    return total


class CpuShare:
    """`with CpuShare({"web": pid, ...}) as share:` ... `share.cores` -> {name: cores used}."""

    def __init__(self, pids: dict[str, int]):
        import psutil

        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.procs["visitors (this benchmark)"] = psutil.Process(os.getpid())
        self.cores: dict[str, float] = {}

    def __enter__(self) -> CpuShare:
        self._t0 = time.monotonic()
        self._before = {name: _cpu_s(p) for name, p in self.procs.items()}
        return self

    def __exit__(self, *exc) -> None:
        wall = time.monotonic() - self._t0
        self.cores = {name: round((_cpu_s(p) - self._before[name]) / wall, 3) for name, p in self.procs.items()}
        self.cores["machine cores"] = os.cpu_count() or 0
