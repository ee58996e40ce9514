"""The decode engine: continuous batching of sequences whose prompt KV was computed
elsewhere (a prefill worker), stepped by one background thread (engine_loop.py).

Owns the request contract of a decode worker (DecodeRequest: the prompt's KV and first
token) and its checks. Admission (priority, tenant group caps, slots, KV-token budget)
is the scheduler's (scheduler.py), the forward the runner's (runner.py).

Index numbering: the prefill's first token is index 0 and is not re-emitted here; decode
emits indices 1..n-1 through on_token and the returned StreamHandle, and on_finish
reports the totals (SequenceStats.output_tokens = n). A sequence resumed on another
worker (its first worker died) arrives with the k tokens it had already produced and the
KV of prompt + all but the last of them; it emits k, k+1, … and counts all n.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import EngineConfig
from .engine_loop import DecodeStats, EngineLoop
from .grammar import Grammars
from .kv import KVCache
from .loader import LoadedModel
from .runner import ModelRunner
from .sampling import SamplingParams, make_generator
from .scheduler import Scheduler, SchedulerConfig, pick_admissions
from .sequence import OnFinish, OnToken, Sequence, StopChecker, StreamHandle

__all__ = ["DecodeEngine", "DecodeRequest", "DecodeStats", "pick_admissions"]


@dataclass
class DecodeRequest:
    request_id: str
    prompt_token_ids: list[int]
    first_token: int  # index 0, produced (and already streamed) by the prefill
    kv: KVCache  # the prompt's KV: length == len(prompt_token_ids) (+ len(output_token_ids) - 1)
    sampling: SamplingParams
    on_token: OnToken | None = None
    on_finish: OnFinish | None = None
    stop_checker: StopChecker | None = None
    priority: int = 0  # higher is admitted first
    group: str | None = None  # e.g. the tenant
    group_max_slots: int | None = None  # this group's cap on the engine's slots
    # A resumed sequence: every token already produced (and streamed), index 0 first.
    # None: just the first token. The KV then covers the prompt and all but the last.
    output_token_ids: list[int] | None = None

    @property
    def tokens(self) -> list[int]:
        return [int(t) for t in self.output_token_ids] if self.output_token_ids else [int(self.first_token)]


def scheduler_config(config: EngineConfig, *, chunked_prefill: bool = False) -> SchedulerConfig:
    return SchedulerConfig(
        max_batch=config.max_batch, kv_token_budget=int(config.kv_token_budget or 0),
        max_context=config.max_context, prefill_max_batch=config.prefill_max_batch,
        prefill_max_tokens=config.prefill_max_tokens, prefill_chunk=config.prefill_chunk,
        chunked_prefill=chunked_prefill,
    )


def decoding_sequence(req: DecodeRequest, cancel, grammars: Grammars) -> Sequence:
    """The sequence of a request whose KV is computed (a prefill's, or a resumed one's):
    it joins the batch at its next token. A constrained one's matcher replays the tokens
    it arrives with, so its grammar state is what it was where they were produced."""
    tokens = req.tokens
    if req.kv.length != len(req.prompt_token_ids) + len(tokens) - 1:
        raise ValueError(f"KV length {req.kv.length} != prompt length {len(req.prompt_token_ids)}"
                         f" + {len(tokens) - 1} earlier output tokens")
    return Sequence(
        request_id=req.request_id, prompt_len=len(req.prompt_token_ids), sampling=req.sampling,
        tokens=tokens, handle=StreamHandle(req.request_id, cancel),
        on_token=req.on_token, on_finish=req.on_finish, stop_checker=req.stop_checker,
        priority=req.priority, group=req.group, group_max_slots=req.group_max_slots,
        # A seeded sequence draws one number per token: skip those its tokens used.
        generator=make_generator(req.sampling, tokens_done=len(tokens)), kv=req.kv,
        prompt_ids=list(req.prompt_token_ids),
        matcher=grammars.matcher(req.sampling.grammar, tokens) if req.sampling.grammar else None,
    )


class DecodeEngine:
    def __init__(self, model: LoadedModel, config: EngineConfig, *, start: bool = True):
        self.config = config
        self.fingerprint = model.fingerprint
        self.runner = ModelRunner(model.model, fingerprint=model.fingerprint, max_batch=config.max_batch,
                                  max_context=config.max_context)
        self.scheduler = Scheduler(scheduler_config(config), eos_ids=model.eos_token_ids)
        self.grammars = Grammars.for_model(model)
        self.loop = EngineLoop(config, self.scheduler, self.runner, eos_ids=model.eos_token_ids,
                               name="tandem-decode")
        if start:
            self.loop.start()

    def submit(self, req: DecodeRequest) -> StreamHandle:
        if req.kv.model_fingerprint != self.fingerprint:
            raise ValueError(
                f"KV for {req.request_id} was computed with model {req.kv.model_fingerprint}, "
                f"this engine serves {self.fingerprint}"
            )
        seq = decoding_sequence(req, self.cancel, self.grammars)
        self.loop.enqueue(seq)
        return seq.handle

    def cancel(self, request_id: str) -> bool:
        """Stop a sequence (waiting or running); its slot is free before the next step."""
        return self.loop.cancel(request_id)

    def stats(self) -> DecodeStats:
        return self.loop.stats()

    def shutdown(self, timeout: float | None = 10.0) -> None:
        self.loop.shutdown(timeout)
