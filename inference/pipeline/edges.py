"""What every model tier does at the edges of a request: check the spec its stage found
(ending the request if it expired or was cancelled while queued), turn its sampling into
engine parameters, and end it early (before decode) with its message, usage and stream
closed."""

from __future__ import annotations

import time

from ..engine.prefix_cache import SharedPrefix
from ..engine.sampling import SamplingParams
from ..wire import streams
from ..wire.spec import RequestSpec, Sampling
from ..worker.runtime import Runtime
from . import outcomes
from .contracts import ReplyOutcome
from .stages import Start

EXPIRED = ("expired", "The request expired in the queue.")


def sampling_params(s: Sampling) -> SamplingParams:
    """The engine's sampling parameters for a request's (`spec.sampling`)."""
    return SamplingParams(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=s.seed,
                          max_tokens=max(1, s.max_tokens), frequency_penalty=s.frequency_penalty,
                          presence_penalty=s.presence_penalty, repetition_penalty=s.repetition_penalty,
                          logit_bias=[(int(t), float(b)) for t, b in s.logit_bias],
                          grammar=s.grammar or None, logprobs=s.logprobs, top_logprobs=s.top_logprobs)


def cache_shared(spec: RequestSpec) -> SharedPrefix | None:
    """The part of the prompt that may reuse the tenant's cache entries (its system
    prompt), when the prompt itself is salted per conversation (inference.text.cache_scope)."""
    if not spec.cache_shared_salt or spec.cache_shared_salt == spec.cache_salt or spec.cache_shared_tokens <= 0:
        return None
    return SharedPrefix(salt=spec.cache_shared_salt, tokens=spec.cache_shared_tokens)


def live_spec(rt: Runtime, request_id: str, begun: Start) -> RequestSpec | None:
    """The spec of a request this delivery runs (`begun`: what taking its stage found):
    None when it does not run here, or (after ending it) when it expired or was
    cancelled while it waited in the queue."""
    if not begun.runs:
        return None
    if begun.spec is None:
        outcomes.request_fail(request_id=request_id, code=EXPIRED[0], message=EXPIRED[1])
        return None
    if begun.cancelled:
        finish_early(rt, begun.spec, reason="cancelled")
        return None
    return begun.spec


def finish_early(rt: Runtime, spec: RequestSpec, *, reason: str, text: str = "", completion: int = 0,
                 cached: int = 0, ttft_ms: float | None = None, queue_ms: float | None = None) -> None:
    """End a request that never reaches decode (cancelled before it, or finished by its
    first token): persist, then close the stream."""
    outcome = ReplyOutcome(
        text=text, finish_reason=reason, prompt_tokens=len(spec.prompt_token_ids),
        completion_tokens=completion, cached_tokens=cached, ttft_ms=ttft_ms, queue_ms=queue_ms,
        duration_ms=(time.time() - spec.enqueued_at) * 1000, prefill_worker=rt.name, decode_worker="",
        sources=tuple(spec.sources),
    )
    if outcomes.request_finish(spec=spec, outcome=outcome):
        streams.publish(rt.client, spec.request_id, [outcomes.end_record(outcome)])
