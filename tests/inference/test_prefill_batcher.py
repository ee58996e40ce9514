"""The prefill batcher shares batches fairly: priority first, then tenants in turn."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from inference.engine.loader import load_model
from inference.engine.prefill import PrefillRequest
from inference.engine.tiny import build_tiny_model
from inference.prefill_batcher import PrefillBatcher, PrefillCancelled, _Waiting, pick_batch

from .engine.conftest import GREEDY, PROMPTS, tiny_config


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
def batcher(tmp_path_factory):
    model_dir = build_tiny_model(tmp_path_factory.mktemp("batcher") / "tiny", seed=0)
    config = tiny_config(model_dir, prefill_max_batch=4)
    b = PrefillBatcher(load_model(config), config)
    yield b
    b.shutdown()


def test_the_batcher_serves_a_quiet_tenant_in_the_first_batch_after_a_flood(batcher):
    calls: list[list[str]] = []
    engine_prefill = batcher.engine.prefill

    def recording(requests):  # the real engine runs; the test only notes who was batched
        calls.append([r.request_id for r in requests])
        return engine_prefill(requests)

    batcher.engine.prefill = recording
    try:
        # Queue everything before the batcher can take any of it (the lock is re-entrant).
        with batcher._cv:
            futures = {f"a{i}": batcher.submit(PrefillRequest(f"a{i}", PROMPTS[i], GREEDY), group="a")
                       for i in range(6)}
            futures["b0"] = batcher.submit(PrefillRequest("b0", PROMPTS[7], GREEDY), group="b")
            batcher.cancel("a4")
        results = {rid: f for rid, f in futures.items() if rid != "a4"}
        for rid, fut in results.items():
            assert fut.result(timeout=60).request_id == rid
        with pytest.raises(PrefillCancelled):
            futures["a4"].result(timeout=5)
    finally:
        batcher.engine.prefill = engine_prefill
    assert calls[0] == ["a0", "b0", "a1", "a2"]
    assert sorted(sum(calls, [])) == ["a0", "a1", "a2", "a3", "a5", "b0"]
