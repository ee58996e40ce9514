"""The engine benchmark's sampling-features section: what structured outputs, penalties
and logprobs cost a full batch, against the same batch unconstrained in the same run.

Each variant is one burst of N streams (32; --quick 4) on the colocated engine in this
process, the same chat prompts, greedy, `output_tokens` each:
- unconstrained: plain greedy decoding;
- json_schema: every stream held to SCHEMA by the grammar (llguidance masks), which
  keeps it writing for at least 8 x 20 characters, so every stream runs its budget;
- penalties: frequency 0.5, presence 0.3, repetition 1.1 on every stream;
- top_logprobs5: logprobs with 5 alternatives on every stream.
Figures: aggregate tok/s, ITL p50/p99, and for json_schema the time the grammar masks
took per engine step (the bitmask written by llguidance, unpacked and applied to the
batch's rows: grammar.mask_logits_, timed by wrapping it here) and per row.
The ratio column is tok/s against unconstrained; the targets are >= 0.90 for
json_schema and >= 0.97 for penalties (issue 28).

Validity (structured_validity): `requests` strict requests spread over the 10 schemas
of schemas.py, in batches of 32, greedy and sampled alike; every reply must parse and
validate against its schema (jsonschema)."""

from __future__ import annotations

import json
import time
from dataclasses import replace

from ..report import say
from .schemas import SCHEMAS, compile_schema
from .tracker import Tracker, metrics

SCHEMA = {"type": "object", "properties": {"steps": {
    "type": "array", "minItems": 8, "maxItems": 8,
    "items": {"type": "string", "minLength": 20, "maxLength": 40}}},
    "required": ["steps"], "additionalProperties": False}
TARGETS = {"json_schema": 0.90, "penalties": 0.97}


class _MaskTimer:
    """Wraps the sampler's grammar mask to time each call (one per engine step with a
    constrained row)."""

    def __init__(self):
        import inference.engine.sampling as sampling

        self.module, self.original = sampling, sampling.mask_logits_
        self.calls: list[tuple[float, int]] = []  # (seconds, constrained rows)

    def __enter__(self):
        def timed(logits, matchers):
            t0 = time.perf_counter()
            self.original(logits, matchers)
            self.calls.append((time.perf_counter() - t0, sum(m is not None for m in matchers)))

        self.module.mask_logits_ = timed
        return self

    def __exit__(self, *exc):
        self.module.mask_logits_ = self.original


def _burst(engine, prompts, params, n: int, tag: str) -> dict:
    tracker = Tracker()
    rids = [f"{tag}-{i}" for i in range(n)]
    for i, rid in enumerate(rids):
        tracker.submitted(rid, "stream")
        engine.submit(rid, prompts[i % len(prompts)], params,
                      on_token=lambda r, idx, _tok, ts: tracker.token(r, idx, ts),
                      on_finish=lambda r, reason, _stats: tracker.finish(r, reason))
    tracker.wait(lambda: tracker.all_done(rids), what=f"{tag} burst")
    return metrics(list(tracker.traces.values()))


def run_features(loaded, cfg, prompts: list[list[int]], *, streams: int, output_tokens: int,
                 validity_requests: int) -> dict:
    from inference.engine.colocated import ColocatedEngine
    from inference.engine.sampling import SamplingParams

    base = SamplingParams(temperature=0, max_tokens=output_tokens, ignore_eos=True)
    variants = {
        "unconstrained": base,
        # A constrained stream must be able to end (EOS once the JSON closes), so EOS counts.
        "json_schema": replace(base, grammar=compile_schema(SCHEMA), ignore_eos=False),
        "penalties": replace(base, frequency_penalty=0.5, presence_penalty=0.3, repetition_penalty=1.1),
        "top_logprobs5": replace(base, logprobs=True, top_logprobs=5),
    }
    engine = ColocatedEngine(loaded, cfg, chunked_prefill=False)
    out: dict = {"streams": streams, "output_tokens": output_tokens, "variants": {}}
    try:
        _burst(engine, prompts, variants["json_schema"], min(4, streams), "warm")  # compile, first masks
        for name, params in variants.items():
            with _MaskTimer() as timer:
                m = _burst(engine, prompts, params, streams, name)
            if timer.calls:
                secs = [s for s, _ in timer.calls]
                rows = sum(r for _, r in timer.calls)
                m["mask_ms_per_step"] = 1e3 * sum(secs) / len(secs)
                m["mask_ms_p99"] = 1e3 * sorted(secs)[min(len(secs) - 1, int(0.99 * len(secs)))]
                m["mask_us_per_row"] = 1e6 * sum(secs) / rows
                m["steps_masked"] = len(secs)
            out["variants"][name] = m
            say(f"features {name}: {m['tokens_per_s']:.0f} tok/s, ITL p50 {m['itl_p50_ms']:.1f} ms")
        plain = out["variants"]["unconstrained"]["tokens_per_s"]
        for m in out["variants"].values():
            m["vs_unconstrained"] = m["tokens_per_s"] / plain if plain and m["tokens_per_s"] else None
        out["validity"] = structured_validity(engine, loaded, prompts, requests=validity_requests)
    finally:
        engine.shutdown()
    return out


def structured_validity(engine, loaded, prompts, *, requests: int, batch: int = 32,
                        max_tokens: int = 256) -> dict:
    """`requests` strict requests over the 10 schemas; how many parse and validate."""
    import jsonschema

    from inference.engine.sampling import SamplingParams

    grammars = [compile_schema(s) for s in SCHEMAS]
    ok, failures = 0, []
    t0 = time.perf_counter()
    for start in range(0, requests, batch):
        handles = []
        for i in range(start, min(requests, start + batch)):
            k = i % len(SCHEMAS)
            params = SamplingParams(temperature=0 if i % 2 else 0.8, seed=i, max_tokens=max_tokens,
                                    grammar=grammars[k])
            handles.append((k, engine.submit(f"valid-{i}", prompts[i % len(prompts)], params)))
        for k, h in handles:
            tokens, _finish = h.result(timeout=600)
            text = loaded.tokenizer.decode(tokens, skip_special_tokens=True)
            try:
                jsonschema.validate(json.loads(text), SCHEMAS[k])
                ok += 1
            except (ValueError, jsonschema.ValidationError) as exc:
                failures.append({"schema": k, "text": text[:200], "error": str(exc)[:200]})
    return {"requests": requests, "schemas": len(SCHEMAS), "valid": ok, "share": ok / requests if requests else None,
            "failures": failures[:5], "seconds": time.perf_counter() - t0}


def render_features(f: dict) -> str:
    from ..report import table

    rows = []
    for name, m in f["variants"].items():
        ratio = m.get("vs_unconstrained")
        target = TARGETS.get(name)
        rows.append([name, m["tokens_per_s"], m["itl_p50_ms"], m["itl_p99_ms"],
                     f"{ratio:.3f}" if ratio else "-", f">= {target:.2f}" if target else "-",
                     ("met" if ratio and ratio >= target else "MISSED") if target and ratio else "-",
                     f"{m['mask_ms_per_step']:.3f} / {m['mask_us_per_row']:.0f} us" if "mask_ms_per_step" in m
                     else "-"])
    v = f.get("validity") or {}
    text = table(["variant", "tok/s", "ITL p50 ms", "ITL p99 ms", "vs unconstrained", "target", "", 
                  "mask ms/step / per row"], rows)
    if v:
        text += (f"\n\nStrict structured outputs: {v['valid']}/{v['requests']} parse and validate over "
                 f"{v['schemas']} schemas ({100 * v['share']:.1f}%; target 100%)")
    return text
