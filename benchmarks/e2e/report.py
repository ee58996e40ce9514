"""The e2e benchmark's summaries and report: per level, the engine alone's and the
platform's TTFT, inter-token gaps and throughput; the platform's TTFT by stage; the
TTFT overhead at one client (and the platform's own time); the MONITOR profile."""

from __future__ import annotations

import statistics

from ..machine import measured_on
from ..report import fmt, heading, table
from ..stack.monitor import MONITOR_STAGES


def row(label: str, clients: int, s: dict) -> list:
    return [label, clients, s["requests"] - s["error_count"], s["ttft_ms"]["p50"], s["ttft_ms"]["p90"],
            s["ttft_ms"]["p99"], s["itl_ms"]["p50"], s["itl_ms"]["p99"], s["itl_first_ms"]["p50"],
            s["tpot_ms"]["p50"], s["e2e_tps"]["p50"], s["aggregate_tps"], s["output_tokens_mean"]]


HEADERS = ["mode", "clients", "ok", "TTFT p50", "TTFT p90", "TTFT p99", "ITL p50", "ITL p99", "ITL 0->1 p50",
           "TPOT p50", "tok/s/req p50", "tok/s total", "out tok"]


def overhead_at_one(levels: list[dict], target_ms: float) -> dict | None:
    one = next((lv for lv in levels if lv["clients"] == 1), None)
    if one is None:
        return None
    e, p = one["engine"]["ttft_ms"]["p50"], one["platform"]["ttft_ms"]["p50"]
    if e is None or p is None:
        return None
    by_prompt = {t["prompt_n"]: t["ttft_ms"] for t in one["traces"]["engine"] if t["ttft_ms"] is not None}
    paired = [t["ttft_ms"] - by_prompt[t["prompt_n"]] for t in one["traces"]["platform"]
              if t["ttft_ms"] is not None and t["prompt_n"] in by_prompt]
    # The platform's own time per request (its TTFT minus its prefill engine's share):
    # unlike the difference above, it does not depend on how fast each side's forward
    # happened to run (on a VM, a forward that starts on an idle CPU runs slower than one
    # that follows the platform's own tiers' work).
    own = one["platform_stages"].get("outside_engine", {}).get("p50")
    return {"engine_p50_ms": e, "platform_p50_ms": p, "p50_diff_ms": p - e,
            "paired_median_diff_ms": statistics.median(paired) if paired else None,
            "outside_engine_p50_ms": own, "outside_engine_met": own is not None and own <= target_ms,
            "target_ms": target_ms, "met": (p - e) <= target_ms}


def report(result: dict, args) -> None:
    print()
    print(measured_on(result["machine"]))
    heading("Platform vs engine alone (times in ms; tok/s = output tokens per second)")
    rows = []
    for lv in result.get("levels", []):
        rows += [row("engine", lv["clients"], lv["engine"]), row("platform", lv["clients"], lv["platform"])]
    print(table(HEADERS, rows))
    heading("Platform TTFT by stage, p50 (ms), from the marks each request left in Redis")
    srows = []
    for lv in result.get("levels", []):
        st = lv["platform_stages"]
        srows.append([lv["clients"], lv["platform"]["ttft_ms"]["p50"], st["web"]["p50"], st["cpu"]["p50"],
                      st["prefill"]["p50"], st["deliver"]["p50"], st["engine"]["p50"], st["outside_engine"]["p50"],
                      lv["engine"]["ttft_ms"]["p50"]])
    print(table(["clients", "TTFT", "web", "cpu tier", "prefill tier", "deliver", "its prefill engine",
                 "TTFT - its engine", "engine-alone TTFT"], srows))
    ov = result.get("overhead")
    if ov:
        print()
        print(f"TTFT overhead, one client, p50: platform {ov['platform_p50_ms']:.1f} ms - engine "
              f"{ov['engine_p50_ms']:.1f} ms = {ov['p50_diff_ms']:.1f} ms (median of per-prompt differences "
              f"{fmt(ov['paired_median_diff_ms'])} ms); target <= {ov['target_ms']:.0f} ms: "
              f"{'MET' if ov['met'] else 'NOT MET'}")
        if ov.get("outside_engine_p50_ms") is not None:
            print(f"The platform's own time (each request's TTFT minus its prefill engine's share, p50): "
                  f"{ov['outside_engine_p50_ms']:.1f} ms: {'MET' if ov['outside_engine_met'] else 'NOT MET'}")
        if ov.get("accounted_p50_ms") is not None:
            print(f"Accounted from the MONITOR profile (every stage but the prefill task body, per request, "
                  f"p50): {ov['accounted_p50_ms']:.1f} ms: {'MET' if ov['accounted_met'] else 'NOT MET'}")
    prof = result.get("profile")
    if prof:
        heading(f"Profile under Redis MONITOR: one client, {prof['requests']} requests (ms)")
        prow = [[name, prof["stages"][name]["p50"], prof["stages"][name]["p90"], what]
                for name, _, _, what in MONITOR_STAGES]
        prow.append(["TTFT", prof["ttft_ms"]["p50"], prof["ttft_ms"]["p90"], "client send -> first token frame"])
        print(table(["stage", "p50", "p90", "what"], prow))
        out = prof["outside_pf_task_ms"]
        print(f"\nEverything but the prefill task body, per request: p50 {fmt(out['p50'])} ms, "
              f"p90 {fmt(out['p90'])} ms (engine alone, same prompts, earlier: TTFT p50 "
              f"{fmt(prof['engine_alone_ttft_p50_ms'])} ms)")
    mism = [lv["clients"] for lv in result.get("levels", []) if not lv["prompt_ids_match"]]
    if mism:
        print(f"\nWARNING: the platform's prompt ids differed from the engine run's at levels {mism}")
