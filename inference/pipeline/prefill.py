"""The prefill tier: run the prompt (batched with whatever else arrived), stream the
first token at once, hand the KV to the KV store and enqueue decode.

A prefill whose worker died (queued in its batcher, or in its forward) is re-sent by a
watcher (`supervisor`) and runs again here; if the dead worker had already streamed
index 0, the reply goes on from that token rather than a second draw of it."""

from __future__ import annotations

import logging
import time

from ..engine.prefill import PrefillRequest
from ..text.detokenize import IncrementalDetokenizer
from ..text.logprobs import logprobs_entry, token_bytes
from ..wire import broker, metrics, streams, worker_ownership
from ..wire.spec import RequestSpec
from ..wire.worker_ownership import Stage
from ..worker.prefill_batcher import PrefillCancelled
from ..worker.runtime import Runtime, get_runtime
from . import outcomes, stages
from .contracts import PrefillHandoff
from .edges import cache_shared, finish_early, live_spec, sampling_params

log = logging.getLogger(__name__)
KV_TTL_S = 300


def run_prefill(request_id: str, epoch: int = 0) -> None:
    rt = get_runtime()
    stage = Stage(request_id=request_id, stage="prefill", epoch=epoch, task=broker.PREFILL, args=[request_id],
                  queue=broker.queue_name("prefill", rt.config.pool), pool=rt.config.pool)
    with stages.held(rt.client, stage) as begun:
        spec = live_spec(rt, request_id, begun)
        if spec is None:
            return
        metrics.QUEUE_TIME.labels("prefill", spec.prefill_pool).observe(max(0.0, time.time() - spec.enqueued_at))
        _prefill(rt, spec, epoch=epoch, resumed=begun.resumed)


def _prefill(rt: Runtime, spec: RequestSpec, *, epoch: int, resumed: bool) -> None:
    request_id = spec.request_id
    rt.track(request_id)
    kv_stored = False
    try:
        params = sampling_params(spec.sampling)
        t_engine = time.time()
        fut = rt.prefill.submit(PrefillRequest(request_id=request_id, token_ids=spec.prompt_token_ids,
                                               sampling=params, cache_salt=spec.cache_salt,
                                               cache_shared=cache_shared(spec)),
                                group=spec.tenant_id, priority=spec.priority)
        try:
            result = fut.result()
        except PrefillCancelled:
            finish_early(rt, spec, reason="cancelled")
            return
        if rt.is_disowned(request_id):
            return  # taken for dead meanwhile: the prefill runs again elsewhere
        now = time.time()
        ttft_ms = (now - spec.enqueued_at) * 1000
        # The engine's share of the first token (waiting for a batch, the forward and
        # sampling): what the time to first token would be without the platform around it.
        engine_ms = (now - t_engine) * 1000
        # Everything before the forward that produced its first token.
        queue_ms = max(0.0, ttft_ms - result.timings.get("compute_ms", 0.0))
        first = int(result.first_token)
        finish_reason = result.finish_reason
        streamed = streams.progress(rt.client, request_id) if resumed else None
        if streamed is not None and streamed.terminal is not None:
            return  # the worker before this one had finished it
        if streamed is not None and streamed.token_ids:
            # The worker before this one streamed index 0 and died before handing on: the
            # reply goes on from that token (the prompt's KV does not depend on it).
            first, finish_reason = streamed.token_ids[0], _first_finish(rt, spec, streamed.token_ids[0])
        if finish_reason == "stop":  # the first token is a stop token: an empty reply
            finish_early(rt, spec, reason="stop", cached=result.cached_tokens, ttft_ms=ttft_ms, queue_ms=queue_ms)
            return
        text = IncrementalDetokenizer(rt.model.tokenizer, spec.prompt_token_ids).push(first)
        if streamed is None or not streamed.token_ids:
            # The first token goes out before anything else: it is the user's time to first token.
            lp = (logprobs_entry(token_bytes(rt.model.model_dir, rt.model.model.shape.vocab), first,
                                 result.first_logprobs)
                  if result.first_logprobs is not None and first == result.first_token else None)
            streams.publish(rt.client, request_id, [streams.token_record(0, text, first, logprobs=lp)])
            metrics.TIME_TO_FIRST_TOKEN.labels(spec.prefill_pool, metrics.tenant_label(spec.tenant_id)).observe(
                ttft_ms / 1000)
        if finish_reason is not None:  # max_tokens == 1, or the context is full
            finish_early(rt, spec, reason=finish_reason, text=text, completion=1,
                         cached=result.cached_tokens, ttft_ms=ttft_ms, queue_ms=queue_ms)
            return
        rt.kvstore.put(request_id, result.kv, ttl_s=KV_TTL_S)
        kv_stored = True
        handoff = PrefillHandoff(first_token=first, prefill_worker=rt.name, ttft_ms=ttft_ms,
                                 prefill_engine_ms=engine_ms, cached_tokens=result.cached_tokens,
                                 queue_ms=queue_ms)
        decode = Stage(request_id=request_id, stage="decode", epoch=0, task=broker.DECODE,
                       args=[request_id, handoff.to_dict()], queue=broker.queue_name("decode", spec.decode_pool),
                       pool=spec.decode_pool)
        rt.client.set(*worker_ownership.sent_record(decode), ex=worker_ownership.RECORD_TTL_S)
        broker.send(decode.task, decode.args, queue=decode.queue, priority=broker.broker_priority(spec.priority))
        outcomes.message_set_status(request_id=request_id, status="decoding")
    except Exception as exc:
        log.exception("prefill failed for %s", request_id)
        if kv_stored:  # no decode will take it (shared memory would hold it until reaped)
            try:
                rt.kvstore.delete(request_id)
            except Exception:  # noqa: BLE001 - the store may be what failed; its TTL still applies
                log.warning("could not delete the KV of %s", request_id, exc_info=True)
        outcomes.request_fail(request_id=request_id, code="prefill_failed", message=f"Prefill failed: {exc}")
    finally:
        rt.untrack(request_id)


def _first_finish(rt: Runtime, spec: RequestSpec, first: int) -> str | None:
    """Whether a first token already streamed ends the reply (as the engine would say)."""
    return rt.prefill.engine.first_token_finish(
        PrefillRequest(request_id=spec.request_id, token_ids=spec.prompt_token_ids, sampling=sampling_params(spec.sampling)),
        first)
