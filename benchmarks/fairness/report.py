"""The fairness benchmark's report: tenant B's TTFT alone and under tenant A's flood,
where it went (by stage, and finer under Redis MONITOR), what A got, the queues and
batches sampled meanwhile, and the verdict against the target ratio."""

from __future__ import annotations

from ..machine import measured_on
from ..report import fmt, heading, table
from ..stack.monitor import MONITOR_STAGES


def report(r: dict) -> None:
    ba, bf = r["b_alone"], r["b_flood"]
    print()
    print(measured_on(r["machine"]))
    heading("Tenant B's TTFT, alone and while tenant A floods (ms)")
    rows = []
    for label, s in (("B alone", ba), ("B, A flooding", bf)):
        t = s["ttft_ms"]
        rows.append([label, s["requests"] - s["error_count"], s["error_count"], t["p50"], t["p90"], t["p99"], t["max"],
                     s["tpot_ms"]["p50"], s["itl_first_ms"]["p50"]])
    print(table(["phase", "ok", "errors", "TTFT p50", "TTFT p90", "TTFT p99", "TTFT max", "TPOT p50",
                 "ITL 0->1 p50"], rows))
    heading("Where B's TTFT goes (ms; web = send -> spec stored, cpu = -> prompt built and prefill queued, "
            "prefill = -> token 0 produced, deliver = -> frame at the client)")
    srows = []
    for label, s in (("B alone", ba), ("B, A flooding", bf)):
        st = s["stages_ms"]
        srows.append([label, *[st[k]["p50"] for k in ("web", "cpu", "prefill", "deliver")],
                      *[st[k]["p99"] for k in ("web", "cpu", "prefill", "deliver")]])
    print(table(["phase", "web p50", "cpu p50", "prefill p50", "deliver p50", "web p99", "cpu p99", "prefill p99",
                 "deliver p99"], srows))
    pa, pf = r.get("profile_alone"), r.get("profile_flood")
    if pa and pf:
        heading(f"B's TTFT by finer stage, under Redis MONITOR ({pa['requests']} + {pf['requests']} more requests; ms)")
        prow = [[name, pa["stages"][name]["p50"], pa["stages"][name]["max"], pf["stages"][name]["p50"],
                 pf["stages"][name]["max"], what] for name, _, _, what in MONITOR_STAGES]
        prow.append(["TTFT", pa["ttft_ms"]["p50"], pa["ttft_ms"]["max"], pf["ttft_ms"]["p50"], pf["ttft_ms"]["max"],
                     "client send -> first token frame"])
        print(table(["stage", "alone p50", "alone max", "flood p50", "flood max", "what"], prow))
        print(f"\nOther requests' first tokens produced during B's prefill task (mean): alone "
              f"{fmt(pa['other_prefills_during_mean'], 2)}, flood {fmt(pf['other_prefills_during_mean'], 2)}")
    print()
    af = r["a_flood"]
    print(f"Tenant A during the flood: {af['attempts']} attempts ({fmt(af['attempts_per_s'])}/s), "
          f"{af['served']} served, {af['refused_rate_limited']} refused (rate_limited); A's TTFT p50 "
          f"{fmt(af['ttft_ms']['p50'])} ms, p99 {fmt(af['ttft_ms']['p99'])} ms; A's output "
          f"{fmt(af['output_tokens_per_s'])} tok/s")
    heading("Queues and batches, sampled every 0.5 s (mean / max)")
    keys = sorted(set(r["state_alone"]) | set(r["state_flood"]))
    qrows = []
    for k in keys:
        if k.endswith(("tokens_per_s",)):
            continue
        sa, sf = r["state_alone"].get(k, {}), r["state_flood"].get(k, {})
        qrows.append([k, sa.get("mean"), sa.get("max"), sf.get("mean"), sf.get("max")])
    print(table(["what", "alone mean", "alone max", "flood mean", "flood max"], qrows))
    v = r["verdict"]
    print()
    print(f"B's p99 TTFT: alone {fmt(v['p99_alone_ms'])} ms, with A flooding {fmt(v['p99_flood_ms'])} ms"
          f" -> {fmt(v['ratio'], 2)}x (target <= {v['target_ratio']}x): {'MET' if v['met'] else 'NOT MET'}"
          f"  [{v['samples_per_phase']} requests per phase: p99 is close to the maximum]")
