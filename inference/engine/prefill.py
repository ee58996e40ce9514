"""The prefill engine: prompts in, each prompt's first token and KV cache out.

Owns the request contract of a prefill worker and its prefix cache (only the uncached
suffix of a prompt is computed). Packing prompts into forwards is the scheduler's rule
(scheduler.batch_by_length: sorted by length, bounded by prefill_max_batch and
prefill_max_tokens padded tokens; which prompts make up a call is the prefill worker's
batcher's, by the scheduler's fair-share rule), the forward and the sampling of the first
output token (index 0) the runner's (runner.prefill_steps). The KV it returns is on the
CPU by default, contiguous, ready for the KV store. Calls from several threads are
serialised: one forward at a time makes best use of the cores (or the GPU) anyway.

Identical prompts in one call (the n choices of one request: same token ids, same
salts) are computed once: one row of the forward, its KV shared by their results, and
each samples its own first token from that row's logits. Siblings that arrive in later
calls share the prompt through the prefix cache instead (all but its last partial block).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field

import torch

from .config import EngineConfig
from .grammar import Grammars
from .kv import KVCache
from .loader import LoadedModel
from .model import run_to_end
from .prefix_cache import PrefixCache, PrefixHit, SharedPrefix
from .runner import prefill_steps
from .sampling import SamplingParams, TokenLogprobs, make_generator
from .scheduler import batch_by_length


@dataclass
class PrefillRequest:
    request_id: str
    token_ids: list[int]
    sampling: SamplingParams
    cache_salt: str | None = None  # the tenant: prefix-cache entries are never shared across salts
    cache_shared: SharedPrefix | None = None  # a leading part that may reuse another salt's entries


@dataclass
class PrefillResult:
    request_id: str
    first_token: int  # output index 0
    kv: KVCache  # the prompt's KV, [L, Hkv, len(token_ids), D]
    cached_tokens: int  # prompt tokens whose KV came from the prefix cache
    # queue_ms (waiting in this call), lookup_ms (prefix cache), compute_ms (forward and
    # sampling of this request's batch, shared by its batch-mates), batch_size.
    timings: dict[str, float] = field(default_factory=dict)
    first_logprobs: TokenLogprobs | None = None  # when the sampling asked for logprobs
    # Set when the first token already ends the sequence: "stop" (a stop token: do not
    # emit it), "length" (max_tokens == 1) or "context" (no room for a second token).
    # None means: hand to decode.
    finish_reason: str | None = None


@dataclass
class _Item:
    index: int
    req: PrefillRequest
    hit: PrefixHit | None
    lookup_ms: float

    @property
    def suffix(self) -> list[int]:
        return self.req.token_ids[self.hit.tokens :] if self.hit else self.req.token_ids

    @property
    def key(self) -> tuple:
        """Prompts with the same key have the same KV: one computes it for all."""
        return (tuple(self.req.token_ids), self.req.cache_salt, self.req.cache_shared)


class PrefillEngine:
    def __init__(self, model: LoadedModel, config: EngineConfig, *, kv_device: str | torch.device = "cpu"):
        self.model = model.model
        self.config = config
        self.fingerprint = model.fingerprint
        self.eos_ids = model.eos_token_ids
        self.kv_device = torch.device(kv_device)
        self.prefix_cache = (
            PrefixCache(fingerprint=model.fingerprint, max_tokens=config.prefix_cache_tokens,
                        block_size=config.prefix_block)
            if config.prefix_cache_tokens > 0 else None
        )
        self._lock = threading.Lock()
        self.grammars = Grammars.for_model(model)

    def prefill(self, requests: list[PrefillRequest]) -> list[PrefillResult]:
        """Results in the order of `requests`. Raises ValueError, before computing
        anything, for an empty prompt or one with no room for an output token."""
        with self._lock:
            return run_to_end(self.prefill_steps(requests))

    def prefill_steps(self, requests: list[PrefillRequest]) -> Generator[None, None, list[PrefillResult]]:
        """`prefill`, pausing after each layer of each forward, so that a scheduler can
        run another prefill in between; returns the results when exhausted. Not locked:
        drive every generator of one engine from the same thread."""
        t_call = time.perf_counter()
        for r in requests:
            if not r.token_ids or len(r.token_ids) >= self.config.max_context:
                raise ValueError(
                    f"prompt of {r.request_id} has {len(r.token_ids)} tokens; need 1..{self.config.max_context - 1}"
                )
        results: list[PrefillResult | None] = [None] * len(requests)
        items = []
        for i, r in enumerate(requests):
            t0 = time.perf_counter()
            hit = self.lookup(r.token_ids, r.cache_salt, r.cache_shared)
            items.append(_Item(i, r, hit, (time.perf_counter() - t0) * 1e3))
        cfg = self.config
        same: dict[tuple, list[_Item]] = {}
        for it in items:
            same.setdefault(it.key, []).append(it)
        heads = [group[0] for group in same.values()]
        for batch in batch_by_length(heads, lambda it: len(it.suffix), max_batch=cfg.prefill_max_batch,
                                     max_padded_tokens=cfg.prefill_max_tokens):
            t_start = time.perf_counter()
            members = [(row, it) for row, head in enumerate(batch) for it in same[head.key]]
            out = yield from prefill_steps(
                self.model,
                [it.suffix for it in batch],
                [(it.hit.k, it.hit.v) if it.hit else None for it in batch],
                [(it.req.sampling, make_generator(it.req.sampling, tokens_done=0)) for _, it in members],
                [it.req.token_ids for _, it in members],
                [self.grammars.matcher(it.req.sampling.grammar) if it.req.sampling.grammar else None
                 for _, it in members],
                sample_rows=[row for row, _ in members],
            )
            compute_ms = (time.perf_counter() - t_start) * 1e3
            kvs = []
            for it, (k, v) in zip(batch, out.kvs, strict=True):
                self.remember(it.req.token_ids, it.req.cache_salt, k, v, it.req.cache_shared)
                kvs.append(KVCache(k.to(self.kv_device).contiguous(), v.to(self.kv_device).contiguous(),
                                   self.fingerprint))
            for (row, it), first, lp in zip(members, out.first_tokens, out.first_logprobs, strict=True):
                assert first is not None
                head = batch[row]
                results[it.index] = PrefillResult(
                    request_id=it.req.request_id,
                    first_token=first,
                    first_logprobs=lp,
                    kv=kvs[row],
                    # A sibling's whole prompt came from its head's forward.
                    cached_tokens=(head.hit.tokens if head.hit else 0) if it is head else len(it.req.token_ids),
                    timings={"queue_ms": (t_start - t_call) * 1e3, "lookup_ms": it.lookup_ms,
                             "compute_ms": compute_ms, "batch_size": float(len(batch))},
                    finish_reason=self.first_token_finish(it.req, first),
                )
        return [r for r in results if r is not None]

    # -- building blocks ---------------------------------------------------------------

    def lookup(self, token_ids: list[int], salt: str | None,
               shared: SharedPrefix | None = None) -> PrefixHit | None:
        return self.prefix_cache.lookup(token_ids, salt, shared) if self.prefix_cache else None

    def remember(self, token_ids: list[int], salt: str | None, k: torch.Tensor, v: torch.Tensor,
                 shared: SharedPrefix | None = None) -> None:
        if self.prefix_cache is not None:
            self.prefix_cache.insert(token_ids, salt, k, v, shared)

    def first_token_finish(self, req: PrefillRequest, first: int) -> str | None:
        s = req.sampling
        if first in s.stop_token_ids or (not s.ignore_eos and first in self.eos_ids):
            return "stop"
        if s.max_tokens <= 1:
            return "length"
        if len(req.token_ids) + 1 >= self.config.max_context:
            return "context"
        return None
