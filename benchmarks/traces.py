"""One request as the benchmark saw it, in every benchmark: the engine benchmark's
requests (tokens timestamped by the engine), the engine alone beside the platform, and
the platform's requests over a websocket (tokens timestamped when their frame arrives).

Times are time.time() seconds: the client, the web tier and the workers run on one host,
so their clocks agree.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

from .stats import summarize


@dataclass
class Trace:
    request_id: str | None = None  # the engine's request id; on the platform, the reply's message id
    kind: str = "stream"  # the engine benchmark's role of the request: stream | arrival | warmup
    client: int = 0  # which of the concurrent senders sent it
    seq: int = 0  # that sender's how-manieth request
    prompt_n: int = 0  # the prompt's number (both sides of a comparison send the same numbers)
    tenant: str = ""
    t_send: float = 0.0
    t_start: float | None = None  # the platform's `start` frame (the request was admitted and stored)
    t_end: float | None = None  # the `end` (or error) frame, or the engine's finish
    tokens: dict[int, float] = field(default_factory=dict)  # output index -> when it arrived
    finish_reason: str | None = None  # the engine's (stop, length, cancelled, ...)
    usage: dict | None = None
    error: str | None = None  # the platform's error code (rate_limited, timeout, ...)
    retry_after: float | None = None
    stages: dict = field(default_factory=dict)  # where the platform's TTFT went (platform.stages)

    def token(self, index: int, ts: float) -> None:
        self.tokens[index] = ts

    def next_token(self, ts: float) -> None:
        """A token that arrived in order (a websocket frame, a decode event)."""
        self.tokens[len(self.tokens)] = ts

    @property
    def token_times(self) -> list[float]:
        return [self.tokens[i] for i in sorted(self.tokens)]

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def t_first(self) -> float | None:
        return self.tokens.get(0)

    @property
    def t_last(self) -> float | None:
        return max(self.tokens.values()) if self.tokens else None

    @property
    def ok(self) -> bool:
        return self.error is None and self.t_first is not None

    @property
    def ttft_ms(self) -> float | None:
        return (self.t_first - self.t_send) * 1e3 if self.t_first is not None else None

    @property
    def itl_ms(self) -> list[float]:
        ts = self.token_times
        return [(b - a) * 1e3 for a, b in zip(ts, ts[1:], strict=False)]

    @property
    def tpot_ms(self) -> float | None:
        """Mean time per output token after the first."""
        ts = self.token_times
        return (ts[-1] - ts[0]) * 1e3 / (len(ts) - 1) if len(ts) > 1 else None

    @property
    def e2e_tps(self) -> float | None:
        """Output tokens per second of the whole request, send to last token."""
        if not self.tokens:
            return None
        dt = self.t_last - self.t_send
        return len(self.tokens) / dt if dt > 0 else None

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("tokens")
        itl = self.itl_ms
        d.update(t_first=self.t_first, n_tokens=self.n_tokens, ttft_ms=self.ttft_ms, tpot_ms=self.tpot_ms,
                 e2e_tps=self.e2e_tps, itl_first_ms=itl[0] if itl else None)
        return d


def summarize_traces(traces: list[Trace]) -> dict:
    """Requests, errors, TTFT, inter-token gaps, time per output token and throughput."""
    ok = [t for t in traces if t.ok]
    tokens = sum(t.n_tokens for t in ok)
    span = busy_span([(t.t_send, t.t_end or t.t_last) for t in ok])
    return {
        "requests": len(traces),
        "errors": sorted({t.error for t in traces if t.error}),
        "error_count": sum(1 for t in traces if not t.ok),
        "ttft_ms": summarize(t.ttft_ms for t in ok),
        "itl_ms": summarize(g for t in ok for g in t.itl_ms),
        "itl_first_ms": summarize(t.itl_ms[0] for t in ok if t.itl_ms),  # token 0 -> 1: the KV handoff
        "tpot_ms": summarize(t.tpot_ms for t in ok),
        "e2e_tps": summarize(t.e2e_tps for t in ok),
        "output_tokens_mean": statistics.fmean(t.n_tokens for t in ok) if ok else None,
        "aggregate_tps": tokens / span if span > 0 else None,
        "wall_s": span,
    }


def busy_span(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one request (at one client the engine and platform
    requests alternate: each side's throughput counts only its own time)."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total
