"""The decode tier: take the prompt's KV from the KV store, hand the sequence to the
worker's continuous-batching engine, stream each token as it comes, and at the end save
the assistant message and its UsageRecord.

The task thread (one per sequence, Celery threads pool) does the detokenizing and the
database writes; the engine's loop only steps the batch."""

from __future__ import annotations

import logging
import queue
import threading
import time

from . import services, streams
from .engine.detokenize import IncrementalDetokenizer
from .engine.kvstore import KVError
from .lifecycle import finish_early, load_spec, sampling_params, usage_dict
from .requests import RequestSpec
from .runtime import Runtime, get_runtime

log = logging.getLogger(__name__)
# A sequence that produces nothing for this long is declared lost (engine failure).
STALL_TIMEOUT_S = 120


class SequenceFollower:
    """Follows one sequence's StreamHandle on the task thread: detokenizes, applies stop
    strings, publishes token records, then persists the result and closes the stream."""

    def __init__(self, rt: Runtime, spec: RequestSpec, detok: IncrementalDetokenizer, text: list[str]):
        self.rt, self.spec, self.detok, self.parts = rt, spec, detok, text
        self.done = threading.Event()
        self.finish: dict = {}
        self.stop_strings = [s for s in spec.sampling.stop if s]
        self.stop_hit = False

    def on_finish(self, _request_id, reason, stats) -> None:  # engine thread: keep it quick
        self.finish.update(reason=reason, stats=stats)
        self.done.set()

    def follow(self, handle) -> None:
        # Waiting for a slot is not a stall: a full engine takes sequences as others end.
        # The wait is bounded all the same: the web tier cancels a reply that shows
        # nothing for TANDEM_STALL_TIMEOUT_S, and so does the reaper once nobody listens.
        handle.started.wait()
        try:
            for ev in handle.events(timeout=STALL_TIMEOUT_S):
                piece = self._apply_stop(self.detok.push(ev.token_id))
                self.parts.append(piece)
                self.rt.publisher.put(self.spec.request_id,
                                      streams.token_record(ev.index, piece, ev.token_id, ev.timestamp))
                if self.stop_hit:
                    handle.cancel()
                    break
            self.done.wait(timeout=STALL_TIMEOUT_S)
        except queue.Empty:
            handle.cancel()
            raise RuntimeError("the engine stalled") from None
        except BaseException:
            # Stop the sequence: once this task gives up, nothing else could reach it.
            handle.cancel()
            raise
        if not self.stop_hit:
            self.parts.append(self.detok.flush())

    def _apply_stop(self, piece: str) -> str:
        if not self.stop_strings:
            return piece
        before = "".join(self.parts)
        text = before + piece
        hits = [text.find(s) for s in self.stop_strings if s in text]
        if not hits:
            return piece
        self.stop_hit = True
        return text[len(before):min(hits)] if min(hits) > len(before) else ""

    def persist(self, *, meta: dict, decode_worker: str) -> None:
        stats = self.finish.get("stats")
        reason = "stop" if self.stop_hit else self.finish.get("reason", "error")
        if reason == "error":
            raise RuntimeError(getattr(stats, "error", None) or "generation failed")
        spec = self.spec
        completion = stats.output_tokens if stats is not None else len(self.parts)
        if self.stop_hit:
            completion = len(self.parts)
        prompt, cached = len(spec.prompt_token_ids), int(meta.get("cached_tokens") or 0)
        if not cached and stats is not None:
            cached = stats.cached_tokens
        ttft_ms = meta.get("ttft_ms")
        duration_ms = (time.time() - spec.enqueued_at) * 1000
        if not services.request_finish(
            spec=spec, text="".join(self.parts), finish_reason=reason, prompt_tokens=prompt,
            cached_tokens=cached, completion_tokens=completion, ttft_ms=ttft_ms, duration_ms=duration_ms,
            prefill_worker=meta.get("prefill_worker", ""), decode_worker=decode_worker,
        ):
            return  # already final (failed while it waited): its stream is closed
        flushed = threading.Event()
        self.rt.publisher.put(spec.request_id, streams.end_record(
            reason, usage_dict(prompt=prompt, completion=completion, cached=cached),
            {"ttft_ms": ttft_ms, "duration_ms": duration_ms, "prefill_engine_ms": meta.get("prefill_engine_ms")}),
            done=flushed)
        flushed.wait(timeout=30)


def _recompute_kv(rt: Runtime, spec: RequestSpec):
    """The KV entry is gone, corrupt or from other weights: recompute the prompt here."""
    from .engine.prefill import PrefillEngine, PrefillRequest

    with rt.lock:
        engine = getattr(rt, "fallback_prefill", None)
        if engine is None:
            engine = rt.fallback_prefill = PrefillEngine(rt.model, rt.config.engine)
    [res] = engine.prefill([PrefillRequest(request_id=spec.request_id, token_ids=spec.prompt_token_ids,
                                           sampling=sampling_params(spec), cache_salt=spec.cache_salt)])
    return res.kv


def run_decode(request_id: str, first_token: int, meta: dict) -> None:
    from .engine.decode import DecodeRequest

    rt = get_runtime()
    spec = load_spec(rt, request_id)
    if spec is None:
        return
    detok = IncrementalDetokenizer(rt.model.tokenizer, spec.prompt_token_ids)
    first_text = detok.push(first_token)  # index 0 was streamed by the prefill worker
    if services.is_cancelled(request_id=request_id):
        rt.kvstore.delete(request_id)
        finish_early(rt, spec, reason="cancelled", text=first_text, completion=1, ttft_ms=meta.get("ttft_ms"))
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
            kv=kv, sampling=sampling_params(spec), on_finish=follower.on_finish, priority=spec.priority,
            group=str(spec.tenant_id), group_max_slots=spec.max_decode_slots,
        ))
        follower.follow(handle)
        follower.persist(meta=meta, decode_worker=rt.name)
    except Exception as exc:
        log.exception("decode failed for %s", request_id)
        services.request_fail(request_id=request_id, code="decode_failed", message=f"Decode failed: {exc}")
    finally:
        rt.untrack(request_id)
