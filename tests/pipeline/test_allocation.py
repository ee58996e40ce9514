"""Hardware allocation across the pipeline: a tenant's pools route its requests, a
change takes effect on its next request, and `max_decode_slots` caps a tenant's share
of a shared decode batch."""

from __future__ import annotations

import pytest
import redis as redis_lib

from devstack.processes import extra_worker
from inference.wire import streams
from tenants.models import ComputePool, UsageRecord
from tests.factories import make_tenant
from tests.platform_fixtures import DECODE_SLOTS, chat_socket

pytestmark = pytest.mark.django_db(transaction=True)


def test_moving_a_tenant_to_a_dedicated_pool_changes_the_worker_of_its_next_request(platform):
    tenant = make_tenant(max_output_tokens=4)
    env = {"TANDEM_DTYPE": "float32", "TANDEM_THREADS": "1", "TANDEM_MAX_BATCH": "2"}
    # One socket throughout: the allocation changes while it is open, and its next
    # message follows the change.
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        first_id, _ = chat.ask("Hello!")
        assert UsageRecord.objects.get(message_id=first_id).decode_worker.startswith("decode.shared@")

        vip = ComputePool.objects.create(slug="vip", role="decode", dedicated=True, max_batch=2)
        allocation = tenant.tenant.allocation
        allocation.decode_pool = vip
        allocation.save()
        with extra_worker(platform, role="decode", pool="vip", env=env):
            second_id, frames = chat.ask("Hello again!")
    assert frames[-1]["type"] == "end"
    usage = UsageRecord.objects.get(message_id=second_id)
    assert usage.decode_pool == "vip"
    assert usage.decode_worker.startswith("decode.vip@")
    assert usage.prefill_worker.startswith("prefill.shared@")  # prefill allocation unchanged


def test_a_tenant_at_its_decode_slot_cap_waits_while_another_tenant_is_served(platform):
    assert DECODE_SLOTS == 2
    capped = make_tenant(max_output_tokens=300)
    alloc = capped.tenant.allocation
    alloc.max_decode_slots = 1
    alloc.save()
    other = make_tenant(max_output_tokens=6)
    r = redis_lib.Redis.from_url(platform.env["REDIS_URL"])
    story = "Write a very long story about a lighthouse keeper."
    with chat_socket(platform, capped.widget_key.plaintext) as a, chat_socket(platform, other.widget_key.plaintext) as b:
        a.send({"type": "message", "text": story, "conversation": None})
        a1 = a.recv_until(lambda f: f["type"] == "start")[-1]["message"]
        a.recv_until(lambda f: f["type"] == "token" and f["message"] == a1 and f["index"] >= 1)  # a1 decoding
        a.send({"type": "message", "text": story, "conversation": None})
        a2 = a.recv_until(lambda f: f["type"] == "start")[-1]["message"]
        # a2 is prefilled (index 0) but must wait: its tenant already holds its one slot
        a.recv_until(lambda f: f["type"] == "token" and f["message"] == a2 and f["index"] == 0)
        b_id, b_frames = b.ask("Quick question: are you open today?")
        assert b_frames[-1]["type"] == "end"
        a2_tokens = [rec["index"] for rec in streams.read_all(r, a2) if rec["type"] == "token"]
        a1_tokens = [rec["index"] for rec in streams.read_all(r, a1) if rec["type"] == "token"]
        assert a2_tokens == [0], "the capped tenant's second request must not have joined the batch"
        assert max(a1_tokens) >= 2
        for mid in (a1, a2):
            a.send({"type": "cancel", "message": mid})
        ended: set[str] = set()  # the two ends may arrive in either order
        a.recv_until(lambda f: f["type"] == "end" and ended.add(f["message"]) is None and ended == {a1, a2})


def test_a_tenant_on_a_colocated_pool_is_served_by_one_worker_with_the_same_greedy_reply(platform):
    """The colocated tier (prefill and decode in one engine) gives the reply the split
    tiers give, and records its timings like them."""
    question = "How do I reset my password?"
    split, colocated = make_tenant(max_output_tokens=10), make_tenant(max_output_tokens=10)
    pool = ComputePool.objects.create(slug="solo", role="colocated", dedicated=True, max_batch=2)
    allocation = colocated.tenant.allocation
    allocation.prefill_pool = allocation.decode_pool = pool
    allocation.save()
    env = {"TANDEM_DTYPE": "float32", "TANDEM_THREADS": "1", "TANDEM_MAX_BATCH": "2"}
    with chat_socket(platform, split.widget_key.plaintext) as chat:
        split_id, split_frames = chat.ask(question)
    with extra_worker(platform, role="colocated", pool="solo", env=env), \
            chat_socket(platform, colocated.widget_key.plaintext) as chat:
        solo_id, solo_frames = chat.ask(question)

    def text(frames, message_id):
        return "".join(f["text"] for f in frames if f["type"] == "token" and f["message"] == message_id)

    assert solo_frames[-1]["type"] == split_frames[-1]["type"] == "end"
    assert text(solo_frames, solo_id) == text(split_frames, split_id) != ""
    usage = UsageRecord.objects.get(message_id=solo_id)
    assert usage.prefill_worker.startswith("colocated.solo@") and usage.decode_worker == usage.prefill_worker
    assert (usage.prefill_pool, usage.decode_pool) == ("solo", "solo")
    assert 0 < usage.queue_ms < usage.ttft_ms < usage.duration_ms
