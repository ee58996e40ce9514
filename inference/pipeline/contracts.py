"""The typed hand-offs between hops: what the prefill tier hands the decode tier beside
the KV, and how a reply ended (what `outcomes.request_finish` writes); and the sink the
pipeline reports replies' outcomes to (`ReplySink`), which the web tier implements. The
request spec, which every hop reads, is `inference.wire.spec.RequestSpec`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol

# A reply's finish reason when a person answers instead of the model, and the CPU tier's
# failure codes that end in one (pipeline.rendezvous reads them).
HANDOVER = "handover"  # the visitor asked for a person in words (inference.text.handover)
HANDOVER_UNGROUNDED = "handover_ungrounded"  # the knowledge has no answer (a tenant setting)


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


@dataclass(frozen=True)
class HandOver:
    """A reply the sink wrote as a hand-over to a person (`ReplySink.reply_handed_over`)."""

    conversation_id: str
    waits: bool  # the conversation now waits for a person (False: one already had it)


@dataclass(frozen=True)
class ReplyState:
    """A reply as the sink has it stored (`ReplySink.reply_state`)."""

    tenant_id: int
    status: str  # queued | prefilling | decoding while in progress; done | failed | cancelled
    error: str  # "<code>: <text>" when failed
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    ttft_ms: float | None
    duration_ms: float | None

    IN_PROGRESS = ("queued", "prefilling", "decoding")

    @property
    def final(self) -> bool:
        return self.status not in self.IN_PROGRESS


class ReplySink(Protocol):
    """Where the pipeline reports how a reply goes: the web tier's own record of it (its
    message row, the conversation's owner, the people watching). The web tier registers
    one (`sink.register`, from tandem.chat's AppConfig.ready) in every process
    that sets up Django: web, CPU and model workers alike, so the pipeline never imports
    the web tier. A reply is final once done, failed or cancelled, and a report that
    finds it final changes nothing: tiers report from different processes, redelivered
    tasks report twice."""

    def reply_progressed(self, *, request_id: str, status: str) -> None:
        """The reply reached `status` (prefilling | decoding); only ever moves forward."""

    def reply_failed(self, *, request_id: str, error: str) -> bool:
        """Mark it failed with `error` ("<code>: <text>"); False when it was already final."""

    def reply_finished(self, *, request_id: str, outcome: ReplyOutcome) -> bool:
        """Write the reply as it ended, inside the caller's transaction (its usage and
        citations are written beside it); False, with nothing written, when it was
        already final."""

    def reply_handed_over(self, *, request_id: str, text: str, reason: str) -> HandOver | None:
        """The reply is `text` (no model call) and its conversation waits for a person,
        for `reason` (words | ungrounded), unless one already has it; None when the reply
        was already final."""

    def conversation_handed_over(self, *, conversation_id: str) -> None:
        """A conversation began to wait for a person: tell the people in it (after the
        reply's own end is in its stream), and assign it as the tenant assigns."""

    def reply_state(self, *, request_id: str) -> ReplyState | None:
        """The reply as stored; None when there is no such reply."""
