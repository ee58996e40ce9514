"""A run as the console, the API and the command show it: per-case rows and totals in
words and numbers (one reading of EvalRun.summary for all three)."""

from __future__ import annotations

from .models import EvalResult, EvalRun

# The totals' checks, in the order a reader looks for them, with their names in words.
CHECK_NAMES = {"answered": "answered", "retrieval_hit": "retrieval hit", "citation_first": "citation correct",
               "handover": "hand-over correct"}


def check_label(name: str) -> str:
    return CHECK_NAMES.get(name, name)


def totals(run: EvalRun) -> list[dict]:
    """[{"name", "label", "passed", "of", "share"}]: the named checks first, then the
    phrase checks together."""
    checks = run.summary.get("checks", {})
    rows = [{"name": n, "label": label, "passed": checks[n][0], "of": checks[n][1]}
            for n, label in CHECK_NAMES.items() if n in checks]
    phrases = [v for n, v in checks.items() if n.startswith(("includes: ", "excludes: "))]
    if phrases:
        rows.append({"name": "phrases", "label": "phrase checks", "passed": sum(p for p, _ in phrases),
                     "of": sum(of for _, of in phrases)})
    return [{**r, "share": r["passed"] / r["of"] if r["of"] else None} for r in rows]


def failed_checks(result: EvalResult) -> list[str]:
    return [check_label(name) for name, ok in result.checks.items() if not ok]


def run_table(run: EvalRun) -> list[str]:
    """The command's lines: one per case, then the totals."""
    lines = [f"Run {run.pk} with the {run.settings} settings: {run.status}"
             + (f" ({run.error})" if run.error else ""),
             f"{'result':6}  {'latency':>8}  {'tokens':>6}  {'repeat':>6}  question / failed checks"]
    for r in run.results.all():
        failed = failed_checks(r)
        lines.append(f"{'pass' if r.passed else 'FAIL':6}  {(r.latency_ms or 0) / 1000:7.2f}s  {r.completion_tokens:6}  "
                     f"{r.repetition:6.2f}  {r.question[:60]}" + (f"  [{', '.join(failed)}]" if failed else ""))
    s = run.summary
    if not s:
        return lines
    lines.append(f"{s['passed']}/{s['cases']} cases passed (run {run.pk})")
    for t in totals(run):
        lines.append(f"  {t['label']}: {t['passed']}/{t['of']}")
    if s.get("mean_completion_tokens") is not None:
        lines.append(f"  mean length: {s['mean_completion_tokens']:.1f} tokens; mean repetition share: "
                     f"{s['mean_repetition']:.2f}")
    if s.get("mean_latency_ms") is not None:
        lines.append(f"  latency: mean {s['mean_latency_ms'] / 1000:.2f} s, median {s['median_latency_ms'] / 1000:.2f} s")
    return lines
