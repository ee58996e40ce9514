"""Where a platform request's time went, finer than `stages`: Redis's MONITOR timestamps
every command the web tier and the workers send (µs, the server's clock), so broker hops,
Celery dispatch and task bodies can be told apart. MONITOR costs Redis some CPU per
command: use it for a short profiling pass at light load.
"""

from __future__ import annotations

import re
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager

from inference.wire import keys

from ..stats import summarize
from ..traces import Trace


class RedisMonitor:
    """Redis MONITOR in a background thread: (server time, command line) for every
    command any client sends. Each line is kept up to `keep` bytes (KV payloads are
    megabytes). Costs Redis some CPU per command: use it for light-load profiling."""

    def __init__(self, url: str, *, keep: int = 3000):
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.addr = (parts.hostname or "127.0.0.1", parts.port or 6379)
        self.keep = keep
        self.lines: list[tuple[float, str]] = []
        self._sock = socket.create_connection(self.addr)
        self._sock.sendall(b"MONITOR\r\n")
        self._file = self._sock.makefile("rb")
        if not self._file.readline().startswith(b"+OK"):
            raise RuntimeError("MONITOR refused")
        self._thread = threading.Thread(target=self._run, name="redis-monitor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                line = self._file.readline()
                if not line:
                    return
                head = line[: self.keep].decode("utf-8", "replace")
                if head.startswith("+"):
                    t, _, rest = head[1:].partition(" ")
                    try:
                        self.lines.append((float(t), rest.rstrip("\r\n")))
                    except ValueError:
                        pass
        except OSError:
            return

    def stop(self) -> list[tuple[float, str]]:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(timeout=5)
        return self.lines


_CMD_RE = re.compile(r'^\[\d+ [^\]]*\] "([A-Za-z]+)"(?: "([^"]*)")?')


def monitor_timeline(lines: list[tuple[float, str]], trace: Trace) -> dict:
    """One request's milestones from MONITOR lines (server time, seconds):

    admit        the web tier's quota script (admission, which stores the spec)
    web_spec     the script's SET of the request spec (before the message rows are written)
    cpu_enqueue  LPUSH of the preprocess task onto `cpu`
    stored       the web tier reported its rows committed (its RPUSH to the hand-off list;
                 beside the CPU tier)
    cpu_fetched  the CPU worker took it off the queue (kombu's unacked bookkeeping)
    cpu_start    the task body started (GET of the request spec)
    cpu_spec     the CPU tier stored the prompt ids (with its hand-off report)
    cpu_done     LPUSH of the prefill task (by the CPU tier, or by the web tier when its
                 commit came second)
    pf_fetched   the prefill worker took it off the queue
    pf_start     the prefill task body started (GET of the spec)
    tok0         XADD of token 0 to the stream (after the forward and detokenizing)
    """
    rid = trace.request_id
    if not rid:
        return {}
    spec_key, stream_key, handoff_key = keys.request(rid), keys.stream(rid), keys.rendezvous(rid)
    marks: dict[str, float] = {}
    gets = sets = 0
    for t, line in lines:
        if t < trace.t_send - 1 or rid not in line:
            continue
        m = _CMD_RE.match(line)
        if not m:
            continue
        cmd, key = m.group(1).upper(), m.group(2) or ""
        if cmd in ("EVALSHA", "EVAL") and "web_spec" not in marks:
            marks["admit"] = t  # the last script before the spec is stored: admission
        elif cmd == "SET" and key == spec_key:
            sets += 1
            marks.setdefault("web_spec" if sets == 1 else "cpu_spec", t)
        elif cmd == "LPUSH" and key.split(":")[0] == "cpu":
            marks.setdefault("cpu_enqueue", t)
        elif cmd == "RPUSH" and key == handoff_key and '\\"party\\": \\"web\\"' in line:
            marks.setdefault("stored", t)
        elif cmd == "LPUSH" and key.startswith("prefill."):
            marks.setdefault("cpu_done", t)
        elif cmd in ("HSET", "ZADD") and "unacked" in key:
            if "cpu_enqueue" in marks and "cpu_done" not in marks:
                marks.setdefault("cpu_fetched", t)
            elif "cpu_done" in marks:
                marks.setdefault("pf_fetched", t)
        elif cmd == "GET" and key == spec_key:
            gets += 1
            marks.setdefault("cpu_start" if gets == 1 else "pf_start", t)
        elif cmd == "XADD" and key == stream_key and '"type" "token"' in line and '"index" "0"' in line:
            marks.setdefault("tok0", t)
            break
    return marks


MONITOR_STAGES = [
    ("ingress", "t_send", "admit", "websocket frame -> consumer -> executor thread; route, spec, token estimate"),
    ("web_spec", "admit", "web_spec", "admission script until it stores the spec (and listener lease)"),
    ("web_publish", "web_spec", "cpu_enqueue", "Celery publish to the CPU tier"),
    ("web_store", "cpu_enqueue", "stored", "(beside the CPU tier) message rows, COMMIT, hand-off report"),
    ("cpu_broker", "cpu_enqueue", "cpu_fetched", "Redis broker -> CPU worker"),
    ("cpu_dispatch", "cpu_fetched", "cpu_start", "Celery starts the task"),
    ("cpu_prompt", "cpu_start", "cpu_spec", "spec + cancel flag (one round trip), build_prompt; no DB reads"),
    ("cpu_publish", "cpu_spec", "cpu_done", "hand-off report (spec, status), Celery publish to prefill"),
    ("pf_broker", "cpu_done", "pf_fetched", "Redis broker -> prefill worker"),
    ("pf_dispatch", "pf_fetched", "pf_start", "Celery hands the task to a pool thread"),
    ("pf_task", "pf_start", "tok0", "spec, batcher, forward + sampling (engine), detokenize, XADD"),
    ("deliver", "tok0", "t_first", "XREAD wakes the consumer -> websocket frame -> client"),
]
# Left out of the platform's own time: web_store runs beside the CPU tier, and pf_task
# holds the engine's forward.
MONITOR_UNCOUNTED = {"web_store", "pf_task"}


def monitor_stages(marks: dict, trace: Trace) -> dict:
    points = {**marks, "t_send": trace.t_send, "t_first": trace.t_first}
    out = {}
    for name, a, b, _ in MONITOR_STAGES:
        out[name] = (points[b] - points[a]) * 1e3 if points.get(a) is not None and points.get(b) is not None else None
    return out


def monitor_profile(lines: list[tuple[float, str]], traces: Iterable[Trace]) -> dict:
    """Per-stage summaries (ms) of `traces` from MONITOR lines, and each request's marks."""
    first_tokens = [t for t, ln in lines if '"XADD"' in ln and '"type" "token" "index" "0"' in ln]
    per_request = []
    for tr in traces:
        if tr.ok:
            marks = monitor_timeline(lines, tr)
            a, b = marks.get("pf_start"), marks.get("tok0")
            # other requests' first tokens produced while this one was in its prefill task:
            # prompts it shared a forward with, or waited behind
            others = sum(1 for t in first_tokens if a is not None and b is not None and a < t < b)
            per_request.append({"ttft_ms": tr.ttft_ms, "marks": marks, "stages_ms": monitor_stages(marks, tr),
                                "other_prefills_during": others})
    return {
        "requests": len(per_request),
        "other_prefills_during_mean": statistics.fmean(r["other_prefills_during"] for r in per_request)
        if per_request else None,
        "monitor_lines": len(lines),
        "ttft_ms": summarize(r["ttft_ms"] for r in per_request),
        "stages": {name: summarize(r["stages_ms"].get(name) for r in per_request) for name, *_ in MONITOR_STAGES},
        "per_request": per_request,
    }


@contextmanager
def monitored(redis_url: str):
    """Redis MONITOR for the duration of the block; yields a list filled at the end."""
    lines: list[tuple[float, str]] = []
    mon = RedisMonitor(redis_url)
    try:
        yield lines
    finally:
        time.sleep(0.2)  # the last commands reach the monitor
        lines.extend(mon.stop())


def profiled(redis_url: str, send: Callable[[], list[Trace]]) -> dict:
    """send() under MONITOR, and the profile of the requests it returns."""
    with monitored(redis_url) as lines:
        traces = send()
    return monitor_profile(lines, traces)
