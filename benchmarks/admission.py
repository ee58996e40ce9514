"""`python -m benchmarks admission [--n 2000] [--port PORT] [--quick] [--out PATH]`: what
the per-visitor and per-IP limits add to one request's admission (tenants.quotas.admit,
one Lua script in Redis), p50 and p99 over `n` admissions each, without and with the two
subjects a widget request carries. Starts its own embedded Redis (on a free port unless
--port). Prints a Markdown table; writes JSON (var/bench/admission.json)."""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
import uuid
from pathlib import Path

import redis

from tenants.quotas import QuotaLimits, SubjectLimits, admit, release

from .machine import machine_info
from .quick import add_quick_options, parse_quick
from .report import write_json
from .stats import summarize

DEFAULT_OUT = "var/bench/admission.json"
QUICK = {"n": 300}  # --quick: a few hundred admissions each way
LIMITS = QuotaLimits(requests_per_minute=10**9, tokens_per_minute=10**12, max_concurrent_streams=10**6,
                     daily_token_budget=10**15, max_prompt_tokens=4096, max_output_tokens=512)


def _run(client, n: int, subjects) -> list[float]:
    times = []
    for i in range(n):
        rid = str(uuid.uuid4())
        t0 = time.perf_counter()
        admit(client, tenant_id="bench", limits=LIMITS, request_id=rid, prompt_tokens=100, max_output_tokens=100,
              subjects=subjects(i), store={f"bench:req:{rid}": ("{}", 60)})
        times.append((time.perf_counter() - t0) * 1000)
        release(client, tenant_id="bench", request_id=rid)
    return times


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks admission")
    ap.add_argument("--n", type=int, default=2000, help="admissions measured each way (default 2000)")
    ap.add_argument("--port", type=int, default=None, help="the embedded Redis's port (default: a free one)")
    add_quick_options(ap, default_out=DEFAULT_OUT)
    args = parse_quick(ap, argv, name="admission", default_out=DEFAULT_OUT, quick_defaults=QUICK)
    if args.n < 3:
        ap.error("--n must be at least 3 (one admission per interleaved round)")
    from devstack import embedded_redis
    from devstack.processes import free_port

    info = machine_info()
    port = args.port or free_port()
    warmup = min(200, args.n)
    with tempfile.TemporaryDirectory() as tmp:
        proc = embedded_redis.start(port=port, workdir=Path(tmp))
        try:
            client = redis.Redis(port=port)
            visitors = lambda i: [  # noqa: E731 - 50 visitors on 10 addresses, as a busy site
                SubjectLimits("visitor", f"v{i % 50}", 10**6, 10**9, 10**6),
                SubjectLimits("ip", f"10.0.0.{i % 10}", 10**6, 10**9, 10**6)]
            _run(client, warmup, lambda i: ())  # warm-up: scripts loaded, connection open
            _run(client, warmup, visitors)
            rows = []
            for _ in range(3):  # interleaved rounds, so load on the machine hits both alike
                rows.append((_run(client, args.n // 3, lambda i: ()), _run(client, args.n // 3, visitors)))
            plain = [t for a, _ in rows for t in a]
            subj = [t for _, b in rows for t in b]
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait()
    result = {"benchmark": "admission", "quick": args.quick, "machine": info, "n": len(plain),
              "tenant_only_ms": summarize(plain), "with_subjects_ms": summarize(subj)}
    result["added_ms"] = {q: result["with_subjects_ms"][q] - result["tenant_only_ms"][q] for q in ("p50", "p99")}
    cpu = info["cpu_model"] or platform.processor() or "unknown CPU"
    t, w, a = result["tenant_only_ms"], result["with_subjects_ms"], result["added_ms"]
    print("| admission | p50 ms | p99 ms | CPU |")
    print("|---|---|---|---|")
    print(f"| tenant limits only | {t['p50']:.3f} | {t['p99']:.3f} | {cpu} |")
    print(f"| + per-visitor and per-IP | {w['p50']:.3f} | {w['p99']:.3f} | {cpu} |")
    print(f"| added | {a['p50']:+.3f} | {a['p99']:+.3f} | |")
    print(f"JSON: {write_json(args.out, result)}")


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
