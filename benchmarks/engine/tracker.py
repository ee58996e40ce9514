"""The requests of one engine-benchmark run: their traces, filled from the engine's
callbacks (or the worker processes' messages) on any thread, waited on with progress
lines, and their metrics: TTFT, inter-token latency and aggregate tokens/s."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..report import say
from ..stats import percentile
from ..traces import Trace

WAIT_S = 900.0  # no single phase may take longer than this


class Tracker:
    def __init__(self) -> None:
        self.traces: dict[str, Trace] = {}
        self.tokens = 0
        self.error: str | None = None
        self.worker_stats: dict[str, dict] = {}  # disaggregated: per request, from the workers
        self._cond = threading.Condition()

    def submitted(self, rid: str, kind: str) -> None:
        with self._cond:
            self.traces[rid] = Trace(request_id=rid, kind=kind, t_send=time.time())

    def token(self, rid: str, index: int, ts: float) -> None:
        with self._cond:
            tr = self.traces.get(rid)
            if tr is None:  # a straggler from an earlier run
                return
            tr.token(index, ts)
            self.tokens += 1
            if index == 0:
                self._cond.notify_all()

    def finish(self, rid: str, reason: str) -> None:
        with self._cond:
            tr = self.traces.get(rid)
            if tr is not None:
                tr.finish_reason = reason
                tr.t_end = time.time()
                self._cond.notify_all()

    def fail(self, error: str) -> None:
        with self._cond:
            self.error = error
            self._cond.notify_all()

    def wait(self, pred: Callable[[], bool], *, what: str, timeout: float = WAIT_S,
             expected_tokens: int | None = None) -> None:
        """Until pred() (evaluated under the lock); a progress line every 15 s."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if self.error:
                    raise RuntimeError(f"worker failed while waiting for {what}:\n{self.error}")
                if pred():
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{what}: not done after {timeout:.0f} s")
                if not self._cond.wait(min(left, 15.0)) and not pred():
                    total = f"/{expected_tokens}" if expected_tokens else ""
                    say(f"    ... {what}: {self.tokens}{total} tokens so far")

    def sleep(self, seconds: float) -> None:
        """Sleep, but wake early on a first token or a finish (the mixed loop's tick)."""
        if seconds > 0:
            with self._cond:
                self._cond.wait(seconds)

    def check(self, pred: Callable[[], bool]) -> bool:
        with self._cond:
            return bool(self.error) or pred()

    def all_first(self, rids: list[str]) -> bool:
        return all(self.traces[r].t_first is not None for r in rids)

    def all_done(self, rids: list[str]) -> bool:
        return all(self.traces[r].finish_reason is not None for r in rids)

    def any_done(self, rids: list[str]) -> bool:
        return any(self.traces[r].finish_reason is not None for r in rids)


def metrics(traces: list[Trace], *, window: tuple[float, float] | None = None) -> dict:
    """TTFT and inter-token latency percentiles (ms), output tokens, aggregate tokens/s.
    With a window, only the gaps that lie wholly inside it count toward ITL."""
    ttft = [tr.ttft_ms for tr in traces if tr.t_first is not None]
    gaps: list[float] = []
    for tr in traces:
        t = tr.token_times
        for a, b in zip(t, t[1:], strict=False):
            if window is None or (a >= window[0] and b <= window[1]):
                gaps.append((b - a) * 1e3)
    tokens = sum(tr.n_tokens for tr in traces)
    last = max((tr.t_last for tr in traces if tr.tokens), default=None)
    start = min((tr.t_send for tr in traces), default=None)
    wall = (last - start) if last is not None and start is not None else None
    return {
        "requests": len(traces),
        "output_tokens": tokens,
        "wall_s": wall,
        "tokens_per_s": tokens / wall if wall else None,
        "ttft_p50_ms": percentile(ttft, 50), "ttft_p99_ms": percentile(ttft, 99),
        "itl_p50_ms": percentile(gaps, 50), "itl_p99_ms": percentile(gaps, 99),
        "itl_max_ms": max(gaps) if gaps else None,
        "itl_samples": len(gaps),
        "incomplete": sum(1 for tr in traces if tr.finish_reason not in ("length", "stop")),
    }
