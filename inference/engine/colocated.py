"""The colocated engine: prefill and decode in one process and one step loop, for small
deployments and as the baseline that disaggregation is measured against.

Owns the request contract of a colocated worker (a prompt in, tokens from index 0 out).
The scheduler (scheduler.py) admits a prompt when a decode slot and its KV-token
reservation are free (priority, group caps, budget, as for decode), so a prefilled
prompt never waits for a slot, and plans each step's prefill piece beside the decode rows:
- chunked_prefill=False: whole prompts (a batch of them), which stalls the running
  streams for the whole prompt;
- chunked_prefill=True (EngineConfig's default): while streams are decoding, at most `prefill_chunk` prompt
  tokens (the next pieces of one or more prompts, each after the KV of its earlier
  pieces), bounding the stall each decode step sees; with no stream running, whole
  prompts, as there is no one to stall.
A completed prompt samples its first token (index 0, emitted here) and joins the batch
in the same step. A prefix-cache hit (within the prompt's salt) is looked up at
admission, and only the rest of the prompt is computed.
"""

from __future__ import annotations

from .config import EngineConfig
from .decode import DecodeRequest, decoding_sequence, scheduler_config
from .engine_loop import DecodeStats, EngineLoop
from .grammar import Grammars
from .loader import LoadedModel
from .prefix_cache import PrefixCache, SharedPrefix
from .runner import ModelRunner
from .sampling import SamplingParams, make_generator
from .scheduler import Scheduler
from .sequence import OnFinish, OnToken, Sequence, StopChecker, StreamHandle


class ColocatedEngine:
    def __init__(self, model: LoadedModel, config: EngineConfig, *, chunked_prefill: bool | None = None,
                 start: bool = True):
        self.config = config
        self.max_context = config.max_context
        self.chunked_prefill = config.chunked_prefill if chunked_prefill is None else chunked_prefill
        self.prefix_cache = (
            PrefixCache(fingerprint=model.fingerprint, max_tokens=config.prefix_cache_tokens,
                        block_size=config.prefix_block)
            if config.prefix_cache_tokens > 0 else None
        )
        self.runner = ModelRunner(model.model, fingerprint=model.fingerprint, max_batch=config.max_batch,
                                  max_context=config.max_context, prefix_cache=self.prefix_cache)
        self.scheduler = Scheduler(scheduler_config(config, chunked_prefill=self.chunked_prefill),
                                   eos_ids=model.eos_token_ids, lookup=self.runner.lookup)
        self.loop = EngineLoop(config, self.scheduler, self.runner, eos_ids=model.eos_token_ids,
                               name="tandem-colocated")
        self.grammars = Grammars.for_model(model)
        if start:
            self.loop.start()

    def submit(
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
            matcher=self.grammars.matcher(sampling.grammar) if sampling.grammar else None,
        )
        self.loop.enqueue(seq)
        return seq.handle

    def resume(self, req: DecodeRequest) -> StreamHandle:
        """Continue a sequence another worker started (it died): `req` carries the tokens
        already produced and the KV of prompt + all but the last; no prefill here."""
        seq = decoding_sequence(req, self.cancel, self.grammars)
        self.loop.enqueue(seq)
        return seq.handle

    def cancel(self, request_id: str) -> bool:
        """Stop a sequence (waiting, being prefilled or running)."""
        return self.loop.cancel(request_id)

    def stats(self) -> DecodeStats:
        return self.loop.stats()

    def shutdown(self, timeout: float | None = 10.0) -> None:
        self.loop.shutdown(timeout)
