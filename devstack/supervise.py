"""Keeping `make run`'s processes up: a process that exits is started again after a
backoff (1 s, doubling to 30 s; back to 1 s once it has stayed up a minute), with its
restart count and the reason it exited (exit status or signal) printed. One process
exiting never stops the others: the platform keeps serving while it comes back (its
in-flight requests move to the other workers, or wait for it: inference/pipeline/
supervisor.py)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BACKOFF_FIRST_S, BACKOFF_MAX_S = 1.0, 30.0
STABLE_AFTER_S = 60.0  # up this long: the next exit starts the backoff from the beginning


@dataclass
class Service:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    restarts: int = 0
    started_at: float = 0.0
    backoff_s: float = BACKOFF_FIRST_S
    restart_at: float | None = None  # exited: when it starts again


def exit_reason(returncode: int) -> str:
    """`exit status 1`, or `killed by SIGKILL` (Popen reports a signal as -N)."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


class Supervisor:
    def __init__(self, services: list[Service], *, cwd: Path, base_env: dict[str, str],
                 say: Callable[[str], None] = lambda m: print(f"[tandem] {m}", flush=True),
                 clock: Callable[[], float] = time.monotonic):
        self.services, self.cwd, self.base_env, self.say, self.clock = services, cwd, base_env, say, clock
        self.stopping = False  # set from a signal handler: nothing is started again after it

    def start_all(self) -> None:
        for svc in self.services:
            self._start(svc)
            self.say(f"started {svc.name} (pid {svc.proc.pid})")

    def poll(self) -> None:
        """Notice exits, start again what is due. Call it every fraction of a second."""
        if self.stopping:
            return
        now = self.clock()
        for svc in self.services:
            if svc.restart_at is None and svc.proc is not None and svc.proc.poll() is not None:
                if now - svc.started_at >= STABLE_AFTER_S:
                    svc.backoff_s = BACKOFF_FIRST_S
                svc.restart_at = now + svc.backoff_s
                self.say(f"{svc.name} (pid {svc.proc.pid}) exited: {exit_reason(svc.proc.returncode)}; "
                         f"restarting in {svc.backoff_s:.0f} s (restart {svc.restarts + 1})")
                svc.backoff_s = min(BACKOFF_MAX_S, svc.backoff_s * 2)
            elif svc.restart_at is not None and now >= svc.restart_at:
                svc.restarts += 1
                self._start(svc)
                self.say(f"restarted {svc.name} (pid {svc.proc.pid}, restart {svc.restarts})")

    def stop_all(self, timeout: float = 15) -> None:
        self.stopping = True
        for svc in self.services:
            if svc.proc and svc.proc.poll() is None:
                svc.proc.terminate()
        deadline = time.monotonic() + timeout
        for svc in self.services:
            if svc.proc:
                try:
                    svc.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    svc.proc.kill()
                    # Reaped here: an unreaped child outlives us as a zombie, and where
                    # PID 1 does not reap orphans (some container inits) it stays one.
                    svc.proc.wait(timeout=10)

    def _start(self, svc: Service) -> None:
        svc.proc = subprocess.Popen(svc.argv, cwd=self.cwd, env={**self.base_env, **svc.env})
        svc.started_at = self.clock()
        svc.restart_at = None
