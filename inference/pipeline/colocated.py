"""The colocated tier: one worker does prefill and decode for its pool (small
deployments, and the baseline disaggregation is measured against). Same contract as the
two tiers together: tokens to the stream from index 0, then message and usage."""

from __future__ import annotations

import logging

from ..text.detokenize import IncrementalDetokenizer
from ..worker.runtime import get_runtime
from . import outcomes
from .edges import live_spec, sampling_params
from .follower import SequenceFollower

log = logging.getLogger(__name__)


def run_colocated(request_id: str) -> None:
    rt = get_runtime()
    spec = live_spec(rt, request_id)
    if spec is None:
        return
    rt.track(request_id)
    try:
        follower = SequenceFollower(rt, spec, IncrementalDetokenizer(rt.model.tokenizer, spec.prompt_token_ids), [])
        first_seen: dict = {}

        def on_token(_rid, index, _token, ts):
            if index == 0:
                first_seen["ttft_ms"] = (ts - spec.enqueued_at) * 1000

        handle = rt.colocated.submit(
            request_id, spec.prompt_token_ids, sampling_params(spec.sampling), on_token=on_token,
            on_finish=follower.on_finish, priority=spec.priority, group=str(spec.tenant_id),
            group_max_slots=spec.max_decode_slots, cache_salt=spec.cache_salt,
        )
        outcomes.message_set_status(request_id=request_id, status="decoding")
        follower.follow(handle)
        follower.persist(prefill_worker=rt.name, ttft_ms=first_seen.get("ttft_ms"))
    except Exception as exc:
        log.exception("colocated generation failed for %s", request_id)
        outcomes.request_fail(request_id=request_id, code="generation_failed", message=f"Generation failed: {exc}")
    finally:
        rt.untrack(request_id)
