"""The decode engine's continuous batching: who gets a slot, when a sequence ends, and
what cancel, callbacks and shutdown do to the batch."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from inference.engine.decode import pick_admissions
from inference.engine.sampling import SamplingParams
from inference.engine.sequence import Sequence, StreamHandle

from .conftest import PROMPTS, TINY_CONTEXT, Gate, Recorder, decode_request, prefill_one, prompt

ENDLESS = SamplingParams(temperature=0, max_tokens=200, ignore_eos=True)


def submit(prefill_engine, decode, rid, token_ids, sampling=None, **kw):
    sampling = sampling or SamplingParams(temperature=0, max_tokens=12)
    res = prefill_one(prefill_engine, rid, token_ids, sampling)
    return decode.submit(decode_request(res, token_ids, sampling, **kw))


def test_cancel_frees_the_slot_for_a_waiting_request(prefill_engine, make_decode, tiny_reference):
    decode = make_decode(max_batch=1)
    rec, gate = Recorder(), Gate(at_index=2)

    def on_token(*args):
        rec.on_token(*args)
        gate(*args)

    hog = submit(prefill_engine, decode, "hog", PROMPTS[5], ENDLESS, on_token=on_token, on_finish=rec.on_finish)
    assert gate.reached.wait(30)  # the hog holds the only slot, and the engine thread
    waiter = submit(prefill_engine, decode, "waiter", PROMPTS[7], on_token=rec.on_token, on_finish=rec.on_finish)
    assert hog.cancel()
    gate.opened.set()
    _, hog_finish = hog.result(timeout=30)
    tokens, finish = waiter.result(timeout=30)
    assert hog_finish.finish_reason == "cancelled"
    assert finish.finish_reason in ("length", "stop")
    assert tokens == tiny_reference(PROMPTS[7], 12)[1:]
    assert rec.first("finish", "hog") < rec.first("token", "waiter")
    assert decode.stats().active == 0


def test_cancel_removes_a_waiting_request_from_the_queue(prefill_engine, make_decode):
    decode = make_decode(max_batch=1)
    gate = Gate(at_index=1)
    hog = submit(prefill_engine, decode, "hog", PROMPTS[5], ENDLESS, on_token=gate)
    assert gate.reached.wait(30)
    waiter = submit(prefill_engine, decode, "waiter", PROMPTS[7])
    assert waiter.cancel()
    gate.opened.set()
    tokens, finish = waiter.result(timeout=30)
    assert (tokens, finish.finish_reason, finish.stats.output_tokens) == ([], "cancelled", 1)
    hog.cancel()
    assert hog.result(timeout=30)[1].finish_reason == "cancelled"
    assert not decode.cancel("never-submitted")


def test_a_handle_says_when_its_sequence_left_the_queue(prefill_engine, make_decode):
    # Waiting for a slot is not a stall: the decode tier waits on `started` without a
    # timeout, and on tokens with one only after it.
    decode = make_decode(max_batch=1)
    gate = Gate(at_index=1)
    hog = submit(prefill_engine, decode, "hog", PROMPTS[5], ENDLESS, on_token=gate)
    assert gate.reached.wait(30) and hog.started.is_set()
    waiter = submit(prefill_engine, decode, "waiter", PROMPTS[7])
    dropped = submit(prefill_engine, decode, "dropped", PROMPTS[6])
    assert not waiter.started.is_set()
    assert dropped.cancel()
    hog.cancel()
    gate.opened.set()
    assert dropped.started.wait(30)  # ended while it waited: nobody waits for it for ever
    assert dropped.result(timeout=30)[1].finish_reason == "cancelled"
    assert waiter.started.wait(30)
    assert waiter.result(timeout=30)[1].finish_reason in ("length", "stop")


def test_a_sequence_that_cannot_join_ends_alone_and_the_batch_runs_on(prefill_engine, make_decode):
    import dataclasses

    decode = make_decode(max_batch=4)
    gate = Gate(at_index=1)
    hog = submit(prefill_engine, decode, "hog", PROMPTS[5], ENDLESS, on_token=gate)
    assert gate.reached.wait(30)
    res = prefill_one(prefill_engine, "bad", PROMPTS[7], SamplingParams(temperature=0, max_tokens=8))
    # A KV whose head size the model does not have: copying it into the batch cache fails.
    bad_kv = dataclasses.replace(res.kv, k=res.kv.k[..., :-1], v=res.kv.v[..., :-1])
    bad = decode.submit(decode_request(dataclasses.replace(res, kv=bad_kv), PROMPTS[7]))
    gate.opened.set()
    assert bad.result(timeout=30)[1].finish_reason == "error"
    hog.cancel()
    assert hog.result(timeout=30)[1].finish_reason == "cancelled"  # not failed with it


def test_higher_priority_is_admitted_first(prefill_engine, make_decode):
    decode = make_decode(max_batch=1)
    rec, gate = Recorder(), Gate(at_index=1)
    hog = submit(prefill_engine, decode, "hog", PROMPTS[5], ENDLESS, on_token=gate)
    assert gate.reached.wait(30)
    low = submit(prefill_engine, decode, "low", PROMPTS[2], on_token=rec.on_token, on_finish=rec.on_finish)
    high = submit(prefill_engine, decode, "high", PROMPTS[3], priority=5, on_token=rec.on_token,
                  on_finish=rec.on_finish)
    hog.cancel()
    gate.opened.set()
    low.result(timeout=30)
    high.result(timeout=30)
    assert rec.first("finish", "high") < rec.first("token", "low")


def test_a_group_at_its_cap_lets_other_groups_in_first(prefill_engine, make_decode):
    decode = make_decode(max_batch=2)
    rec, gate = Recorder(), Gate(at_index=1)
    hog = submit(prefill_engine, decode, "hog", PROMPTS[5], ENDLESS, on_token=gate)
    assert gate.reached.wait(30)
    kw = dict(on_token=rec.on_token, on_finish=rec.on_finish)
    a = submit(prefill_engine, decode, "a", PROMPTS[4], group="t1", group_max_slots=1, **kw)
    b = submit(prefill_engine, decode, "b", PROMPTS[6], group="t1", group_max_slots=1, **kw)
    c = submit(prefill_engine, decode, "c", PROMPTS[8], group="t2", group_max_slots=1, **kw)
    hog.cancel()
    gate.opened.set()
    for h in (a, b, c):
        h.result(timeout=30)
    # a and c shared the two slots; b (same tenant as a) waited for a to finish.
    assert rec.first("token", "c") < rec.first("finish", "a") < rec.first("token", "b")


def test_a_sequence_waits_until_its_kv_reservation_fits_the_budget(prefill_engine, make_decode):
    decode = make_decode(max_batch=4, kv_token_budget=TINY_CONTEXT)
    rec = Recorder()
    big = SamplingParams(temperature=0, max_tokens=100, ignore_eos=True)  # reserves 177 of 256
    kw = dict(on_token=rec.on_token, on_finish=rec.on_finish)
    first = submit(prefill_engine, decode, "first", PROMPTS[9], big, **kw)
    second = submit(prefill_engine, decode, "second", PROMPTS[9], big, **kw)
    first.result(timeout=30)
    second.result(timeout=30)
    assert rec.first("finish", "first") < rec.first("token", "second")


@pytest.mark.parametrize(
    "sampling, checker, expected_reason, expected_tokens",
    [
        (SamplingParams(temperature=0, max_tokens=5, ignore_eos=True), None, "length", 5),
        (SamplingParams(temperature=0, max_tokens=50, ignore_eos=True), lambda ids: len(ids) >= 3, "stop", 3),
    ],
)
def test_sequences_end_at_max_tokens_and_when_the_stop_checker_says_so(
    prefill_engine, make_decode, sampling, checker, expected_reason, expected_tokens
):
    decode = make_decode()
    tokens, finish = submit(prefill_engine, decode, "r", PROMPTS[6], sampling, stop_checker=checker).result(30)
    assert finish.finish_reason == expected_reason
    assert finish.stats.output_tokens == expected_tokens == len(tokens) + 1


def test_a_sequence_ends_when_the_context_is_full(prefill_engine, make_decode):
    decode = make_decode()
    long_prompt = prompt(3, TINY_CONTEXT - 6)
    tokens, finish = submit(prefill_engine, decode, "r", long_prompt, ENDLESS).result(30)
    assert finish.finish_reason == "context"
    assert finish.stats.prompt_tokens + finish.stats.output_tokens == TINY_CONTEXT


def test_stop_token_ends_the_sequence_without_being_emitted(prefill_engine, make_decode, tiny_reference):
    decode = make_decode()
    expected = tiny_reference(PROMPTS[8], 12)
    stop_at = expected[4]
    assert stop_at not in expected[:4]
    sampling = SamplingParams(temperature=0, max_tokens=12, stop_token_ids=(stop_at,))
    tokens, finish = submit(prefill_engine, decode, "r", PROMPTS[8], sampling).result(30)
    assert finish.finish_reason == "stop"
    assert tokens == expected[1:4]


def test_token_indices_continue_from_the_prefill_token(prefill_engine, make_decode):
    decode = make_decode()
    rec = Recorder()
    submit(prefill_engine, decode, "r", PROMPTS[7], ENDLESS, on_token=rec.on_token,
           stop_checker=lambda ids: len(ids) == 6).result(30)
    assert [e[2] for e in rec.events] == [1, 2, 3, 4, 5]


def test_a_failing_callback_ends_only_its_own_sequence(prefill_engine, make_decode, tiny_reference):
    decode = make_decode()

    def explode(rid, index, token, ts):
        raise RuntimeError("boom")

    bad = submit(prefill_engine, decode, "bad", PROMPTS[4], ENDLESS, on_token=explode)
    good = submit(prefill_engine, decode, "good", PROMPTS[5])
    _, bad_finish = bad.result(30)
    tokens, _ = good.result(30)
    assert bad_finish.finish_reason == "error" and "boom" in bad_finish.stats.error
    assert tokens == tiny_reference(PROMPTS[5], 12)[1:]


def test_stats_and_shutdown(prefill_engine, make_decode):
    decode = make_decode(max_batch=1)
    gate = Gate(at_index=3)
    finished = threading.Event()
    reasons = []

    def on_finish(rid, reason, stats):
        reasons.append((rid, reason))
        if len(reasons) == 2:
            finished.set()

    submit(prefill_engine, decode, "run", PROMPTS[5], ENDLESS, on_token=gate, on_finish=on_finish)
    assert gate.reached.wait(30)
    submit(prefill_engine, decode, "wait", PROMPTS[6], on_finish=on_finish)
    stats = decode.stats()  # published after the last completed step
    assert stats.active == 1 and stats.kv_tokens == len(PROMPTS[5]) + 2 and stats.steps == 2
    assert stats.kv_tokens_reserved == len(PROMPTS[5]) + ENDLESS.max_tokens
    gate.opened.set()
    decode.shutdown()
    assert finished.wait(30)
    assert sorted(reasons) == [("run", "cancelled"), ("wait", "cancelled")]
    with pytest.raises(RuntimeError):
        submit(prefill_engine, decode, "late", PROMPTS[2])


def seq(rid, priority=0, group=None, cap=None, prompt_len=10, max_tokens=10):
    s = Sequence(rid, prompt_len, SamplingParams(temperature=0, max_tokens=max_tokens), [0],
                 StreamHandle(rid, lambda _: False), priority=priority, group=group, group_max_slots=cap)
    s.order = int(rid[1:])
    return s


def test_admission_order_is_priority_then_arrival_and_stops_at_the_first_that_does_not_fit():
    waiting = [seq("s0"), seq("s1", priority=2), seq("s2", max_tokens=500), seq("s3")]
    picked = pick_admissions(waiting, free_slots=4, free_tokens=100, group_active=Counter(), max_context=1000)
    # s1 (priority) then s0; s2 does not fit, and s3 may not overtake it.
    assert [s.request_id for s in picked] == ["s1", "s0"]


def test_admission_skips_groups_at_their_cap_only():
    waiting = [seq("s0", group="a", cap=1), seq("s1", group="a", cap=1), seq("s2", group="b", cap=1)]
    picked = pick_admissions(waiting, free_slots=3, free_tokens=10_000, group_active=Counter(),
                             max_context=1000)
    assert [s.request_id for s in picked] == ["s0", "s2"]
    picked = pick_admissions(waiting, free_slots=3, free_tokens=10_000, group_active=Counter({"b": 1}),
                             max_context=1000)
    assert [s.request_id for s in picked] == ["s0"]
