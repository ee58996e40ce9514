"""The typed hand-offs between hops: what the prefill tier hands the decode tier beside
the KV, and how a reply ended (what `outcomes.request_finish` writes). The request spec,
which every hop reads, is `inference.wire.spec.RequestSpec`."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class PrefillHandoff:
    """Sent with the decode task (the prompt's KV goes through the KV store). It
    travels as JSON in the task's arguments: `to_dict` / `from_dict`."""

    first_token: int  # sampled by prefill and already streamed as index 0
    prefill_worker: str  # the worker's name, recorded on the reply's usage
    ttft_ms: float  # from the request's enqueueing by the web tier to the first token
    prefill_engine_ms: float  # the engine's share of that: batch wait, forward, sampling
    cached_tokens: int  # prompt tokens served from the prefix cache
    queue_ms: float | None = None  # the wait before its prefill forward (ReplyOutcome.queue_ms)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PrefillHandoff:
        return cls(**data)


@dataclass(frozen=True)
class ReplyOutcome:
    """A reply that ended: its text, why it ended, its token counts and timings, the
    workers that served it, and the sources its prompt was grounded in (the spec's)."""

    text: str
    finish_reason: str  # stop | length | cancelled
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    ttft_ms: float | None
    duration_ms: float  # from the request's enqueueing to its end
    prefill_worker: str
    decode_worker: str
    prefill_engine_ms: float | None = None
    # From the request's enqueueing until the model began its prompt: the CPU tier, the
    # queues, and the wait for a prefill batch or a decode slot (the console's "queue wait").
    queue_ms: float | None = None
    sources: tuple[dict, ...] = ()  # {"article_id", "title", "url", "score"}, best first

    @property
    def usage(self) -> dict:
        """OpenAI's usage object, as the stream's end record carries it."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": self.cached_tokens}}

    @property
    def timings(self) -> dict:
        return {"ttft_ms": self.ttft_ms, "duration_ms": self.duration_ms,
                "prefill_engine_ms": self.prefill_engine_ms, "queue_ms": self.queue_ms}
