"""`python -m benchmarks admission [--n 2000] [--port 6395]`: what the per-visitor and
per-IP limits add to one request's admission (tenants.quotas.admit, one Lua script in
Redis), p50 and p99 over `n` admissions each, without and with the two subjects a widget
request carries. Starts its own embedded Redis. Prints one Markdown table row."""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import redis

from tenants.quotas import QuotaLimits, SubjectLimits, admit, release

LIMITS = QuotaLimits(requests_per_minute=10**9, tokens_per_minute=10**12, max_concurrent_streams=10**6,
                     daily_token_budget=10**15, max_prompt_tokens=4096, max_output_tokens=512)


def _cpu() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


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
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--port", type=int, default=6395)
    args = ap.parse_args(argv)
    from devstack import embedded_redis

    with tempfile.TemporaryDirectory() as tmp:
        proc = embedded_redis.start(port=args.port, workdir=Path(tmp))
        try:
            client = redis.Redis(port=args.port)
            visitors = lambda i: [  # noqa: E731 - 50 visitors on 10 addresses, as a busy site
                SubjectLimits("visitor", f"v{i % 50}", 10**6, 10**9, 10**6),
                SubjectLimits("ip", f"10.0.0.{i % 10}", 10**6, 10**9, 10**6)]
            _run(client, 200, lambda i: ())  # warm-up: scripts loaded, connection open
            _run(client, 200, visitors)
            rows = []
            for _ in range(3):  # interleaved rounds, so load on the machine hits both alike
                rows.append((_run(client, args.n // 3, lambda i: ()), _run(client, args.n // 3, visitors)))
            plain = [t for a, _ in rows for t in a]
            subj = [t for _, b in rows for t in b]
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait()
    p = lambda xs, q: statistics.quantiles(xs, n=100)[q - 1]  # noqa: E731
    print("| admission | p50 ms | p99 ms | CPU |")
    print("|---|---|---|---|")
    print(f"| tenant limits only | {p(plain, 50):.3f} | {p(plain, 99):.3f} | {_cpu()} |")
    print(f"| + per-visitor and per-IP | {p(subj, 50):.3f} | {p(subj, 99):.3f} | {_cpu()} |")
    print(f"| added | {p(subj, 50) - p(plain, 50):+.3f} | {p(subj, 99) - p(plain, 99):+.3f} | |")


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
