"""The engine benchmark's rows (one per system and workload), the issue's targets checked
against them, and the tables that show both."""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass

from ..report import fmt, table

TANDEM = ("colocated", "colocated_chunked", "disaggregated")


@dataclass
class Row:
    system: str
    workload: str
    streams: int
    output_tokens: int  # per stream
    metrics: dict
    load1: float
    others: float | None = None  # cores used by other processes while the row ran
    method: str = "measured"
    notes: str = ""
    error: str | None = None

    @classmethod
    def failed(cls, system: str, workload: str = "-") -> Row:
        """A row for the exception being handled (its last line)."""
        err = traceback.format_exc().strip().splitlines()[-1]
        return cls(system, workload, 0, 0, {}, os.getloadavg()[0], error=err)


def summary_line(m: dict) -> str:
    return (f"TTFT p50/p99 {fmt(m.get('ttft_p50_ms'), 0)}/{fmt(m.get('ttft_p99_ms'), 0)} ms, "
            f"ITL p50/p99 {m.get('itl_p50_ms') or 0:.1f}/{m.get('itl_p99_ms') or 0:.1f} ms, "
            f"{m.get('tokens_per_s') or 0:.1f} tok/s")


def find(rows: list[Row], system: str, workload: str) -> dict | None:
    for r in rows:
        if r.system == system and r.workload == workload and r.error is None:
            return r.metrics
    return None


def evaluate_targets(rows: list[Row], quality: list[dict] | None = None) -> list[dict]:
    """Issue 17's targets, each PASS/FAIL (or info) with the numbers behind it."""
    out: list[dict] = []

    def add(target, system, value, limit, passed, detail):
        out.append({"target": target, "system": system, "value": value, "limit": limit,
                    "result": "info" if passed is None else ("PASS" if passed else "FAIL"), "detail": detail})

    gb = find(rows, "generate_batch", "streams32")
    peers = {t: find(rows, f"llama.cpp {t}t", "streams32") for t in (1, 2)}
    for sys_ in TANDEM:
        t32 = find(rows, sys_, "streams32")
        if t32 and gb and gb.get("tokens_per_s"):
            ratio = t32["tokens_per_s"] / gb["tokens_per_s"]
            add("streams32 tok/s >= 3x generate_batch", sys_, round(ratio, 2), 3.0,
                ratio >= 3.0 if sys_ != "colocated_chunked" else None,
                f"{t32['tokens_per_s']:.0f} vs {gb['tokens_per_s']:.0f} tok/s = {ratio:.2f}x")
        # Same threads: colocated runs 2 torch threads; disaggregated 1 prefill + 1 decode.
        peer = peers[2]
        if t32 and peer and peer.get("tokens_per_s"):
            ratio = t32["tokens_per_s"] / peer["tokens_per_s"]
            add("streams32 tok/s ahead of llama.cpp, 2 threads", sys_, round(ratio, 2), 1.0,
                ratio > 1.0 if sys_ != "colocated_chunked" else None,
                f"{t32['tokens_per_s']:.0f} vs {peer['tokens_per_s']:.0f} tok/s = {ratio:.2f}x")
    for sys_ in TANDEM:
        t64 = find(rows, sys_, "streams64")
        if t64 and t64.get("tokens_per_s"):
            v = t64["tokens_per_s"]
            add("streams64 tok/s >= 1000 (disaggregated: decode on one core)", sys_, round(v, 1), 1000.0,
                v >= 1000.0 if sys_ == "disaggregated" else None, f"{v:.0f} tok/s")
    peer1 = find(rows, "llama.cpp 1t", "single")
    for sys_ in ("disaggregated",):
        t1 = find(rows, sys_, "single")
        if t1 and t1.get("itl_p50_ms"):
            v = t1["itl_p50_ms"]
            add("single-stream ITL p50 <= 12 ms (decode on one core)", sys_, round(v, 2), 12.0, v <= 12.0,
                f"{v:.1f} ms (p99 {t1['itl_p99_ms']:.1f} ms)")
            if peer1 and peer1.get("itl_p50_ms"):
                lim = peer1["itl_p50_ms"]
                add("single-stream ITL <= llama.cpp's, 1 thread", sys_, round(v, 2), round(lim, 2), v <= lim,
                    f"{v:.1f} vs {lim:.1f} ms (llama.cpp: mean over its generation)")
    for hf_name, label in (("hf_generate", "HF generate's (same dtype)"),
                           ("hf_generate_fp32", "HF generate's in fp32 (its fastest here)")):
        hf1 = find(rows, hf_name, "single")
        for sys_ in TANDEM:
            t1 = find(rows, sys_, "single")
            if t1 and hf1 and t1.get("itl_p50_ms") and hf1.get("itl_p50_ms"):
                v, lim = t1["itl_p50_ms"], hf1["itl_p50_ms"]
                add(f"single-stream ITL p50 <= {label}", sys_, round(v, 2), round(lim, 2), v <= lim,
                    f"{v:.1f} vs {lim:.1f} ms (p99 {t1['itl_p99_ms']:.1f} vs {hf1['itl_p99_ms']:.1f} ms)")
    for sys_ in TANDEM:
        un, lo = find(rows, sys_, "mixed-unloaded"), find(rows, sys_, "mixed-loaded")
        if un and lo and un.get("itl_p99_ms") and lo.get("itl_p99_ms"):
            ratio = lo["itl_p99_ms"] / un["itl_p99_ms"]
            add("mixed ITL p99 loaded <= 1.5x unloaded", sys_, round(ratio, 2), 1.5,
                ratio <= 1.5 if sys_ == "disaggregated" else None,
                f"{lo['itl_p99_ms']:.1f} vs {un['itl_p99_ms']:.1f} ms = {ratio:.2f}x"
                + ("" if sys_ == "disaggregated" else " (shown beside it; the target is disaggregated's)"))
    for q in quality or []:
        add(f"quality: {q['candidate']} vs {q['reference']} ({q['mode']}): agreement >= 97%, ppl within 3%",
            q["candidate"], round(q["agreement"], 4), 0.97, q["passes"],
            f"agreement {q['agreement']:.2%}, perplexity {q['ppl']:.3f} vs {q['ppl_reference']:.3f} "
            f"({q['ppl_ratio'] - 1:+.2%})")
    return out


def render(rows: list[Row]) -> str:
    headers = ["system", "workload", "streams x out", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99",
               "tok/s", "load1", "others", "method / notes"]
    body = []
    for r in rows:
        m = r.metrics
        no_token_times = r.system == "generate_batch"
        body.append([
            r.system, r.workload, f"{r.streams} x {r.output_tokens}" if r.streams else "-",
            *("n/a" if no_token_times else m.get(k) for k in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms")),
            m.get("tokens_per_s"), r.load1, "-" if r.others is None else f"{r.others:.2f}",
            f"ERROR: {r.error}" if r.error else "; ".join(x for x in (r.method, r.notes) if x),
        ])
    return table(headers, body, digits=1)


def render_targets(targets: list[dict]) -> str:
    return table(["target", "system", "result", "detail"],
                 [[t["target"], t["system"], t["result"], t["detail"]] for t in targets])
