"""Where a platform request's time to first token went, after the fact, from what the
request left in Redis (no extra instrumentation, so it costs nothing at any load): its
spec's `enqueued_at`, the stream's record ids and the first token's `ts`."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..stats import summarize
from ..traces import Trace

STAGES = ("web", "cpu", "prefill", "deliver", "engine", "outside_engine")


def _entry_s(entry_id) -> float:
    raw = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(raw.split("-", 1)[0]) / 1e3


def stage_times(client, trace: Trace) -> dict:
    """Split a request's TTFT by what it left in Redis:

    web       client send -> spec.enqueued_at (consumer, executor thread, token
              estimate; set just before the admission script, which stores the spec)
    cpu       -> the `status: prefilling` record (admission, Celery publish, broker, CPU
              task up to its hand-off report; ms precision)
    prefill   -> token 0's `ts` (broker, prefill queue, batcher, forward, detokenize)
    deliver   -> the client's first token frame (XADD, the consumer's XREAD, websocket)
    And from the `end` record: engine, the prefill engine's share of the TTFT (waiting for
    a batch, forward, sampling), and outside_engine = TTFT - engine: the platform's own
    time, whatever the forward took. Also returns the spec's prompt ids under
    "prompt_ids"."""
    from inference.wire import keys
    from inference.wire.spec import load
    from inference.wire.streams import decode_record

    if trace.request_id is None:
        return {}
    spec = load(client, trace.request_id)
    t_cpu = t_tok0 = engine_ms = None
    for entry_id, fields in client.xrange(keys.stream(trace.request_id)):
        rec = decode_record(fields)
        if rec["type"] == "status" and rec.get("state") == "prefilling" and t_cpu is None:
            t_cpu = _entry_s(entry_id)
        elif rec["type"] == "token" and rec["index"] == 0:
            t_tok0 = float(rec["ts"])
        elif rec["type"] == "end":
            engine_ms = (rec.get("timings") or {}).get("prefill_engine_ms")
    out: dict = {}
    prev = trace.t_send
    for name, t in (("web", spec.enqueued_at if spec else None), ("cpu", t_cpu), ("prefill", t_tok0),
                    ("deliver", trace.t_first)):
        out[f"{name}_ms"] = (t - prev) * 1e3 if (t is not None and prev is not None) else None
        prev = t
    out["engine_ms"] = engine_ms
    out["outside_engine_ms"] = trace.ttft_ms - engine_ms if (engine_ms is not None and trace.ttft_ms) else None
    out["prompt_ids"] = spec.prompt_token_ids if spec else None
    return out


def fill_stages(client, traces: Iterable[Trace], expected_ids: Callable[[int], list[int]] | None = None) -> list[int]:
    """Each served trace's stages; returns the prompt numbers whose prompt ids, as the CPU
    tier built them, differ from expected_ids(prompt number) (the engine-alone run's)."""
    mismatched = []
    for tr in traces:
        if tr.ok:
            tr.stages = stage_times(client, tr)
            ids = tr.stages.pop("prompt_ids", None)
            if expected_ids is not None and ids is not None and ids != expected_ids(tr.prompt_n):
                mismatched.append(tr.prompt_n)
    return mismatched


def stage_summary(traces: Iterable[Trace], stages: Iterable[str] = STAGES) -> dict:
    ok = [t for t in traces if t.ok and t.stages]
    return {k: summarize(t.stages.get(f"{k}_ms") for t in ok) for k in stages}
