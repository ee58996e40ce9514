"""Where the machine's cores went while a round ran: the CPU time of each platform process
(with its children) and of this benchmark's own process (its client threads), divided by
the round's wall time. The engine alone, measured beside it, runs prefill and decode with
the cores to themselves; in a platform round the web processes, the CPU tier and the
simulated visitors take their share of the same cores, and this is that share."""

from __future__ import annotations

import os
import time

# This process: the simulated visitors' threads (and the engine alone, idle meanwhile).
# Its children are the platform's processes, counted under their own names.
OWN = "visitors (this benchmark)"


def _cpu_s(proc, *, children: bool = True) -> float:
    import psutil

    total = 0.0
    for p in [proc, *(proc.children(recursive=True) if children else ())]:
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
        me = psutil.Process(os.getpid())
        # The Redis server the benchmark started is its child, like the platform's
        # processes: named on its own, so that "visitors" is this process's threads alone.
        for child in me.children():
            try:
                if child.name().startswith("redis-server"):
                    self.procs["redis"] = child
            except psutil.NoSuchProcess:
                continue
        self.procs[OWN] = me
        self.cores: dict[str, float] = {}
        self.cpu_s: dict[str, float] = {}

    def __enter__(self) -> CpuShare:
        self._t0 = time.monotonic()
        self._before = {name: _cpu_s(p, children=name != OWN) for name, p in self.procs.items()}
        return self

    def __exit__(self, *exc) -> None:
        wall = time.monotonic() - self._t0
        self.cpu_s = {name: round(_cpu_s(p, children=name != OWN) - self._before[name], 3)
                      for name, p in self.procs.items()}
        self.cores = {name: round(used / wall, 3) for name, used in self.cpu_s.items()}
        self.cores["machine cores"] = os.cpu_count() or 0
