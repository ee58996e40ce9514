"""The prefill tier: run the prompt (batched with whatever else arrived), stream the
first token at once, hand the KV to the KV store and enqueue decode."""

from __future__ import annotations

import logging
import time

from . import services, streams
from .engine.detokenize import IncrementalDetokenizer
from .engine.sampling import SamplingParams
from .prefill_batcher import PrefillCancelled
from .requests import RequestSpec, load
from .routing import broker_priority
from .runtime import Runtime, get_runtime

log = logging.getLogger(__name__)
KV_TTL_S = 300


def sampling_params(spec: RequestSpec) -> SamplingParams:
    s = spec.sampling
    return SamplingParams(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=s.seed,
                          max_tokens=max(1, s.max_tokens))


def finish_early(rt: Runtime, spec: RequestSpec, *, reason: str, text: str = "", completion: int = 0,
                 cached: int = 0, ttft_ms: float | None = None) -> None:
    """End a request that never reaches decode (cancelled before it, or finished by its
    first token): persist, then close the stream."""
    duration = (time.time() - spec.enqueued_at) * 1000
    usage = usage_dict(prompt=len(spec.prompt_token_ids), completion=completion, cached=cached)
    services.request_finish(
        spec=spec, text=text, finish_reason=reason, prompt_tokens=usage["prompt_tokens"],
        cached_tokens=cached, completion_tokens=completion, ttft_ms=ttft_ms, duration_ms=duration,
        prefill_worker=rt.name, decode_worker="",
    )
    streams.publish(rt.client, spec.request_id, [streams.end_record(reason, usage)])


def usage_dict(*, prompt: int, completion: int, cached: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def run_prefill(request_id: str) -> None:
    from .engine.prefill import PrefillRequest
    from .tasks import decode

    rt = get_runtime()
    spec = load(rt.client, request_id)
    if spec is None:
        services.request_fail(request_id=request_id, code="expired", message="The request expired in the queue.")
        return
    if services.is_cancelled(request_id=request_id):
        finish_early(rt, spec, reason="cancelled")
        return
    rt.track(request_id)
    try:
        params = sampling_params(spec)
        fut = rt.prefill.submit(PrefillRequest(request_id=request_id, token_ids=spec.prompt_token_ids,
                                               sampling=params, cache_salt=spec.cache_salt))
        try:
            result = fut.result()
        except PrefillCancelled:
            finish_early(rt, spec, reason="cancelled")
            return
        ttft_ms = (time.time() - spec.enqueued_at) * 1000
        first = int(result.first_token)
        if result.finish_reason == "stop":  # the first token is a stop token: an empty reply
            finish_early(rt, spec, reason="stop", cached=result.cached_tokens, ttft_ms=ttft_ms)
            return
        text = IncrementalDetokenizer(rt.model.tokenizer, spec.prompt_token_ids).push(first)
        # The first token goes out before anything else: it is the user's time to first token.
        streams.publish(rt.client, request_id, [streams.token_record(0, text, first)])
        if result.finish_reason is not None:  # max_tokens == 1, or the context is full
            finish_early(rt, spec, reason=result.finish_reason, text=text, completion=1,
                         cached=result.cached_tokens, ttft_ms=ttft_ms)
            return
        rt.kvstore.put(request_id, result.kv, ttl_s=KV_TTL_S)
        decode.apply_async(
            args=[request_id, first, {"prefill_worker": rt.name, "ttft_ms": ttft_ms,
                                      "cached_tokens": result.cached_tokens}],
            queue=f"decode.{spec.decode_pool}", priority=broker_priority(spec.priority),
        )
        services.message_set_status(request_id=request_id, status="decoding")
    except Exception as exc:
        log.exception("prefill failed for %s", request_id)
        services.request_fail(request_id=request_id, code="prefill_failed", message=f"Prefill failed: {exc}")
    finally:
        rt.untrack(request_id)
