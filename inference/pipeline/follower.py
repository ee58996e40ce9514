"""Following one sequence in a model worker's engine, on its task thread: detokenize,
apply stop strings, publish token records, then write the reply's outcome and close the
stream. The decode and colocated tiers both follow their sequences with it."""

from __future__ import annotations

import queue
import threading
import time

from ..engine.sequence import StreamHandle
from ..text.detokenize import IncrementalDetokenizer
from ..text.logprobs import logprobs_entry, token_bytes
from ..wire import metrics, streams
from ..wire.spec import RequestSpec
from ..worker.runtime import Runtime
from . import outcomes
from .contracts import ReplyOutcome

# A sequence that produces nothing for this long is declared lost (engine failure).
STALL_TIMEOUT_S = 120


class SequenceFollower:
    def __init__(self, rt: Runtime, spec: RequestSpec, detok: IncrementalDetokenizer, text: list[str]):
        self.rt, self.spec, self.detok, self.parts = rt, spec, detok, text
        self.done = threading.Event()
        self.finish: dict = {}
        self.stop_strings = [s for s in spec.sampling.stop if s]
        self.stop_hit = False
        self.token_bytes = (token_bytes(rt.model.model_dir, rt.model.model.shape.vocab)
                            if spec.sampling.logprobs else None)

    def on_finish(self, _request_id, reason, stats) -> None:  # engine thread: keep it quick
        self.finish.update(reason=reason, stats=stats)
        self.done.set()

    def follow(self, handle: StreamHandle) -> None:
        # Waiting for a slot is not a stall: a full engine takes sequences as others end.
        # The wait is bounded all the same: the web tier cancels a reply that shows
        # nothing for TANDEM_STALL_TIMEOUT_S, and so does the reaper once nobody listens.
        handle.started.wait()
        itl = metrics.INTER_TOKEN_LATENCY.labels(self.spec.decode_pool)
        last = None
        try:
            for ev in handle.events(timeout=STALL_TIMEOUT_S):
                if last is not None:
                    itl.observe(ev.timestamp - last)
                last = ev.timestamp
                piece = self._apply_stop(self.detok.push(ev.token_id))
                self.parts.append(piece)
                lp = (logprobs_entry(self.token_bytes, ev.token_id, ev.logprobs)
                      if self.token_bytes is not None and ev.logprobs is not None else None)
                self.rt.publisher.put(self.spec.request_id,
                                      streams.token_record(ev.index, piece, ev.token_id, ev.timestamp, lp))
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

    def persist(self, *, prefill_worker: str, ttft_ms: float | None, cached_tokens: int = 0,
                prefill_engine_ms: float | None = None, queue_ms: float | None = None) -> None:
        """Write the outcome and the stream's end record (once it is in Redis)."""
        stats = self.finish.get("stats")
        reason = "stop" if self.stop_hit else self.finish.get("reason", "error")
        if reason == "error":
            raise RuntimeError(getattr(stats, "error", None) or "generation failed")
        spec = self.spec
        completion = stats.output_tokens if stats is not None else len(self.parts)
        if self.stop_hit:
            completion = len(self.parts)
        if not cached_tokens and stats is not None:
            cached_tokens = stats.cached_tokens
        outcome = ReplyOutcome(
            text="".join(self.parts), finish_reason=reason, prompt_tokens=len(spec.prompt_token_ids),
            completion_tokens=completion, cached_tokens=cached_tokens, ttft_ms=ttft_ms,
            duration_ms=(time.time() - spec.enqueued_at) * 1000, prefill_worker=prefill_worker,
            decode_worker=self.rt.name, prefill_engine_ms=prefill_engine_ms, queue_ms=queue_ms, sources=tuple(spec.sources),
        )
        if not outcomes.request_finish(spec=spec, outcome=outcome):
            return  # already final (failed while it waited): its stream is closed
        flushed = threading.Event()
        self.rt.publisher.put(spec.request_id, outcomes.end_record(outcome), done=flushed)
        flushed.wait(timeout=30)
