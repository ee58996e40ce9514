"""`python -m benchmarks repetition [--max-tokens 256] [--configs ...] [--quick] [--out PATH]`:
how often the assistant loops, and what repetition control does to it.

The shipped question set (benchmarks/data/support_questions.txt, 60 support questions)
is asked as the widget asks it: the tenant's default system prompt, the question, the
default model (var/models/smollm2-135m-instruct, bf16 on a CPU unless --dtype), greedy,
through the product's colocated engine, all questions in one batch. For each sampling
configuration (no penalty, the widget's defaults in tandem.chat.sampling, and the other
candidates) it reports:
- looping share: the replies in which some 4-word sequence occurs 3 or more times
  (words: lowercased runs of letters, digits and apostrophes);
- mean reply length in tokens and in words, and how many replies ran to max_tokens.
The widget's defaults were chosen from this table (docs/api.md, "Sampling controls").
--quick runs 6 questions for 24 tokens on the tiny random model: its figures mean nothing.
Prints a Markdown table; writes JSON (var/bench/repetition.json)."""

from __future__ import annotations

import argparse
import os
import re
import time
from collections import Counter
from pathlib import Path

from .machine import machine_info
from .quick import add_quick_options, parse_quick
from .report import say, table, write_json

DEFAULT_OUT = "var/bench/repetition.json"
QUESTIONS = Path(__file__).parent / "data" / "support_questions.txt"
SYSTEM_PROMPT = "You are a helpful, concise customer-support assistant."  # tenants.Tenant's default
QUICK = {"questions": 6, "max_tokens": 24, "tiny": True, "configs": "off,freq0.5"}
# name -> (frequency_penalty, presence_penalty, repetition_penalty)
CONFIGS = {
    "off": (0.0, 0.0, 1.0),
    "freq0.3": (0.3, 0.0, 1.0),
    "freq0.5": (0.5, 0.0, 1.0),
    "freq0.8": (0.8, 0.0, 1.0),
    "pres0.5": (0.0, 0.5, 1.0),
    "rep1.05": (0.0, 0.0, 1.05),
    "rep1.1": (0.0, 0.0, 1.1),
    "rep1.2": (0.0, 0.0, 1.2),
    "freq0.3+rep1.05": (0.3, 0.0, 1.05),
    "freq0.3+rep1.1": (0.3, 0.0, 1.1),
}
NGRAM, REPEATS = 4, 3
_WORD = re.compile(r"[a-z0-9']+")


def loops(text: str, n: int = NGRAM, repeats: int = REPEATS) -> bool:
    """Whether some n-word sequence occurs `repeats` or more times in `text`."""
    words = _WORD.findall(text.lower())
    grams = Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))
    return any(c >= repeats for c in grams.values())


def words(text: str) -> int:
    return len(_WORD.findall(text.lower()))


def load_engine(args):
    from inference.engine.colocated import ColocatedEngine
    from inference.engine.config import EngineConfig
    from inference.engine.loader import load_model
    from inference.engine.prepare import DEFAULT_DIR, prepare_model

    if args.tiny:
        from inference.engine.tiny import build_tiny_model

        from .paths import BENCH_DIR

        model_dir = build_tiny_model(BENCH_DIR / "tiny-model", seed=0)
    else:
        model_dir = prepare_model(DEFAULT_DIR)
    config = EngineConfig(model=model_dir, dtype=args.dtype, max_batch=max(8, args.questions),
                          max_context=2048, prefix_cache_tokens=0)
    loaded = load_model(config)
    return loaded, ColocatedEngine(loaded, config, chunked_prefill=False)


def run_config(engine, tokenizer, prompts: list[list[int]], max_tokens: int, penalties) -> list[dict]:
    from inference.engine.sampling import SamplingParams

    freq, pres, rep = penalties
    params = SamplingParams(temperature=0, max_tokens=max_tokens, frequency_penalty=freq, presence_penalty=pres,
                            repetition_penalty=rep)
    stamp = time.monotonic_ns()
    handles = [engine.submit(f"q{i}-{stamp}", p, params) for i, p in enumerate(prompts)]
    replies = []
    for h in handles:
        tokens, finish = h.result(timeout=1800)
        text = tokenizer.decode(tokens, skip_special_tokens=True)
        replies.append({"text": text, "tokens": len(tokens), "finish": finish.finish_reason})
    return replies


def summarize_replies(replies: list[dict]) -> dict:
    n = len(replies)
    return {"replies": n, "looping": sum(loops(r["text"]) for r in replies),
            "looping_share": sum(loops(r["text"]) for r in replies) / n,
            "mean_tokens": sum(r["tokens"] for r in replies) / n,
            "mean_words": sum(words(r["text"]) for r in replies) / n,
            "hit_max_tokens": sum(r["finish"] == "length" for r in replies)}


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks repetition")
    ap.add_argument("--questions", type=int, default=60, help="the first N questions of the set (default all 60)")
    ap.add_argument("--max-tokens", type=int, default=256, help="reply budget (default 256)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"which of {','.join(CONFIGS)}")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--tiny", action="store_true", help="the tiny random model (the default with --quick)")
    add_quick_options(ap, default_out=DEFAULT_OUT)
    args = parse_quick(ap, argv, name="repetition", default_out=DEFAULT_OUT, quick_defaults=QUICK)
    names = [c for c in args.configs.split(",") if c]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown:
        ap.error(f"unknown config(s) {unknown}; known: {list(CONFIGS)}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tandem.settings")
    import django

    django.setup()  # tandem.chat.sampling holds the widget's defaults, beside their Django users
    from inference.text.prompting import build_prompt
    from tandem.chat.sampling import WIDGET_REPETITION

    questions = QUESTIONS.read_text().splitlines()[: args.questions]
    info = machine_info()
    loaded, engine = load_engine(args)
    configs = {n: CONFIGS[n] for n in names}
    if WIDGET_REPETITION not in configs.values():
        configs["widget default"] = WIDGET_REPETITION
    try:
        prompts = [build_prompt(loaded.tokenizer, system_prompt=SYSTEM_PROMPT, history=[{"role": "user", "content": q}],
                                max_prompt_tokens=1536).token_ids for q in questions]
        results = {}
        for name, penalties in configs.items():
            t0 = time.perf_counter()
            replies = run_config(engine, loaded.tokenizer, prompts, args.max_tokens, penalties)
            results[name] = {"penalties": dict(zip(("frequency", "presence", "repetition"), penalties, strict=True)),
                             **summarize_replies(replies), "seconds": time.perf_counter() - t0,
                             "samples": [r["text"] for r in replies[:3]]}
            say(f"{name}: {results[name]['looping']}/{len(replies)} loop, "
                f"{results[name]['mean_tokens']:.0f} tokens mean")
    finally:
        engine.shutdown()
    off = results.get("off", {}).get("looping_share")
    rows = [[name + (" (widget default)" if tuple(r["penalties"].values()) == WIDGET_REPETITION else ""),
             f"{r['penalties']['frequency']:g} / {r['penalties']['presence']:g} / "
                   f"{r['penalties']['repetition']:g}",
             f"{r['looping']}/{r['replies']} ({100 * r['looping_share']:.0f}%)",
             f"{r['looping_share'] / off:.2f}" if off else "-", f"{r['mean_tokens']:.0f}", f"{r['mean_words']:.0f}",
             r["hit_max_tokens"]] for name, r in results.items()]
    print(f"Repetition ({'QUICK: tiny model, figures mean nothing' if args.quick else 'default model'}); "
          f"{len(questions)} questions, greedy, max_tokens {args.max_tokens}, {args.dtype}; {info.get('cpu_model')}")
    print(table(["config", "freq / pres / rep penalty", "looping replies", "vs off", "mean tokens", "mean words",
                 "ran to max_tokens"], rows))
    write_json(args.out, {"benchmark": "repetition", "quick": args.quick, "machine": info, "args": vars(args),
                          "questions": len(questions), "results": results})
