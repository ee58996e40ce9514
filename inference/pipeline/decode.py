"""The decode tier: take the prompt's KV from the KV store, hand the sequence to the
worker's continuous-batching engine, stream each token as it comes, and at the end save
the assistant message and its UsageRecord.

The task thread (one per sequence, Celery threads pool) does the detokenizing and the
database writes; the engine's loop only steps the batch."""

from __future__ import annotations

import logging

from ..engine.decode import DecodeRequest
from ..engine.kv import KVCache
from ..engine.prefill import PrefillRequest
from ..kvstore import KVError
from ..text.detokenize import IncrementalDetokenizer
from ..wire.spec import RequestSpec
from ..worker.runtime import Runtime, get_runtime
from . import outcomes, submit
from .contracts import PrefillHandoff
from .edges import finish_early, load_spec, sampling_params
from .follower import SequenceFollower

log = logging.getLogger(__name__)


def _recompute_kv(rt: Runtime, spec: RequestSpec) -> KVCache:
    """The KV entry is gone, corrupt or from other weights: recompute the prompt here."""
    request = PrefillRequest(request_id=spec.request_id, token_ids=spec.prompt_token_ids,
                             sampling=sampling_params(spec.sampling), cache_salt=spec.cache_salt)
    [res] = rt.fallback_prefill_engine().prefill([request])
    return res.kv


def run_decode(request_id: str, handoff: PrefillHandoff) -> None:
    rt = get_runtime()
    spec = load_spec(rt, request_id)
    if spec is None:
        return
    detok = IncrementalDetokenizer(rt.model.tokenizer, spec.prompt_token_ids)
    first_token = handoff.first_token
    first_text = detok.push(first_token)  # index 0 was streamed by the prefill worker
    if submit.is_cancelled(request_id=request_id):
        rt.kvstore.delete(request_id)
        finish_early(rt, spec, reason="cancelled", text=first_text, completion=1, ttft_ms=handoff.ttft_ms)
        return
    rt.track(request_id)
    try:
        try:
            kv = rt.kvstore.take(request_id, expected_fingerprint=rt.model.fingerprint)
        except KVError as exc:
            log.warning("KV for %s unusable (%s); recomputing the prefill", request_id, exc)
            kv = _recompute_kv(rt, spec)
        follower = SequenceFollower(rt, spec, detok, [first_text])
        handle = rt.decode.submit(DecodeRequest(
            request_id=request_id, prompt_token_ids=spec.prompt_token_ids, first_token=first_token,
            kv=kv, sampling=sampling_params(spec.sampling), on_finish=follower.on_finish, priority=spec.priority,
            group=str(spec.tenant_id), group_max_slots=spec.max_decode_slots,
        ))
        follower.follow(handle)
        follower.persist(prefill_worker=handoff.prefill_worker, ttft_ms=handoff.ttft_ms,
                         cached_tokens=handoff.cached_tokens, prefill_engine_ms=handoff.prefill_engine_ms)
    except Exception as exc:
        log.exception("decode failed for %s", request_id)
        outcomes.request_fail(request_id=request_id, code="decode_failed", message=f"Decode failed: {exc}")
    finally:
        rt.untrack(request_id)
