"""The prefill batcher shares batches fairly: priority first, then tenants in turn."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from contextlib import contextmanager

import pytest
import torch

from inference.engine.loader import load_model
from inference.engine.prefill import PrefillRequest
from inference.engine.tiny import build_tiny_model
from inference.worker.prefill_batcher import PrefillBatcher, PrefillCancelled, _Waiting, pick_batch
from tests.inference.engine.conftest import GREEDY, PROMPTS, tiny_config


def waiting(spec: str) -> list[_Waiting]:
    """'a a b' -> three waiting requests in that arrival order, named a0, a1, b2."""
    out = []
    for i, word in enumerate(spec.split()):
        group, _, prio = word.partition("!")
        out.append(_Waiting(i, f"{group}{i}", Future(), group, int(prio or 0)))
    return out


def names(ws: list[_Waiting]) -> list[str]:
    return [w.request for w in ws]


def test_a_flooding_tenant_fills_only_its_turns():
    assert names(pick_batch(waiting("a a a a a a b c"), 4)) == ["a0", "b6", "c7", "a1"]


def test_groups_take_turns_in_order_of_their_oldest_request():
    assert names(pick_batch(waiting("b a a b"), 3)) == ["b0", "a1", "b3"]


def test_priority_comes_before_turns():
    assert names(pick_batch(waiting("a a b!5 a!5 c"), 3)) == ["b2", "a3", "a0"]


def test_everything_fits_when_there_is_room():
    assert sorted(names(pick_batch(waiting("a b a"), 8))) == ["a0", "a2", "b1"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    model_dir = build_tiny_model(tmp_path_factory.mktemp("batcher") / "tiny", seed=0)
    config = tiny_config(model_dir, prefill_max_batch=4)
    return load_model(config), config


@pytest.fixture
def batcher(tiny_model):
    """A fresh batcher (no record of earlier tests' groups) over the shared tiny model."""
    b = PrefillBatcher(*tiny_model)
    yield b
    b.shutdown()


@contextmanager
def recording_batches(batcher: PrefillBatcher, on_step=None):
    """Note which request ids each job of the batcher holds, layer by layer; the real
    engine still computes everything (the steps are passed through)."""
    calls: list[list[str]] = []
    engine_steps = batcher.engine.prefill_steps

    def recording(requests):
        ids = [r.request_id for r in requests]
        calls.append(ids)
        steps = engine_steps(requests)
        result = yield from _passing(steps, lambda: on_step(ids) if on_step else None)
        return result

    batcher.engine.prefill_steps = recording
    try:
        yield calls
    finally:
        batcher.engine.prefill_steps = engine_steps


def _passing(steps, after_each):
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        yield
        after_each()


def request(rid: str, i: int) -> PrefillRequest:
    return PrefillRequest(rid, PROMPTS[i], GREEDY)


def test_the_batcher_serves_a_quiet_tenant_in_the_first_batch_after_a_flood(batcher):
    with recording_batches(batcher) as calls:
        # Queue everything before the batcher can take any of it (the lock is re-entrant).
        with batcher._cv:
            futures = {f"a{i}": batcher.submit(request(f"a{i}", i), group="a") for i in range(6)}
            futures["b0"] = batcher.submit(request("b0", 7), group="b")
            batcher.cancel("a4")
        for rid, fut in futures.items():
            if rid == "a4":
                with pytest.raises(PrefillCancelled):
                    fut.result(timeout=5)
            else:
                assert fut.result(timeout=60).request_id == rid
    assert calls[0] == ["a0", "b0", "a1", "a2"]
    assert sorted(sum(calls, [])) == ["a0", "a1", "a2", "a3", "a5", "b0"]


def test_another_tenants_prompt_overtakes_a_running_forward_once_and_nothing_changes(batcher):
    prompts = {"a": 9, "b": 3, "c": 5, "d": 6}
    alone = {rid: batcher.engine.prefill([request(rid, i)])[0] for rid, i in prompts.items()}
    a_running, go_on = threading.Event(), threading.Event()
    futures: dict[str, Future] = {}
    finished: list[str] = []

    def submit(rid: str) -> None:
        futures[rid] = batcher.submit(request(rid, prompts[rid]), group=rid)
        futures[rid].add_done_callback(lambda f: finished.append(rid))

    def on_step(ids):
        if ids == ["a"] and not a_running.is_set():
            a_running.set()  # a's forward has done a layer: b and c arrive now
            assert go_on.wait(10)
        if ids == ["b", "c"] and "d" not in futures:
            submit("d")  # arrives during the overtaking forward: a was overtaken already

    with recording_batches(batcher, on_step) as calls:
        submit("a")
        assert a_running.wait(30)
        submit("b")
        submit("c")
        go_on.set()
        results = {rid: futures[rid].result(timeout=60) for rid in prompts}
    assert calls == [["a"], ["b", "c"], ["d"]]
    assert finished == ["b", "c", "a", "d"]  # b and c overtook a; d did not
    for rid, res in results.items():  # interleaved forwards share nothing (batching itself
        assert res.first_token == alone[rid].first_token  # moves the last float bits)
        torch.testing.assert_close(res.kv.k, alone[rid].kv.k, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(res.kv.v, alone[rid].kv.v, rtol=1e-4, atol=1e-5)


def test_a_busy_tenant_never_pauses_a_quiet_tenants_forward(batcher):
    for i in range(4):  # "busy" has had prefill work lately
        batcher.submit(request(f"busy{i}", i + 4), group="busy").result(timeout=60)
    quiet_running, go_on = threading.Event(), threading.Event()
    finished: list[str] = []

    def on_step(ids):
        if ids == ["quiet"] and not quiet_running.is_set():
            quiet_running.set()
            assert go_on.wait(10)

    with recording_batches(batcher, on_step) as calls:
        fq = batcher.submit(request("quiet", 9), group="quiet")
        fq.add_done_callback(lambda f: finished.append("quiet"))
        assert quiet_running.wait(30)
        fb = batcher.submit(request("busy9", 3), group="busy")
        fb.add_done_callback(lambda f: finished.append("busy"))
        go_on.set()
        fq.result(timeout=60), fb.result(timeout=60)
    assert calls == [["quiet"], ["busy9"]]
    assert finished == ["quiet", "busy"]


def test_the_least_served_tenant_goes_first_in_a_batch():
    ws = waiting("a a b")
    assert names(pick_batch(ws, 1, usage={"a": 10.0, "b": 500.0})) == ["a0"]
    assert names(pick_batch(ws, 1, usage={"a": 500.0, "b": 10.0})) == ["b2"]
