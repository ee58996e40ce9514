"""What every model tier does at the edges of a request: fetch its spec (ending it if
it expired or was cancelled while queued), turn its sampling into engine parameters,
and end it early (before decode) with its message, usage and stream closed."""

from __future__ import annotations

import time

from . import services, streams
from .engine.sampling import SamplingParams
from .requests import RequestSpec, load, load_with_cancel
from .runtime import Runtime


def sampling_params(spec: RequestSpec) -> SamplingParams:
    s = spec.sampling
    return SamplingParams(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=s.seed,
                          max_tokens=max(1, s.max_tokens))


def load_spec(rt: Runtime, request_id: str) -> RequestSpec | None:
    """The request's spec, or None after failing the request when it has expired."""
    spec = load(rt.client, request_id)
    if spec is None:
        services.request_fail(request_id=request_id, code="expired", message="The request expired in the queue.")
    return spec


def live_spec(rt: Runtime, request_id: str) -> RequestSpec | None:
    """The spec of a request still worth running: None (after ending it) when it expired
    or was cancelled while it waited in the queue."""
    spec, cancelled = load_with_cancel(rt.client, request_id)
    if spec is None:
        services.request_fail(request_id=request_id, code="expired", message="The request expired in the queue.")
        return None
    if cancelled:
        finish_early(rt, spec, reason="cancelled")
        return None
    return spec


def finish_early(rt: Runtime, spec: RequestSpec, *, reason: str, text: str = "", completion: int = 0,
                 cached: int = 0, ttft_ms: float | None = None) -> None:
    """End a request that never reaches decode (cancelled before it, or finished by its
    first token): persist, then close the stream."""
    duration = (time.time() - spec.enqueued_at) * 1000
    usage = usage_dict(prompt=len(spec.prompt_token_ids), completion=completion, cached=cached)
    if services.request_finish(
        spec=spec, text=text, finish_reason=reason, prompt_tokens=usage["prompt_tokens"],
        cached_tokens=cached, completion_tokens=completion, ttft_ms=ttft_ms, duration_ms=duration,
        prefill_worker=rt.name, decode_worker="",
    ):
        streams.publish(rt.client, spec.request_id, [streams.end_record(reason, usage)])


def usage_dict(*, prompt: int, completion: int, cached: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


