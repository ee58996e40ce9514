"""The webhooks benchmark's tables: the fan-out alone, the chats with webhooks off and on,
the events delivered beside the chats; then the issue's targets, met or not."""

from __future__ import annotations

from ..machine import measured_on
from ..report import fmt, heading, table

FANOUT_HEADERS = ["events", "emitters", "delivered", "emitted/s", "delivered/s", "delay p50 ms", "delay p99 ms",
                  "delay max ms", "POST p50 ms", "deliveries"]
CHAT_HEADERS = ["webhooks", "chats", "rounds", "completed", "errors", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99",
                "tok/s"]
EVENTS_HEADERS = ["chats", "events emitted", "delivered", "delay p50 ms", "delay p99 ms", "delay max ms",
                  "POST p50 ms", "deliveries"]
ITL_TARGET_PERCENT = 5.0
DELAY_TARGET_MS = 1000.0


def _statuses(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "-"


def fanout_rows(result: dict) -> list[list]:
    f = result.get("fanout")
    if not f:
        return []
    return [[f["events"], f["emitters"], f["delivered"], f["emitted_per_s"], f["delivered_per_s"],
             f["delay_ms"]["p50"], f["delay_ms"]["p99"], f["delay_ms"]["max"],
             f.get("post_ms", {}).get("p50"), _statuses(f["deliveries"])]]


def chat_rows(result: dict) -> list[list]:
    c = result.get("chats")
    if not c:
        return []
    rows = []
    for label, key in (("off", "off"), ("on", "on")):
        s = c[key]
        rows.append([label, c["chats"], c["pairs"], s["requests"] - s["error_count"], ",".join(s["errors"]) or "-",
                     s["ttft_ms"]["p50"], s["ttft_ms"]["p99"], s["itl_ms"]["p50"], s["itl_ms"]["p99"],
                     s["aggregate_tps"]])
    return rows


def events_rows(result: dict) -> list[list]:
    c = result.get("chats")
    if not c:
        return []
    e = c["events"]
    return [[c["chats"], e["emitted"], e["delivered"], e["delay_ms"]["p50"], e["delay_ms"]["p99"],
             e["delay_ms"]["max"], e.get("post_ms", {}).get("p50"), _statuses(e["deliveries"])]]


def targets(result: dict) -> list[tuple[str, str, bool | None]]:
    out: list[tuple[str, str, bool | None]] = []
    c = result.get("chats")
    if c:
        p99 = c["events"]["delay_ms"]["p99"]
        out.append((f"p99 delivery delay < 1 s, {c['chats']} chats streaming", f"{fmt(p99)} ms",
                    None if p99 is None else p99 < DELAY_TARGET_MS))
        ch = c["itl_p99_change_percent"]
        out.append((f"chats' ITL p99 with webhooks within {ITL_TARGET_PERCENT:g}% of off", f"{fmt(ch)} %",
                    None if ch is None else ch <= ITL_TARGET_PERCENT))
    r = result.get("receiver")
    if r:
        out.append(("signatures verified with the documented recipe", f"{r['signatures_verified']} good, "
                    f"{r['bad_signatures']} bad", r["bad_signatures"] == 0 and r["signatures_verified"] > 0))
    return out


def report(result: dict) -> None:
    print()
    print(measured_on(result["machine"]))
    cfg = result.get("config", {})
    print(f"\nLoad average at start {result['machine'].get('loadavg_at_start')}; model {cfg.get('model')}, "
          f"{cfg.get('max_output_tokens')} output tokens per reply; webhooks worker {cfg.get('webhook_threads')} "
          f"threads; database {cfg.get('db')}; times in ms; delay = arrival at the receiver - Event.created_at")
    heading("Fan-out alone (events emitted with event_emit, one endpoint on 127.0.0.1)")
    print(table(FANOUT_HEADERS, fanout_rows(result)))
    heading("Chats with webhooks off (A) and on (B), rounds alternated A B B A")
    print(table(CHAT_HEADERS, chat_rows(result)))
    heading("The chats' events delivered in the B rounds")
    print(table(EVENTS_HEADERS, events_rows(result)))
    checks = targets(result)
    if checks:
        heading("Targets")
        print(table(["target", "measured", "met"],
                    [[t, m, "-" if ok is None else ("yes" if ok else "NO")] for t, m, ok in checks]))
