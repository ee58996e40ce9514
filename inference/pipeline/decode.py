"""The decode tier: take the prompt's KV from the KV store, hand the sequence to the
worker's continuous-batching engine, stream each token as it comes, and at the end save
the assistant message and its UsageRecord.

A reply whose decode worker died arrives here again (a watcher re-sent it: see
`supervisor`) and continues from the next token index: its KV is recomputed on this
worker from the prompt and the token ids the stream already holds (one prefill forward
of prompt + tokens so far), and the sequence goes on with the same sampling (a seeded
one draws token i from the seed's i-th number), the same stop strings and what is left
of the output budget.

The task thread (one per sequence, Celery threads pool) does the detokenizing and the
database writes; the engine's loop only steps the batch."""

from __future__ import annotations

import logging
import time

from ..engine.decode import DecodeRequest
from ..engine.kv import KVCache
from ..engine.prefill import PrefillRequest
from ..kvstore import KVError
from ..text.detokenize import IncrementalDetokenizer
from ..wire import broker, metrics, streams
from ..wire.spec import RequestSpec
from ..wire.worker_ownership import Stage
from ..worker.runtime import Runtime, get_runtime
from . import outcomes, stages
from .contracts import PrefillHandoff
from .edges import EXPIRED, cache_shared, finish_early, sampling_params
from .follower import SequenceFollower
from .resume import Resumption, resumption

log = logging.getLogger(__name__)


def recompute_kv(rt: Runtime, spec: RequestSpec, token_ids: list[int]) -> KVCache:
    """The KV of `token_ids` computed here (this worker's own prefill engine)."""
    request = PrefillRequest(request_id=spec.request_id, token_ids=token_ids, sampling=sampling_params(spec.sampling),
                             cache_salt=spec.cache_salt, cache_shared=cache_shared(spec))
    [res] = rt.fallback_prefill_engine().prefill([request])
    return res.kv


def run_decode(request_id: str, handoff: PrefillHandoff, epoch: int = 0) -> None:
    rt = get_runtime()
    stage = Stage(request_id=request_id, stage="decode", epoch=epoch, task=broker.DECODE,
                  args=[request_id, handoff.to_dict()], queue=broker.queue_name("decode", rt.config.pool),
                  pool=rt.config.pool)
    with stages.held(rt.client, stage) as begun:
        if not begun.runs:
            return
        if begun.spec is None:
            outcomes.request_fail(request_id=request_id, code=EXPIRED[0], message=EXPIRED[1])
            return
        _decode(rt, begun.spec, handoff, resumed=begun.resumed, cancelled=begun.cancelled)


def _decode(rt: Runtime, spec: RequestSpec, handoff: PrefillHandoff, *, resumed: bool, cancelled: bool) -> None:
    request_id = spec.request_id
    detok = IncrementalDetokenizer(rt.model.tokenizer, spec.prompt_token_ids)
    resume: Resumption | None = resumption(rt, spec, detok) if resumed else None
    if resumed and resume is None:
        return  # it had ended after all
    if resume is not None and resume.token_ids:
        tokens, texts = resume.token_ids, resume.texts
    else:
        resume = None
        tokens, texts = [handoff.first_token], [detok.push(handoff.first_token)]  # index 0, streamed by prefill
        if resumed:  # not even index 0 is in the stream (Redis lost it): write it again
            streams.publish(rt.client, request_id, [streams.token_record(0, texts[0], handoff.first_token)])
    if cancelled:
        rt.kvstore.delete(request_id)
        finish_early(rt, spec, reason="cancelled", text="".join(texts), completion=len(tokens),
                     ttft_ms=handoff.ttft_ms, queue_ms=handoff.queue_ms)
        return
    rt.track(request_id)
    try:
        follower = SequenceFollower(rt, spec, detok, list(texts))
        slot_wait = 0.0
        if resume is not None and resume.stop_hit:  # its last token had reached a stop string
            follower.stop_hit = True
            follower.finish.update(reason="stop", stats=None)
        else:
            kv = _resumed_kv(rt, spec, tokens) if resume is not None else _handed_kv(rt, spec)
            t_wait = time.time()
            handle = rt.decode.submit(DecodeRequest(
                request_id=request_id, prompt_token_ids=spec.prompt_token_ids, first_token=tokens[0],
                output_token_ids=tokens, kv=kv, sampling=sampling_params(spec.sampling), on_finish=follower.on_finish,
                priority=spec.priority, group=str(spec.tenant_id), group_max_slots=spec.max_decode_slots,
            ))
            handle.started.wait()
            slot_wait = time.time() - t_wait
            metrics.QUEUE_TIME.labels("decode", spec.decode_pool).observe(slot_wait)
            follower.follow(handle)
        if rt.is_disowned(request_id):
            return  # another worker continues it: this one writes nothing more
        queue_ms = None if handoff.queue_ms is None else handoff.queue_ms + slot_wait * 1000
        follower.persist(prefill_worker=handoff.prefill_worker, ttft_ms=handoff.ttft_ms,
                         cached_tokens=handoff.cached_tokens, prefill_engine_ms=handoff.prefill_engine_ms,
                         queue_ms=queue_ms)
    except Exception as exc:
        log.exception("decode failed for %s", request_id)
        outcomes.request_fail(request_id=request_id, code="decode_failed", message=f"Decode failed: {exc}")
    finally:
        rt.untrack(request_id)


def _handed_kv(rt: Runtime, spec: RequestSpec) -> KVCache:
    try:
        return rt.kvstore.take(spec.request_id, expected_fingerprint=rt.model.fingerprint)
    except KVError as exc:
        # The entry is gone, corrupt or from other weights: recompute the prompt here.
        log.warning("KV for %s unusable (%s); recomputing the prefill", spec.request_id, exc)
        return recompute_kv(rt, spec, spec.prompt_token_ids)


def _resumed_kv(rt: Runtime, spec: RequestSpec, tokens: list[int]) -> KVCache:
    """The KV of prompt + every token but the last (which the next step feeds)."""
    try:  # a prefill's hand-off the dead worker had not taken yet
        rt.kvstore.delete(spec.request_id)
    except Exception:  # noqa: BLE001 - best effort: the entry expires anyway
        pass
    t0 = time.perf_counter()
    kv = recompute_kv(rt, spec, spec.prompt_token_ids + tokens[:-1])
    took = time.perf_counter() - t0
    metrics.MIGRATION_RECOMPUTE.labels(spec.decode_pool).observe(took)
    log.info("resumed %s after %d tokens: KV of %d positions recomputed in %.0f ms", spec.request_id,
             len(tokens), kv.length, took * 1000)
    rt.publisher.put(spec.request_id, streams.status_record(
        "decoding", f"The reply continues on another worker after {len(tokens)} tokens."))
    return kv
