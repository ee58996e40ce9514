"""Is a precision good enough to serve? Teacher-forced next-token agreement and perplexity
against a reference precision, on support-style text the project ships
(`benchmarks/engine/data/support_texts.txt`, ~7 KB).

Part of `python -m benchmarks engine` (its "quality" section; `--no-quality` skips it), or
alone: `python -m benchmarks.engine.quality [--candidates int8,float32] [--reference bfloat16]`.

The text is tokenized as one stream and cut into windows of WINDOW tokens (each window a
sequence of its own, starting fresh). Every position after a window's first predicts the
next token of the text:
- agreement: the share of positions where the candidate's top-1 token equals the
  reference's (greedy decoding follows the top-1, so this bounds how far outputs drift);
- perplexity: exp(mean negative log-likelihood of the text's real next tokens).

Three ways of running the same windows, since int8's activation scales are per call and a
few rows run on another kernel:
- prefill: each window in one forward (what a prefill worker computes);
- decode: all windows step together, one token per row per step (what a decode batch
  computes, the per-call activation scale shared by the rows of a step), with copies of a
  window added where there are too few to leave the few-row kernel (a copy changes no
  row's result: fp32 and bf16 rows are independent, int8's per-call scale is a maximum);
- few: the windows step in groups of the model's `block_rows` (one if none), the decode
  steps of a quiet site that bf16 runs on the GGUF's blocks (linear.py); scored against
  the reference's decode, whose many rows never take that kernel.

The bar the issue sets for int8 against bf16: agreement >= 97% and perplexity within 3%.
"""

from __future__ import annotations

import argparse
import gc
import math
import time
from dataclasses import dataclass
from pathlib import Path

TEXT_PATH = Path(__file__).parent / "data" / "support_texts.txt"
WINDOW = 128
AGREEMENT_MIN = 0.97
PPL_RATIO_MAX = 1.03
MODES = ("prefill", "decode", "few")
# The reference's run each mode is scored against.
REFERENCE_MODE = {"prefill": "prefill", "decode": "decode", "few": "decode"}


@dataclass
class Scores:
    """One precision's predictions over every window (positions 0..W-2 predict 1..W-1)."""

    argmax: object  # torch.Tensor [N, W - 1] int64: the top-1 token
    nll: object  # torch.Tensor [N, W - 1] float32: -log p(the text's next token)
    seconds: float


def load_text(path: Path = TEXT_PATH) -> str:
    return path.read_text()


def windows(tokenizer, text: str | None = None, window: int = WINDOW, limit: int | None = None):
    """[N, window] int64: the text's tokens, cut into whole windows (the tail dropped)."""
    import torch

    ids = tokenizer.encode(text if text is not None else load_text(), add_special_tokens=False)
    n = len(ids) // window
    if limit is not None:
        n = min(n, limit)
    return torch.tensor(ids[: n * window], dtype=torch.long).view(n, window)


def score(model, ids, mode: str = "prefill", rows_per_forward: int = 4) -> Scores:
    """Run the windows `ids` [N, W] through a DecoderModel, teacher-forced."""
    import torch

    from inference.engine.model import CacheGroup

    N, W = ids.shape
    argmax = torch.empty(N, W - 1, dtype=torch.long)
    nll = torch.empty(N, W - 1)
    t0 = time.perf_counter()
    with torch.inference_mode():
        if mode == "prefill":
            for start in range(0, N, rows_per_forward):
                chunk = ids[start : start + rows_per_forward]
                n = chunk.shape[0]
                cache = model.new_kv(n, W)
                positions = torch.arange(W).expand(n, W)
                logits = model.forward(chunk, positions, [CacheGroup(cache, 0, W)],
                                       torch.arange(W - 1).expand(n, W - 1))  # [n, W-1, V]
                _fill(argmax, nll, start, logits, chunk[:, 1:])
        elif mode in ("decode", "few"):
            group = N if mode == "decode" else max(1, model.block_rows)
            for start in range(0, N, group):
                rows = ids[start : start + group]
                n = rows.shape[0]
                if mode == "decode" and n <= model.block_rows:  # copies of a row, so that the step
                    rows = torch.cat([rows, rows[:1].expand(model.block_rows + 1 - n, W)])  # is many-row
                rows_run = rows.shape[0]
                cache = model.new_kv(rows_run, W)
                for t in range(W - 1):
                    logits = model.forward(rows[:, t : t + 1], torch.full((rows_run, 1), t), [CacheGroup(cache, 0, t + 1)],
                                           torch.zeros(rows_run, dtype=torch.long))[:n]  # [n, V]
                    a, b = _top1_and_nll(logits, rows[:n, t + 1])
                    argmax[start : start + n, t], nll[start : start + n, t] = a, b
        else:
            raise ValueError(f"mode must be one of {MODES}")
    return Scores(argmax, nll, time.perf_counter() - t0)


def _top1_and_nll(logits, target):
    import torch

    lf = logits.float()
    return lf.argmax(-1), -torch.log_softmax(lf, dim=-1).gather(-1, target[..., None])[..., 0]


def _fill(argmax, nll, start, logits, target) -> None:
    a, b = _top1_and_nll(logits, target)
    argmax[start : start + a.shape[0]] = a
    nll[start : start + a.shape[0]] = b


def compare(candidate: Scores, reference: Scores) -> dict:
    agreement = float((candidate.argmax == reference.argmax).float().mean())
    ppl, ppl_ref = math.exp(float(candidate.nll.mean())), math.exp(float(reference.nll.mean()))
    ratio = ppl / ppl_ref
    return {"positions": int(candidate.argmax.numel()), "agreement": agreement, "ppl": ppl,
            "ppl_reference": ppl_ref, "ppl_ratio": ratio,
            "passes": agreement >= AGREEMENT_MIN and abs(ratio - 1) <= PPL_RATIO_MAX - 1}


def load(model_dir: str, precision: str, max_context: int = 512):
    from inference.engine.config import EngineConfig
    from inference.engine.loader import load_model

    return load_model(EngineConfig(model=model_dir, device="cpu", dtype=precision, max_context=max_context))


def evaluate(model_dir: str, reference: str, candidates: list[str], modes: tuple[str, ...] | list[str] = MODES,
             limit: int | None = None, say=print) -> list[dict]:
    """Each candidate against the reference, in each mode; one dict per (candidate, mode)."""
    ref = load(model_dir, reference)
    ids = windows(ref.tokenizer, limit=limit)
    say(f"quality: {ids.shape[0]} windows x {ids.shape[1]} tokens from {TEXT_PATH.name}; reference {reference}")
    ref_scores = {m: score(ref.model, ids, m) for m in {REFERENCE_MODE[m] for m in modes}}
    del ref
    gc.collect()
    rows = []
    for c in candidates:
        loaded = load(model_dir, c)
        # The reference against itself: only where the mode runs another kernel than the reference's.
        for m in [m for m in modes if c != reference or REFERENCE_MODE[m] != m]:
            s = score(loaded.model, ids, m)
            ref_s = ref_scores[REFERENCE_MODE[m]]
            row = {"candidate": c, "reference": reference, "mode": m, **compare(s, ref_s), "seconds": s.seconds,
                   "reference_seconds": ref_s.seconds, "block_rows": loaded.model.block_rows}
            say(f"quality: {c} vs {reference}, {m}: agreement {row['agreement']:.2%}, perplexity "
                f"{row['ppl']:.3f} vs {row['ppl_reference']:.3f} ({row['ppl_ratio'] - 1:+.2%}) -> "
                f"{'PASS' if row['passes'] else 'FAIL'}")
            rows.append(row)
        del loaded
        gc.collect()
    return rows


def render(rows: list[dict]) -> str:
    lines = ["| candidate | reference | mode | positions | top-1 agreement | perplexity | reference ppl | "
             "ppl change | bar |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['candidate']} | {r['reference']} | {r['mode']} | {r['positions']} | "
                     f"{r['agreement']:.2%} | {r['ppl']:.3f} | {r['ppl_reference']:.3f} | "
                     f"{r['ppl_ratio'] - 1:+.2%} | {'PASS' if r['passes'] else 'FAIL'} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    from ..machine import describe, load_average, machine_info, measured_on
    from ..paths import MODEL_DIR
    from ..report import say, write_json

    p = argparse.ArgumentParser(prog="python -m benchmarks.engine.quality", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(MODEL_DIR))
    p.add_argument("--reference", default="bfloat16")
    p.add_argument("--candidates", default="int8,float32,bfloat16")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--limit", type=int, default=None, help="at most this many windows")
    p.add_argument("--out", default="var/bench/engine-quality.json")
    p.add_argument("--record", action="store_true",
                   help="write each candidate's verdict (all modes) into the model directory, where "
                        "dtype=auto reads it (inference/engine/precision.py)")
    args = p.parse_args(argv)
    info = machine_info()
    say(f"machine: {describe(info)}; load average {load_average()}")
    rows = evaluate(args.model, args.reference, [c for c in args.candidates.split(",") if c],
                    [m for m in args.modes.split(",") if m], args.limit, say=say)
    print(measured_on(info) + f"; load average {load_average()}")
    print(f"bar: top-1 agreement >= {AGREEMENT_MIN:.0%}, perplexity within {PPL_RATIO_MAX - 1:.0%} of the reference")
    print(render(rows))
    say(f"wrote {write_json(args.out, {'benchmark': 'engine-quality', 'machine': info, 'rows': rows})}")
    if args.record:
        from inference.engine.precision import record_verdict

        for c in {r["candidate"] for r in rows}:
            mine = [r for r in rows if r["candidate"] == c]
            verdict = {"passes": all(r["passes"] for r in mine), "reference": args.reference,
                       "modes": {r["mode"]: {k: r[k] for k in ("agreement", "ppl", "ppl_reference", "positions")}
                                 for r in mine},
                       "machine": describe(info), "git": (info.get("git") or {}).get("commit")}
            say(f"recorded {c}: {'PASS' if verdict['passes'] else 'FAIL'} in {record_verdict(args.model, c, verdict)}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
