"""The engine alone, beside the platform: the engine in this process as the model workers
run it, minus everything around it (no Celery, Redis, database or websocket). The
prefill worker's batcher (PrefillBatcher over a PrefillEngine: prompts that arrive
together share a forward) on one core, a DecodeEngine (continuous batching) on another,
the prompt's KV handed over in memory instead of through the KV store."""

from __future__ import annotations

import time
import uuid

from ..cores import pin_threads
from ..traces import Trace


class EngineAlone:
    def __init__(self, *, model_dir, dtype: str, prefill_core: int, decode_core: int, decode_slots: int,
                 max_context: int):
        from inference.engine.config import EngineConfig
        from inference.engine.decode import DecodeEngine
        from inference.engine.loader import load_model
        from inference.worker.prefill_batcher import PrefillBatcher

        # One torch thread, as the workers run (TANDEM_THREADS=1): each engine thread then
        # computes on itself, so pinning the thread pins its compute.
        self.config = EngineConfig(model=str(model_dir), dtype=dtype, num_threads=1, cpu_affinity=None,
                                   max_batch=decode_slots, max_context=max_context)
        self.model = load_model(self.config)
        self.batcher = PrefillBatcher(self.model, self.config)
        self.decode = DecodeEngine(self.model, self.config)
        # Two engines in one process: their threads are pinned one by one, where each
        # worker process pins itself whole.
        pin_threads([self.batcher._thread.native_id], {prefill_core})
        pin_threads([self.decode.loop._thread.native_id], {decode_core})

    def ask(self, trace: Trace, ids: list[int], *, max_tokens: int, salt: str, sampling) -> Trace:
        """`sampling`: the engine's SamplingParams (widget_sampling: what the platform
        samples the same message with)."""
        from dataclasses import replace

        from inference.engine.decode import DecodeRequest
        from inference.engine.prefill import PrefillRequest

        params = replace(sampling, max_tokens=max_tokens)
        rid = trace.request_id = f"bench-{uuid.uuid4()}"
        trace.t_send = time.time()
        res = self.batcher.submit(PrefillRequest(request_id=rid, token_ids=ids, sampling=params,
                                                 cache_salt=salt)).result(timeout=120)
        if res.finish_reason != "stop":  # a stop token first is an empty reply: no token
            trace.token(0, time.time())
        if res.finish_reason is None:
            handle = self.decode.submit(DecodeRequest(
                request_id=rid, prompt_token_ids=ids, first_token=res.first_token, kv=res.kv, sampling=params,
                group=salt, group_max_slots=None))
            for ev in handle.events(timeout=120):
                trace.token(ev.index, time.time())
        trace.t_end = time.time()
        return trace

    def thread_cpu_s(self) -> dict[str, float]:
        """CPU seconds the prefill and the decode thread have used so far: what the
        engine's own work costs the two cores, to set beside the worker processes'."""
        return {"prefill": _thread_cpu_s(self.batcher._thread), "decode": _thread_cpu_s(self.decode.loop._thread)}

    def shutdown(self) -> None:
        self.decode.shutdown()
        self.batcher.shutdown()


def widget_sampling(*, tenant_id: int, max_tokens: int):
    """The engine's SamplingParams for a widget message that sets no sampling option, as
    the platform's prefill makes them (tandem.chat.sampling's defaults: greedy, with the
    tenant's repetition penalties): the engine alone then does the same work per step."""
    from inference.pipeline.edges import sampling_params
    from tandem.chat.sampling import sampling_for_tandem
    from tenants.models import Quota

    return sampling_params(sampling_for_tandem(quota=Quota.objects.get(tenant_id=tenant_id), max_tokens=max_tokens))


def _thread_cpu_s(thread) -> float:
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
