"""The colocated engine (prefill and decode in one loop) produces exactly what Hugging
Face generate produces, with and without chunked prefill."""

from __future__ import annotations

import pytest

from inference.engine.colocated import ColocatedEngine
from inference.engine.sampling import SamplingParams

from .conftest import GREEDY, PROMPTS, Gate, Recorder, prompt, tiny_config


@pytest.mark.parametrize("chunked", [False, True], ids=["whole-prompts", "chunked"])
def test_colocated_greedy_output_equals_hf_generate(make_colocated, tiny_reference, chunked):
    # Fewer slots than prompts and chunks shorter than most prompts: prompts are
    # prefilled across several loop iterations while others decode, and join mid-flight.
    engine = make_colocated(chunked_prefill=chunked, max_batch=3, prefill_chunk=7, prefill_max_batch=2)
    rec = Recorder()
    handles = [engine.submit(f"r{i}", p, GREEDY, on_token=rec.on_token) for i, p in enumerate(PROMPTS)]
    for i, (p, h) in enumerate(zip(PROMPTS, handles, strict=True)):
        tokens, finish = h.result(timeout=60)
        assert tokens == tiny_reference(p), f"prompt {i} ({len(p)} tokens)"
        assert finish.stats.output_tokens == len(tokens)
    first_indices = [e[2] for e in rec.events if e[1] == "r9"]
    assert first_indices == list(range(len(tiny_reference(PROMPTS[9]))))  # 0, 1, 2, ...


def test_chunked_prefill_interleaves_with_running_streams(make_colocated, tiny_reference):
    engine = make_colocated(chunked_prefill=True, max_batch=4, prefill_chunk=8)
    rec = Recorder()
    runner = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
    gate = Gate(at_index=2)

    def on_token(*args):
        rec.on_token(*args)
        gate(*args)

    running = engine.submit("running", PROMPTS[3], runner, on_token=on_token)
    assert gate.reached.wait(30)
    long_prompt = prompt(5, 120)  # 15 chunks of 8
    newcomer = engine.submit("new", long_prompt, GREEDY, on_token=rec.on_token)
    gate.opened.set()
    tokens, _ = newcomer.result(timeout=60)
    running.result(timeout=60)
    assert tokens == tiny_reference(long_prompt)
    # The running stream kept producing tokens while the long prompt was prefilled.
    between = [e for e in rec.events[: rec.first("token", "new")] if e[1] == "running"]
    assert len(between) >= 3 + 10


def test_colocated_prefix_cache_hits_within_a_salt_and_keeps_the_output(make_colocated, tiny_reference):
    engine = make_colocated(prefix_cache_tokens=1024, prefix_block=16)
    system = prompt(42, 33)
    a, b = system + prompt(1, 5)[1:], system + prompt(2, 7)[1:]
    out_a, fin_a = engine.submit("a", a, GREEDY, cache_salt="t1").result(timeout=30)
    out_b, fin_b = engine.submit("b", b, GREEDY, cache_salt="t1").result(timeout=30)
    out_c, fin_c = engine.submit("c", b, GREEDY, cache_salt="t2").result(timeout=30)
    assert (fin_a.stats.cached_tokens, fin_b.stats.cached_tokens, fin_c.stats.cached_tokens) == (0, 32, 0)
    assert out_a == tiny_reference(a) and out_b == tiny_reference(b) == out_c


def test_cancelling_a_prompt_before_it_is_prefilled(make_colocated):
    engine = make_colocated(max_batch=1)
    gate = Gate(at_index=1)
    hog = engine.submit("hog", PROMPTS[4], SamplingParams(temperature=0, max_tokens=100, ignore_eos=True),
                        on_token=gate)
    assert gate.reached.wait(30)
    queued = engine.submit("queued", PROMPTS[5], GREEDY)
    assert queued.cancel()
    gate.opened.set()
    tokens, finish = queued.result(timeout=30)
    assert (tokens, finish.finish_reason) == ([], "cancelled")
    hog.cancel()
    assert hog.result(timeout=30)[1].finish_reason == "cancelled"


def test_colocated_engine_chunks_prompts_unless_configured_not_to(tiny, tiny_dir):
    """The worker's default is chunked prefill (TANDEM_CHUNKED_PREFILL); the config's
    setting reaches the scheduler, and an explicit argument overrides it."""
    engines = [ColocatedEngine(tiny, tiny_config(tiny_dir), start=False),
               ColocatedEngine(tiny, tiny_config(tiny_dir, chunked_prefill=False), start=False),
               ColocatedEngine(tiny, tiny_config(tiny_dir, chunked_prefill=False), chunked_prefill=True, start=False)]
    assert [e.scheduler.config.chunked_prefill for e in engines] == [True, False, True]
