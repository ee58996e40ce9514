"""The colocated tier: one worker does prefill and decode for its pool (small
deployments, and the baseline disaggregation is measured against). Same contract as the
two tiers together: tokens to the stream from index 0, then message and usage.

A reply whose colocated worker died is re-sent here (`supervisor`): with tokens already
streamed, it continues as a migrated decode does (KV of prompt + tokens recomputed on
this worker, the next index on); with none, it starts again."""

from __future__ import annotations

import logging
import time

from ..engine.decode import DecodeRequest
from ..text.detokenize import IncrementalDetokenizer
from ..wire import broker, metrics
from ..wire.spec import RequestSpec
from ..wire.worker_ownership import Stage
from ..worker.runtime import Runtime, get_runtime
from . import outcomes, stages
from .decode import recompute_kv
from .edges import cache_shared, live_spec, sampling_params
from .follower import SequenceFollower
from .resume import resumption

log = logging.getLogger(__name__)


def run_colocated(request_id: str, epoch: int = 0) -> None:
    rt = get_runtime()
    stage = Stage(request_id=request_id, stage="colocated", epoch=epoch, task=broker.COLOCATED, args=[request_id],
                  queue=broker.queue_name("colocated", rt.config.pool), pool=rt.config.pool)
    with stages.held(rt.client, stage) as begun:
        spec = live_spec(rt, request_id, begun)
        if spec is not None:
            _generate(rt, spec, resumed=begun.resumed)


def _generate(rt: Runtime, spec: RequestSpec, *, resumed: bool) -> None:
    request_id = spec.request_id
    detok = IncrementalDetokenizer(rt.model.tokenizer, spec.prompt_token_ids)
    resume = resumption(rt, spec, detok) if resumed else None
    if resumed and resume is None:
        return  # it had ended after all
    rt.track(request_id)
    try:
        first_seen: dict = {}
        submitted = None  # when a fresh prompt went to the engine (a resumed one waits no queue)
        if resume is not None and resume.token_ids:
            follower = SequenceFollower(rt, spec, detok, list(resume.texts))
            first_seen["ttft_ms"] = ((resume.first_ts or spec.enqueued_at) - spec.enqueued_at) * 1000
            if resume.stop_hit:
                follower.stop_hit = True
            else:
                tokens = resume.token_ids
                t0 = time.perf_counter()
                kv = recompute_kv(rt, spec, spec.prompt_token_ids + tokens[:-1])
                metrics.MIGRATION_RECOMPUTE.labels(spec.decode_pool).observe(time.perf_counter() - t0)
                handle = rt.colocated.resume(DecodeRequest(
                    request_id=request_id, prompt_token_ids=spec.prompt_token_ids, first_token=tokens[0],
                    output_token_ids=tokens, kv=kv, sampling=sampling_params(spec.sampling), on_finish=follower.on_finish,
                    priority=spec.priority, group=str(spec.tenant_id), group_max_slots=spec.max_decode_slots,
                ))
                follower.follow(handle)
        else:
            follower = SequenceFollower(rt, spec, detok, [])
            ttft = metrics.TIME_TO_FIRST_TOKEN.labels(spec.prefill_pool, metrics.tenant_label(spec.tenant_id))

            def on_token(_rid, index, _token, ts):
                if index == 0:
                    first_seen["ttft_ms"] = (ts - spec.enqueued_at) * 1000
                    ttft.observe(ts - spec.enqueued_at)

            submitted = time.time()
            handle = rt.colocated.submit(
                request_id, spec.prompt_token_ids, sampling_params(spec.sampling), on_token=on_token,
                on_finish=follower.on_finish, priority=spec.priority, group=str(spec.tenant_id),
                group_max_slots=spec.max_decode_slots, cache_salt=spec.cache_salt,
                cache_shared=cache_shared(spec),
            )
            outcomes.message_set_status(request_id=request_id, status="decoding")
            follower.follow(handle)
        if rt.is_disowned(request_id):
            return  # another worker continues it: this one writes nothing more
        follower.persist(prefill_worker=rt.name, ttft_ms=first_seen.get("ttft_ms"),
                         queue_ms=_queue_ms(spec, submitted, follower))
    except Exception as exc:
        log.exception("colocated generation failed for %s", request_id)
        outcomes.request_fail(request_id=request_id, code="generation_failed", message=f"Generation failed: {exc}")
    finally:
        rt.untrack(request_id)


def _queue_ms(spec: RequestSpec, submitted: float | None, follower: SequenceFollower) -> float | None:
    """The wait before the engine began its prompt: to its submission here, then for a
    place in the running batch (the engine's own count)."""
    stats = follower.finish.get("stats")
    if submitted is None or stats is None:
        return None
    return (submitted - spec.enqueued_at) * 1000 + stats.queue_ms
