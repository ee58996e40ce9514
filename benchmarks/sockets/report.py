"""The sockets benchmark's tables: idle sockets (what each one costs the web process),
streaming beside them against the engine alone, and a slow client's effect on the others,
for each number of web processes; then the issue's targets, met or not."""

from __future__ import annotations

from ..machine import measured_on
from ..report import fmt, heading, table

IDLE_HEADERS = ["web procs", "sockets", "connected", "still open", "refused", "burst s", "connect p99 ms",
                "RSS start MB", "RSS MB", "KB/socket", "idle CPU %", "Redis conns", "fds"]
STREAM_HEADERS = ["web procs", "idle open", "chats", "completed", "errors", "TTFT p50", "TTFT p99", "ITL p50",
                  "ITL p99", "tok/s", "engine tok/s", "ratio", "engine TTFT p50", "Redis conns max/proc"]
TAX_HEADERS = ["web procs", "chats", "prefill worker ms/reply", "engine prefill ms/reply", "prefill extra %",
               "decode worker ms/reply", "engine decode ms/reply", "decode extra %"]
CORES_HEADERS = ["web procs", "chats", "web", "CPU tier", "prefill", "decode", "Redis", "visitors", "other", "all",
                 "machine cores"]
SLOW_HEADERS = ["web procs", "clients", "others' ITL p50", "p99", "with a slow one: p50", "p99", "p99 change %",
                "others completed"]


def _sum(procs: list[dict], key: str):
    values = [p[key] for p in procs if p.get(key) is not None]
    return sum(values) if values else None


def idle_rows(phase: dict) -> list[list]:
    rows = []
    start_rss = _sum(phase["start"], "rss_mb")
    for lv in phase["idle"]:
        rows.append([phase["web_processes"], lv["sockets"], lv["connected"], lv["still_open"],
                     sum(lv["refused"].values()), lv["burst_span_s"], lv["connect_ms"]["p99"], start_rss, _sum(lv["procs"], "rss_mb"),
                     lv["rss_kb_per_socket"], _sum(lv["procs"], "idle_cpu_percent"),
                     _sum(lv["procs"], "redis_connections"), _sum(lv["procs"], "open_fds")])
    return rows


def stream_rows(phase: dict) -> list[list]:
    rows = []
    for lv in phase["streaming"]:
        p, e = lv["platform"], lv.get("engine") or {}
        rows.append([phase["web_processes"], lv["idle_open"], lv["chats"], p["requests"] - p["error_count"],
                     ",".join(p["errors"]) or "-", p["ttft_ms"]["p50"], p["ttft_ms"]["p99"], p["itl_ms"]["p50"],
                     p["itl_ms"]["p99"], p["aggregate_tps"], e.get("aggregate_tps"), fmt(lv["ratio"], 3),
                     (e.get("ttft_ms") or {}).get("p50"), lv["redis_connections_max"]])
    return rows


def cores_rows(phase: dict) -> list[list]:
    """Cores each part of the platform used while a streaming round ran (cpu_share.py)."""
    groups = {"web": "web", "cpu": "CPU tier", "prefill": "prefill", "decode": "decode", "redis": "Redis",
              "visitors": "visitors"}
    rows = []
    for lv in phase["streaming"]:
        cores = dict(lv.get("cores") or {})
        machine = cores.pop("machine cores", None)
        if not cores:
            continue
        by: dict[str, float] = {}
        for name, used in cores.items():
            group = next((label for prefix, label in groups.items() if name.startswith(prefix)), "other")
            by[group] = by.get(group, 0.0) + used
        rows.append([phase["web_processes"], lv["chats"], *(by.get(g, 0.0) for g in [*groups.values(), "other"]),
                     sum(by.values()), machine])
    return rows


def tax_rows(phase: dict) -> list[list]:
    """CPU milliseconds per reply on the two pinned cores' work: the prefill and decode
    worker processes (the engine plus the pipeline around it: Celery, the KV store, the
    stream records) against the engine alone's prefill and decode threads, same prompts."""
    rows = []
    for lv in phase["streaming"]:
        # Replies of the round (the one-visitor level asks several in turn).
        cpu, eng, m = lv.get("cpu_s") or {}, lv.get("engine_cpu_s"), lv["platform"]["requests"]
        if not eng or not m:
            continue
        row = [phase["web_processes"], lv["chats"]]
        for stage in ("prefill", "decode"):
            worker = sum(v for k, v in cpu.items() if k.startswith(stage))
            row += [worker * 1000 / m, eng[stage] * 1000 / m,
                    (worker / eng[stage] - 1) * 100 if eng[stage] else None]
        rows.append(row)
    return rows


def slow_rows(phase: dict) -> list[list]:
    s = phase.get("slow")
    if not s:
        return []
    return [[phase["web_processes"], s["clients"], s["without"]["itl_ms"]["p50"], s["without"]["itl_ms"]["p99"],
             s["with"]["itl_ms"]["p50"], s["with"]["itl_ms"]["p99"], s["p99_change_percent"],
             f"{s['with']['requests'] - s['with']['error_count']}/{s['with']['requests']}"]]


def targets(result: dict) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for the issue's targets this run measured."""
    out: list[tuple[str, str, bool | None]] = []
    for ph in result.get("phases", []):
        w = ph["web_processes"]
        per = f" ({w} web processes)" if w > 1 else ""
        if ph["idle"]:
            top = ph["idle"][-1]
            out.append((f"{top['sockets']} idle sockets, 100% connected{per}",
                        f"{top['still_open']}/{top['sockets']}", top["still_open"] == top["sockets"]))
            kb = top["rss_kb_per_socket"]
            out.append((f"<= 100 KB RSS per idle socket{per}", f"{fmt(kb)} KB", kb is not None and kb <= 100))
            cpu = max(p["idle_cpu_percent"] for p in top["procs"])
            out.append((f"<= 2% of a core idle, per web process{per}", f"{fmt(cpu)} %", cpu <= 2))
            conns = max(p["redis_connections"] for p in top["procs"])
            out.append((f"<= 8 Redis connections per web process{per}", str(conns), conns <= 8))
        rss = max(p["rss_mb"] for p in ph["start"])
        out.append((f"web RSS <= 150 MB at start{per}", f"{fmt(rss)} MB", rss <= 150))
        for lv in ph["streaming"]:
            p = lv["platform"]
            out.append((f"<= 8 Redis connections per web process, {lv['chats']} chats streaming{per}",
                        str(lv["redis_connections_max"]), lv["redis_connections_max"] <= 8))
            if lv["chats"] >= 128:
                out.append((f"{lv['chats']} concurrent chats: 100% complete{per}",
                            f"{p['requests'] - p['error_count']}/{p['requests']}", p["error_count"] == 0))
            engine_ttft = ((lv.get("engine") or {}).get("ttft_ms") or {}).get("p50")
            if lv["chats"] == 1 and engine_ttft is not None and p["ttft_ms"]["p50"] is not None:
                over = p["ttft_ms"]["p50"] - engine_ttft
                out.append((f"TTFT over the engine alone at one client <= 20 ms p50{per}", f"{fmt(over)} ms",
                            over <= 20))
            if lv["chats"] == 64 and lv["ratio"] is not None:
                out.append((f"streamed tok/s >= 0.85 x the engine alone at 64{per}", fmt(lv["ratio"], 3),
                            lv["ratio"] >= 0.85))
        if ph.get("slow") and ph["slow"]["p99_change_percent"] is not None:
            ch = ph["slow"]["p99_change_percent"]
            # One-sided: the target is that a slow reader delays nobody. The others' ITL p99
            # also moves between rounds of the same side (new sequences joining the decode
            # batch pause it), so a fall is that noise, never the slow reader's doing.
            out.append((f"a slow client adds <= 10% to the others' ITL p99{per}", f"{fmt(ch)} %", ch <= 10))
    return out


def report(result: dict) -> None:
    print()
    print(measured_on(result["machine"]))
    cfg = result.get("config", {})
    print(f"\nModel {cfg.get('model')}, {cfg.get('max_output_tokens')} output tokens per reply, decode slots "
          f"{cfg.get('decode_slots')}; times in ms; tok/s = streamed output tokens per second, all clients")
    phases = result.get("phases", [])
    heading("Idle sockets (opened in a burst; KB/socket = RSS growth / sockets still open)")
    print(table(IDLE_HEADERS, [r for ph in phases for r in idle_rows(ph)]))
    heading("Streaming beside the idle sockets, against the engine alone at the same concurrency")
    print(table(STREAM_HEADERS, [r for ph in phases for r in stream_rows(ph)], digits=1))
    heading("Where the cores went during each streaming round (CPU seconds / wall seconds)")
    print(table(CORES_HEADERS, [r for ph in phases for r in cores_rows(ph)], digits=2))
    heading("CPU per reply on the pinned cores: the model workers against the engine alone")
    print(table(TAX_HEADERS, [r for ph in phases for r in tax_rows(ph)], digits=1))
    heading("One slow client (one frame a second) among the others")
    print(table(SLOW_HEADERS, [r for ph in phases for r in slow_rows(ph)]))
    checks = targets(result)
    if checks:
        heading("Targets")
        print(table(["target", "measured", "met"],
                    [[t, m, "-" if ok is None else ("yes" if ok else "NO")] for t, m, ok in checks]))
