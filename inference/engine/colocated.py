"""The colocated engine: prefill and decode in one process and one loop, for small
deployments and as the baseline that disaggregation is measured against.

Owns the prompts between admission and their first token. A prompt is admitted when a
decode slot and its KV-token reservation are free (same rules as the decode engine:
priority, group caps, budget), so a prefilled prompt never waits for a slot. Each loop
iteration runs one prefill forward, then one decode step:
- chunked_prefill=False: the forward takes whole prompts (a batch of them), which stalls
  the running streams for the whole prompt;
- chunked_prefill=True: while streams are decoding, the forward takes at most
  `prefill_chunk` prompt tokens (the next pieces of one or more prompts, each after the
  KV of its earlier pieces), bounding the stall each decode step sees; with no stream
  running it takes whole prompts, as there is no one to stall.
A finished prompt samples its first token (index 0, emitted here), then joins the batch.
"""

from __future__ import annotations

import logging
import time

import torch

from .config import EngineConfig
from .decode import DecodeEngine, DecodeRequest
from .kv import KVCache
from .loader import LoadedModel
from .prefill import PrefillEngine
from .prefix_cache import SharedPrefix
from .sampling import SamplingParams, make_generator, sample_tokens
from .sequence import OnFinish, OnToken, Sequence, StopChecker, StreamHandle

log = logging.getLogger(__name__)


class ColocatedEngine(DecodeEngine):
    def __init__(self, model: LoadedModel, config: EngineConfig, *, chunked_prefill: bool = False,
                 start: bool = True):
        super().__init__(model, config, start=False)
        self.prefill_engine = PrefillEngine(model, config, kv_device=model.model.device)
        self.chunked_prefill = chunked_prefill
        self._prefilling: list[Sequence] = []  # admitted (slot + budget held), KV in progress
        if start:
            self._thread.start()

    def submit(  # type: ignore[override]
        self,
        request_id: str,
        prompt_token_ids: list[int],
        sampling: SamplingParams,
        *,
        on_token: OnToken | None = None,
        on_finish: OnFinish | None = None,
        stop_checker: StopChecker | None = None,
        priority: int = 0,
        group: str | None = None,
        group_max_slots: int | None = None,
        cache_salt: str | None = None,
        cache_shared: SharedPrefix | None = None,
    ) -> StreamHandle:
        """Generate from a prompt; tokens from index 0 go to on_token and the handle."""
        if not prompt_token_ids or len(prompt_token_ids) >= self.max_context:
            raise ValueError(f"prompt has {len(prompt_token_ids)} tokens; need 1..{self.max_context - 1}")
        seq = Sequence(
            request_id=request_id, prompt_len=len(prompt_token_ids), sampling=sampling, tokens=[],
            handle=StreamHandle(request_id, self.cancel), on_token=on_token, on_finish=on_finish,
            stop_checker=stop_checker, priority=priority, group=group, group_max_slots=group_max_slots,
            generator=make_generator(sampling, tokens_done=0), prompt=list(prompt_token_ids),
            cache_salt=cache_salt, cache_shared=cache_shared,
        )
        self._enqueue(seq)
        return seq.handle

    def resume(self, req: DecodeRequest) -> StreamHandle:
        """Continue a sequence another worker started (it died): `req` carries the tokens
        already produced and the KV of prompt + all but the last; no prefill here."""
        return DecodeEngine.submit(self, req)

    # -- engine thread ----------------------------------------------------------------

    def _has_work(self) -> bool:
        return super()._has_work() or bool(self._prefilling)

    def _schedule(self) -> None:
        for seq in self._admissible(self._waiting, extra=self._prefilling):
            self._waiting.remove(seq)
            if seq.prompt is None:  # resumed (`resume`): its KV came with it
                seq.handle.started.set()
                try:
                    self._join(seq)
                except Exception as exc:
                    log.exception("could not join %s", seq.request_id)
                    self._finish(seq, "error", repr(exc))
                continue
            seq.reserved = seq.reservation(self.max_context)
            hit = self.prefill_engine.lookup(seq.prompt or [], seq.cache_salt, seq.cache_shared)
            if hit is not None:
                seq.kv = KVCache(hit.k, hit.v, self.fingerprint)
                seq.prefilled = seq.cached_tokens = hit.tokens
            seq.handle.started.set()
            self._prefilling.append(seq)
        if not self._prefilling:
            return
        work = self._next_prefill_work()
        try:
            self._prefill(work)
        except Exception as exc:  # fail these prompts, keep the running streams going
            log.exception("prefill failed")
            for seq, _ in work:
                if seq in self._prefilling:  # not those that completed and joined already
                    self._prefilling.remove(seq)
                    self._finish(seq, "error", repr(exc))

    def _next_prefill_work(self) -> list[tuple[Sequence, int]]:
        """(sequence, prompt tokens to compute now) for the next forward."""
        cfg = self.config
        # Chunks bound the stall a prefill imposes on running streams; with none running
        # there is nothing to protect, and whole prompts finish sooner.
        chunked = self.chunked_prefill and self.runner.size > 0
        budget = cfg.prefill_chunk if chunked else cfg.prefill_max_tokens
        work: list[tuple[Sequence, int]] = []
        for seq in self._prefilling:
            remaining = seq.prompt_len - seq.prefilled
            take = min(remaining, budget) if chunked else remaining
            if work and (take > budget or len(work) >= cfg.prefill_max_batch):
                break
            work.append((seq, take))  # a first prompt over the token bound still runs, alone
            budget -= take
            if budget <= 0:
                break
        return work

    def _prefill(self, work: list[tuple[Sequence, int]]) -> None:
        pieces, pasts = [], []
        for seq, take in work:
            assert seq.prompt is not None
            pieces.append(seq.prompt[seq.prefilled : seq.prefilled + take])
            pasts.append((seq.kv.k, seq.kv.v) if seq.kv is not None else None)
        kvs, logits = self.prefill_engine.model.prefill(pieces, pasts)  # [B, V]
        complete = []
        for row, ((seq, take), (k, v)) in enumerate(zip(work, kvs, strict=True)):
            seq.kv = KVCache(k, v, self.fingerprint)
            seq.prefilled += take
            if seq.prefilled == seq.prompt_len:
                complete.append(row)
        if not complete:
            return
        done = [work[r][0] for r in complete]
        rows = torch.tensor(complete, device=logits.device)
        firsts = sample_tokens(logits[rows], [s.sampling for s in done], [s.generator for s in done])
        for seq, first in zip(done, firsts.tolist(), strict=True):
            self._prefilling.remove(seq)
            kv, seq.kv = seq.kv, None
            assert kv is not None and seq.prompt is not None
            self.prefill_engine.remember(seq.prompt, seq.cache_salt, kv.k, kv.v, seq.cache_shared)
            seq.joined_at = time.perf_counter()
            try:
                reason = seq.accept(first, self.eos_ids, self.max_context)  # emits index 0
            except Exception as exc:
                log.exception("token callback failed for %s", seq.request_id)
                self._finish(seq, "error", repr(exc))
                continue
            if reason is not None:
                self._finish(seq, reason)
                continue
            try:
                self.runner.join(seq, kv)
            except Exception as exc:  # this sequence only: the batch keeps running
                log.exception("could not join %s", seq.request_id)
                self._finish(seq, "error", repr(exc))

    def _apply_cancels(self, cancels: set[str]) -> None:
        super()._apply_cancels(cancels)
        for seq in [s for s in self._prefilling if s.request_id in cancels]:
            self._prefilling.remove(seq)
            self._finish(seq, "cancelled")

    def _pending_count(self) -> int:
        return len(self._prefilling)

    def _pending_reserved(self) -> int:
        return sum(s.reserved for s in self._prefilling)

    def _drain_on_shutdown(self) -> None:
        for seq in self._prefilling:
            self._finish(seq, "cancelled")
        self._prefilling.clear()
        super()._drain_on_shutdown()
