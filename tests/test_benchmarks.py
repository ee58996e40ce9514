"""Every benchmark suite's `--quick` smoke run, as a person runs it: `python -m benchmarks
<suite> --quick --out <file>` in a subprocess, on the tiny model where the suite serves
one. A benchmark is code nobody runs until the day its numbers are needed; this is what
notices, on the change that breaks it, that it no longer runs.

The suites come from benchmarks.__main__.SUITES, so a suite added there is covered here
without an edit. Each run must exit 0, print a markdown table and write its JSON with
`benchmark` (its name) and `quick: true` at the top; the suites known here also have their
rows checked for sane values (a figure that must be positive is). The figures themselves
mean nothing: the machine is shared and the workload tiny.

The platform suites (e2e, fairness, faults and any other that starts daphne and workers)
take most of the time: starting the platform's processes is most of each run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks.__main__ import SUITES
from tests.conftest import BASE_DIR

# A platform suite's quick run is one to two minutes on 2 busy vCPUs: process start-up
# (daphne and three model workers importing torch) and their warm shutdown dominate.
RUN_TIMEOUT_S = 540
pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S + 30)


def run_quick(suite: str, out) -> subprocess.CompletedProcess:
    # OpenMP threads that sleep at a barrier instead of spinning: on a machine shared with
    # other test runs a spinning team waits for a descheduled member and a quick run takes
    # twice as long. Its figures mean nothing either way.
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.run([sys.executable, "-m", "benchmarks", suite, "--quick", "--out", str(out)], cwd=BASE_DIR,
                          env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, (f"`python -m benchmarks {suite} --quick` exited {proc.returncode}\n"
                                  f"stdout (tail):\n{proc.stdout[-3000:]}\nstderr (tail):\n{proc.stderr[-6000:]}")
    return proc


@pytest.mark.parametrize("suite", list(SUITES))
def test_each_benchmarks_quick_run_exits_cleanly_prints_a_table_and_writes_sane_json(suite, tmp_path):
    out = tmp_path / "sub" / f"{suite}.json"  # a folder that does not exist yet: the suite makes it
    proc = run_quick(suite, out)

    assert out.exists(), f"{suite} --quick wrote no JSON at --out {out}"
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == suite
    assert doc["quick"] is True
    assert any(line.startswith("|") for line in proc.stdout.splitlines()), f"no table on stdout:\n{proc.stdout}"
    CHECKS.get(suite, lambda d: None)(doc)


def test_a_quick_run_without_out_writes_under_var_bench_quick_not_over_a_full_runs_results():
    path = BASE_DIR / "var" / "bench" / "quick" / "admission.json"
    path.unlink(missing_ok=True)
    full = BASE_DIR / "var" / "bench" / "admission.json"
    before = full.stat().st_mtime_ns if full.exists() else None

    proc = subprocess.run([sys.executable, "-m", "benchmarks", "admission", "--quick"], cwd=BASE_DIR,
                          capture_output=True, text=True, timeout=120)

    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(path.read_text())["quick"] is True
    assert (full.stat().st_mtime_ns if full.exists() else None) == before


# -- what each known suite's JSON must hold ----------------------------------------------


def positive(value) -> bool:
    return isinstance(value, int | float) and value > 0


def check_engine(doc: dict) -> None:
    from benchmarks.engine.run import QUICK

    failed = [(r["system"], r["workload"], r["error"]) for r in doc["results"] if r["error"]]
    assert not failed, f"engine rows failed: {failed}"
    assert {r["system"] for r in doc["results"]} == set(QUICK["systems"].split(","))
    for r in doc["results"]:
        assert positive(r["metrics"]["tokens_per_s"]), r
    tandem = [r for r in doc["results"] if r["system"] in ("colocated", "disaggregated")]
    assert {r["workload"] for r in tandem} == {"single", "streams32", "streams64", "mixed-unloaded", "mixed-loaded"}
    assert all(positive(r["metrics"]["ttft_p50_ms"]) and r["metrics"]["incomplete"] == 0 for r in tandem), tandem
    assert doc["targets"], "no targets evaluated"
    assert doc["quality"] and all(0 < q["agreement"] <= 1 and positive(q["ppl"]) for q in doc["quality"])


def check_e2e(doc: dict) -> None:
    assert [level["clients"] for level in doc["levels"]] == [1, 2]
    for level in doc["levels"]:
        assert level["prompt_ids_match"], f"the CPU tier built other prompt ids: {level['prompt_ids_mismatched']}"
        for side in ("engine", "platform"):
            s = level[side]
            assert s["error_count"] == 0 and s["requests"] == 2 * level["clients"], (side, s)
            assert positive(s["ttft_ms"]["p50"]) and positive(s["aggregate_tps"]), (side, s)
        assert positive(level["platform_stages"]["prefill"]["p50"]), level["platform_stages"]
    assert positive(doc["overhead"]["engine_p50_ms"]) and positive(doc["overhead"]["platform_p50_ms"])
    assert doc["profile"]["requests"] == 2 and positive(doc["profile"]["ttft_ms"]["p50"])


def check_fairness(doc: dict) -> None:
    for phase in ("b_alone", "b_flood"):
        s = doc[phase]
        assert s["requests"] == 4 and s["error_count"] == 0, (phase, s)
        assert positive(s["ttft_ms"]["p99"]), (phase, s)
    assert doc["a_flood"]["served"] > 0 and not doc["a_flood"]["other_errors"], doc["a_flood"]
    assert positive(doc["verdict"]["ratio"])


def check_faults(doc: dict) -> None:
    [r] = doc["results"]  # --quick: the decode kill alone
    assert (r["scenario"], r["mode"]) == ("decode kill", "disaggregated")
    assert r["total"] == 2 and r["completed"] == 2, r
    assert r["duplicated_indices"] == 0 and r["missing_indices"] == 0, r
    assert r["affected"] >= 1, f"the decode worker was killed holding no reply: {r}"
    assert r["recovered"] == r["affected"] and positive(r["recovery_max_s"]), r


def check_knowledge(doc: dict) -> None:
    sqlite = doc["backends"]["sqlite"]  # --quick: SQLite alone
    assert list(doc["backends"]) == ["sqlite"]
    assert sqlite["quality"]["questions"] > 0 and 0 < sqlite["quality"]["hit@3"] <= 1, sqlite["quality"]
    latency = sqlite["latency"][str(doc["sizes"][0])]
    assert latency["n"] == doc["queries"] and positive(latency["p50_ms"]), latency
    assert positive(sqlite["cpu_tier"]["on"]["p50_ms"]) and positive(sqlite["cpu_tier"]["on"]["prompt_tokens_mean"])
    sweep = sqlite["quality"]["thresholds"]["bm25"]  # the minimum-score sweep: a higher floor keeps less
    assert [row["hit@k"] for row in sweep] == sorted((row["hit@k"] for row in sweep), reverse=True), sweep
    assert sweep[0]["off_topic_cited"] >= sweep[-1]["off_topic_cited"], sweep
    for label in ("without_knowledge", "with_knowledge"):
        assert 0 <= sqlite["prefix_cache"][label]["hit_rate"] <= 1 and positive(
            sqlite["prefix_cache"][label]["prompt_tokens"])


def check_admission(doc: dict) -> None:
    assert doc["n"] == 300
    for side in ("tenant_only_ms", "with_subjects_ms"):
        assert doc[side]["n"] == 300 and positive(doc[side]["p50"]) and doc[side]["p99"] >= doc[side]["p50"]


def check_webhooks(doc: dict) -> None:
    fan = doc["fanout"]  # --quick: 50 events, every one delivered once, every delivery recorded a success
    assert fan["events"] == fan["emitted"] == fan["delivered"] == 50, fan
    assert fan["deliveries"] == {"succeeded": 50}, fan["deliveries"]
    assert positive(fan["delivered_per_s"]) and positive(fan["delay_ms"]["p50"]), fan
    assert fan["delay_ms"]["p99"] >= fan["delay_ms"]["p50"], fan["delay_ms"]
    chats = doc["chats"]
    assert [r["webhooks"] for r in chats["rounds"]] == [False, True], chats["rounds"]  # A B
    assert chats["rounds"][0]["events"] == 0 and chats["rounds"][1]["events"] > 0, "off stores no event, on does"
    for side in ("off", "on"):
        s = chats[side]
        assert s["error_count"] == 0 and positive(s["ttft_ms"]["p50"]) and positive(s["itl_ms"]["p99"]), s
    ev = chats["events"]
    assert ev["delivered"] == ev["emitted"] > 0 and positive(ev["delay_ms"]["p99"]), ev
    r = doc["receiver"]
    assert r["bad_signatures"] == 0 and r["signatures_verified"] > 0, r


def check_webdb(doc: dict) -> None:
    sides = {(s["burst"], s["side"]): s for s in doc["summary"]}
    assert set(sides) == {(n, side) for n in (10, 20) for side in ("pooled", "no pool")}, sorted(sides)
    for (n, _side), s in sides.items():
        assert s["sent"] == n and positive(s["p50_ms"]) and s["p99_ms"] >= s["p50_ms"], s
        assert s["db_connections_max"] >= 1, s
    # A burst of 20 is under PostgreSQL's max_connections, so both sides answer it all;
    # only the pooled one keeps to its pool.
    assert all(s["ok"] == s["sent"] for s in sides.values()), sides
    assert sides[(20, "pooled")]["db_connections_max"] <= doc["config"]["pool_size"]


CHECKS = {"engine": check_engine, "e2e": check_e2e, "fairness": check_fairness, "faults": check_faults,
          "knowledge": check_knowledge, "admission": check_admission, "webhooks": check_webhooks,
          "webdb": check_webdb}
