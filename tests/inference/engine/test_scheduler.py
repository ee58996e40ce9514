"""The scheduler's plans and rules, without a model: who is admitted, who joins, how many
prompt tokens each prompt computes, and which prompts share a forward."""

from __future__ import annotations

from dataclasses import dataclass

from inference.engine.kv import KVCache
from inference.engine.sampling import SamplingParams
from inference.engine.scheduler import (
    Scheduler,
    SchedulerConfig,
    batch_by_length,
    chunk_prompts,
    overtakers,
    pick_batch,
)
from inference.engine.sequence import Sequence, StreamHandle

EOS = 2


def config(**kw) -> SchedulerConfig:
    values = dict(max_batch=4, kv_token_budget=10_000, max_context=1000, prefill_max_batch=4,
                  prefill_max_tokens=1000, prefill_chunk=8, chunked_prefill=False)
    values.update(kw)
    return SchedulerConfig(**values)


_order = iter(range(10_000))


def prompt_seq(rid: str, n: int, **kw) -> Sequence:
    """A prompt the engine prefills itself (colocated)."""
    s = Sequence(rid, n, SamplingParams(temperature=0, max_tokens=10), [], StreamHandle(rid, lambda _: False),
                 prompt=list(range(3, 3 + n)), **kw)
    s.order = next(_order)
    return s


def handed_seq(rid: str, n: int, first: int = 7, max_tokens: int = 10) -> Sequence:
    """A sequence whose prompt KV and first token came from a prefill worker."""
    s = Sequence(rid, n, SamplingParams(temperature=0, max_tokens=max_tokens), [first],
                 StreamHandle(rid, lambda _: False), kv=KVCache(None, None, "m"))  # type: ignore[arg-type]
    s.order = next(_order)
    return s


def ids(seqs) -> list[str]:
    return [s.request_id for s in seqs]


def test_a_handed_over_sequence_joins_and_decodes_in_the_same_step():
    sched = Scheduler(config(), eos_ids=frozenset({EOS}))
    running = [handed_seq("old", 5)]
    new = handed_seq("new", 9)
    sched.add([new])
    plan = sched.schedule(running)
    assert ids(plan.admitted) == ids(plan.joins) == ["new"]
    assert ids(plan.decode) == ["old", "new"] and not plan.prefill
    assert plan.num_scheduled_tokens == {"old": 1, "new": 1}
    assert new.reserved == 9 + 10  # its prompt + max_tokens


def test_a_sequence_whose_handed_over_token_ends_it_never_joins():
    sched = Scheduler(config(), eos_ids=frozenset({EOS}))
    stop, one = handed_seq("stop", 5, first=EOS), handed_seq("one", 5, max_tokens=1)
    sched.add([stop, one])
    plan = sched.schedule([])
    assert [(s.request_id, r) for s, r in plan.finished] == [("stop", "stop"), ("one", "length")]
    assert not plan.joins and not plan.decode


def test_whole_prompts_when_nobody_decodes_then_chunks_beside_the_decode_rows():
    sched = Scheduler(config(chunked_prefill=True, prefill_chunk=8))
    a, b = prompt_seq("a", 20), prompt_seq("b", 6)
    sched.add([a, b])
    plan = sched.schedule([])
    assert [(c.seq.request_id, c.start, c.num_tokens, c.completes) for c in plan.prefill] == [
        ("a", 0, 20, True), ("b", 0, 6, True)]
    sched2 = Scheduler(config(chunked_prefill=True, prefill_chunk=8))
    c, d = prompt_seq("c", 20), prompt_seq("d", 6)
    sched2.add([c, d])
    running = [handed_seq("r", 5)]
    plan = sched2.schedule(running)
    assert [(x.seq.request_id, x.start, x.num_tokens) for x in plan.prefill] == [("c", 0, 8)]
    assert plan.num_scheduled_tokens == {"c": 8, "r": 1}
    c.prefilled = 8  # what the runner records after the forward
    plan = sched2.schedule(running)
    assert [(x.seq.request_id, x.start, x.num_tokens) for x in plan.prefill] == [("c", 8, 8)]


def test_a_prefilled_prompt_joins_in_the_next_plan_and_holds_its_slot_meanwhile():
    sched = Scheduler(config(max_batch=2))
    a, b, late = prompt_seq("a", 4), prompt_seq("b", 4), prompt_seq("late", 4)
    sched.add([a, b, late])
    plan = sched.schedule([])
    assert ids(plan.admitted) == ["a", "b"]  # two slots: late waits
    a.prefilled = b.prefilled = 4
    sched.done_prefilling(a)
    sched.done_prefilling(b)
    plan = sched.schedule([])
    assert ids(plan.joins) == ["a", "b"] and ids(plan.decode) == ["a", "b"] and not plan.admitted
    assert ids(sched.waiting) == ["late"]


def test_a_prefix_hit_moves_the_first_chunk_past_the_cached_tokens():
    def lookup(seq):
        seq.prefilled = seq.cached_tokens = 16

    sched = Scheduler(config(), lookup=lookup)
    sched.add([prompt_seq("a", 20)])
    (chunk,) = sched.schedule([]).prefill
    assert (chunk.start, chunk.num_tokens, chunk.completes) == (16, 4, True)


def test_cancelled_sequences_leave_every_queue():
    sched = Scheduler(config(max_batch=1))
    a, b = prompt_seq("a", 4), prompt_seq("b", 4)
    sched.add([a, b])
    sched.schedule([])
    assert ids(sched.take({"a", "b"})) == ["b", "a"]  # waiting first, then prefilling
    assert not sched.has_work()


def test_chunks_fill_the_budget_in_order_and_a_first_prompt_over_it_runs_alone():
    assert chunk_prompts([20, 6], budget=8, max_batch=4, chunked=True) == [8]
    assert chunk_prompts([5, 6], budget=8, max_batch=4, chunked=True) == [5, 3]
    assert chunk_prompts([5, 6, 9], budget=100, max_batch=2, chunked=False) == [5, 6]
    assert chunk_prompts([500, 6], budget=100, max_batch=4, chunked=False) == [500]
    assert chunk_prompts([50, 60], budget=100, max_batch=4, chunked=False) == [50]


def test_prompts_share_forwards_by_length_within_the_bounds():
    lengths = [9, 1, 77, 5, 40, 2]
    batches = batch_by_length(lengths, lambda n: n, max_batch=2, max_padded_tokens=100)
    assert batches == [[1, 2], [5, 9], [40], [77]]  # 40 and 77 padded would be 154 tokens


@dataclass
class W:
    order: int
    group: str
    priority: int = 0


def test_fair_share_and_overtaking_read_any_queued_item():
    waiting = [W(0, "a"), W(1, "a"), W(2, "b"), W(3, "c", priority=1)]
    assert [w.order for w in pick_batch(waiting, 3, {"b": 5.0})] == [3, 0, 2]
    running = [W(9, "a")]
    usage = {"a": 100.0, "b": 10.0, "c": 500.0}
    assert [w.order for w in overtakers(waiting, running, usage)] == [2]  # b: less served; c: more
