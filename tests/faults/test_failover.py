"""A worker that dies mid-reply costs the visitor nothing: real processes, real SIGKILL.
Each test kills a worker of the faults platform (tests/faults/conftest.py) at a moment
it chose by watching the ownership records, then checks every reply."""

from __future__ import annotations

import os
import signal
import time

import openai
import pytest

from inference.wire import keys
from tandem.chat.models import Message
from tenants import quotas
from tenants.models import UsageRecord
from tests.factories import make_tenant

from .conftest import (
    Chat,
    chats,
    counter_sum,
    dumps,
    ensure_workers,
    held,
    scrape,
    stream_tokens,
    until,
    workers_of,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

QUESTIONS = [
    "Write a long story about a dragon who learns to bake bread.",
    "Explain in detail how a lighthouse works, step by step.",
    "Describe your ideal weekend in the mountains, with many details.",
    "Tell me a long tale about a sailor lost at sea.",
    "Write a detailed guide to planting a vegetable garden.",
    "Describe the history of the bicycle at length.",
    "Write a long letter to a friend about moving to a new city.",
    "Explain how bread rises, in as much detail as you can.",
]


def assert_complete(chat: Chat) -> None:
    """One reply ended well: its frames end with `end`, token indices run 0..n-1 with no
    gap and no repeat (in the frames and in the stream itself), usage counts them all."""
    assert chat.last.get("type") == "end", dumps(chat.frames)
    indices = [t["index"] for t in chat.tokens]
    assert indices == list(range(len(indices)))
    assert [r["index"] for r in stream_tokens(chat.platform, chat.message_id)] == indices  # nothing written twice
    assert chat.last["usage"]["completion_tokens"] == len(indices)
    usage = UsageRecord.objects.get(message_id=chat.message_id)
    assert usage.completion_tokens == len(indices)
    msg = Message.objects.get(pk=chat.message_id)
    assert msg.status == "done" and msg.content == "".join(t["text"] for t in chat.tokens)


def token_ids(platform, chat: Chat) -> list[int]:
    return [r["token_id"] for r in stream_tokens(platform, chat.message_id)]


def moved(chat: Chat) -> bool:
    """The reply was told its worker was lost (and another takes it, or it waits for one)."""
    return any(f["type"] == "status" and ("was lost" in f.get("detail", "") or "waits for one" in f.get("detail", ""))
               for f in chat.frames)


def test_killing_the_decode_worker_that_holds_four_streams_loses_nothing(faults_platform):
    p = faults_platform
    ensure_workers(p, "decode", 2)
    tenant = make_tenant(max_output_tokens=64)
    key = tenant.widget_key.plaintext
    with chats(p, key, QUESTIONS) as reference:
        pass
    for c in reference:
        assert_complete(c)

    with chats(p, key, QUESTIONS) as replies:
        def victim():
            """A decode worker holding >= 4 replies that each have decode tokens already."""
            by_id = {c.message_id: c for c in replies if c.message_id}
            for name in workers_of(p, "decode"):
                streaming = [rid for rid in held(p, name) if rid in by_id and len(by_id[rid].tokens) >= 2
                             and by_id[rid].last.get("type") == "token"]
                if len(streaming) >= 4:
                    return name, streaming
            return None

        name, affected = until(victim, timeout=240, what="a decode worker holding four streams")
        p.kill(name)
    for c in replies:
        assert_complete(c)
    for ref, c in zip(reference, replies, strict=True):
        assert token_ids(p, c) == token_ids(p, ref), c.text  # greedy: the same tokens, kill or not
    moved_ids = {c.message_id for c in replies if moved(c)}
    assert set(affected) <= moved_ids
    # Billed once: the tenant's daily count is exactly what its replies used.
    total = sum(u.prompt_tokens + u.completion_tokens for u in UsageRecord.objects.filter(tenant=tenant.tenant))
    snapshot = quotas.usage_snapshot(p.client, tenant_id=tenant.tenant.pk,
                                     limits=quotas.QuotaLimits.from_quota(tenant.tenant.quota))
    assert snapshot["daily_tokens"]["used"] == total


def test_the_openai_client_streaming_survives_a_decode_kill_with_the_same_seeded_text(faults_platform):
    p = faults_platform
    ensure_workers(p, "decode", 2)
    tenant = make_tenant(max_output_tokens=80)
    client = openai.OpenAI(base_url=f"{p.base_url}/v1", api_key=tenant.secret_key.plaintext, max_retries=0,
                           timeout=240)
    args = dict(model=client.models.list().data[0].id, max_tokens=60, temperature=0.8, seed=11,
                messages=[{"role": "user", "content": QUESTIONS[0]}])
    reference = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**args, stream=True))

    raw = client.chat.completions.with_raw_response.create(**args, stream=True)
    request_id = raw.headers["x-request-id"]
    pieces, killed = [], None
    for chunk in raw.parse():
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
        if killed is None and len(pieces) >= 4:
            owner = p.client.hget(keys.owner(request_id), "worker").decode()
            killed = next(n for n in workers_of(p, "decode") if p.worker_name(n, p.client) == owner)
            p.kill(killed)
    assert killed is not None
    assert "".join(pieces) == reference
    assert int(p.client.hget(keys.owner(request_id), "migrations")) == 1


def test_a_live_reply_that_outlasts_the_brokers_visibility_timeout_is_not_run_twice(faults_platform):
    p = faults_platform
    ensure_workers(p, "decode", 2)
    before = counter_sum(scrape(p, "decode"), "tandem_task_redeliveries_total", stage="decode", outcome="duplicate")
    # The visibility timeout is 4 s and the broker sweeps every 2 s, so a decode task is
    # redelivered 4-6 s after it started. Replies long enough to outlast that on a fast
    # machine (one of 200 tokens ended in under 2 s on one), several at once: a duplicate
    # delivery is only counted for a request its live worker still owns.
    tenant = make_tenant(max_output_tokens=1500)
    with chats(p, tenant.widget_key.plaintext, QUESTIONS[:4]) as replies:
        def duplicates() -> float:
            return counter_sum(scrape(p, "decode"), "tandem_task_redeliveries_total", stage="decode",
                               outcome="duplicate")

        until(lambda: duplicates() > before or all(r.last.get("type") == "end" for r in replies),
              timeout=240, what="a redelivery")
        assert duplicates() > before, "every reply ended before its task was redelivered"
    for reply in replies:
        assert_complete(reply)
        assert not moved(reply)


def test_killing_a_prefill_worker_with_prompts_queued_loses_nothing(faults_platform):
    p = faults_platform
    ensure_workers(p, "decode", 1)
    ensure_workers(p, "prefill", 2)
    tenant = make_tenant(max_output_tokens=8)
    long_questions = [q + " " + "Please be thorough and consider every aspect of it. " * 12 for q in QUESTIONS]
    with chats(p, tenant.widget_key.plaintext, long_questions) as replies:
        def victim():
            waiting = {c.message_id for c in replies if c.message_id and not c.tokens}
            for name in workers_of(p, "prefill"):
                queued = held(p, name) & waiting
                if len(queued) >= 2:
                    return name, queued
            return None

        name, affected = until(victim, timeout=240, what="a prefill worker holding two prompts")
        p.kill(name)
    for c in replies:
        assert_complete(c)
    assert affected <= {c.message_id for c in replies if moved(c)}


def test_killing_the_cpu_worker_during_a_hand_off_loses_nothing(faults_platform):
    p = faults_platform
    ensure_workers(p, "decode", 1)
    ensure_workers(p, "prefill", 1)
    [cpu] = ensure_workers(p, "cpu", 1)
    tenant = make_tenant(max_output_tokens=6, requests_per_minute=10_000)  # as many waves as it takes
    pid = p.procs[cpu].pid
    replies: list[Chat] = []
    # The CPU tier holds a request for a few milliseconds: waves of chats are sent (the
    # next once the last has its first tokens) until the worker is caught holding one,
    # frozen there, and killed. Polled without a pause: the window is that short.
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline, "the CPU worker was never caught in the middle of a request"
        if not replies or all(c.tokens or not c.is_alive() for c in replies[-6:]):
            wave = [Chat(p, tenant.widget_key.plaintext, q) for q in QUESTIONS[:6]]
            for c in wave:
                c.start()
            replies += wave
        if held(p, cpu):
            os.kill(pid, signal.SIGSTOP)
            affected = held(p, cpu)
            if affected:  # still there after the stop: stopped mid-hand-off
                break
            os.kill(pid, signal.SIGCONT)
    name = p.worker_name(cpu, p.client)
    assert name, "the CPU worker has no heartbeat name"
    p.kill(cpu)  # SIGKILL reaches a stopped process too
    ensure_workers(p, "cpu", 1)
    for c in replies:
        c.join(timeout=300)
        assert not c.is_alive() and c.error is None, (c.text, c.error, c.frames[-3:])
        assert_complete(c)
    # What it held was taken off it; only those were told their worker was lost. (One
    # caught after its hand-off had gone on, while it let go of it, is not moved: it
    # continues where it went, and completed above like every other.)
    until(lambda: not p.client.smembers(keys.worker_requests(name)), timeout=60, what="the dead worker's requests")
    assert {c.message_id for c in replies if moved(c)} <= affected


def test_a_reply_that_loses_its_worker_more_often_than_the_limit_fails_with_worker_lost(faults_platform):
    p = faults_platform
    ensure_workers(p, "decode", 2)
    tenant = make_tenant(max_output_tokens=200)
    with chats(p, tenant.widget_key.plaintext, [QUESTIONS[3]]) as [reply]:
        until(lambda: len(reply.tokens) >= 3, timeout=240, what="the reply's tokens")
        for _ in range(2):  # the limit is one migration: the second loss is one too many
            owner = until(lambda: _running_owner(p, reply.message_id), timeout=120, what="the reply's decode worker")
            seen = len(reply.tokens)
            p.kill(next(n for n in workers_of(p, "decode") if p.worker_name(n, p.client) == owner))
            if workers_of(p, "decode"):
                # Running again on the other worker: tokens the dead one sent before it died may
                # still arrive after the kill, so more tokens alone do not say the reply moved.
                until(lambda o=owner, s=seen: _running_owner(p, reply.message_id) not in (None, o)
                      and len(reply.tokens) > s, timeout=120, what="the reply to continue on another worker")
    assert reply.last["type"] == "error" and reply.last["code"] == "worker_lost", dumps(reply.frames)
    indices = [t["index"] for t in reply.tokens]
    assert indices == list(range(len(indices)))
    assert Message.objects.get(pk=reply.message_id).status == "failed"


def test_with_no_decode_worker_left_a_reply_says_it_waits_then_fails_after_the_queue_timeout(faults_platform):
    p = faults_platform
    [decode] = ensure_workers(p, "decode", 1)
    tenant = make_tenant(max_output_tokens=200)
    with chats(p, tenant.widget_key.plaintext, [QUESTIONS[5]]) as [reply]:
        until(lambda: len(reply.tokens) >= 3, timeout=240, what="the reply's tokens")
        p.kill(decode)
    statuses = [f for f in reply.frames if f["type"] == "status" and "No decode worker" in f.get("detail", "")]
    assert statuses and statuses[0]["state"] == "queued"
    assert reply.last["type"] == "error" and reply.last["code"] == "no_worker", dumps(reply.frames)
    first_wait = reply.frames.index(statuses[0])
    assert [f["type"] for f in reply.frames[first_wait:-1]] == ["status"] * (len(reply.frames) - first_wait - 1)
    ensure_workers(p, "decode", 2)


def _running_owner(p, request_id: str) -> str | None:
    worker, state = p.client.hmget(keys.owner(request_id), "worker", "state")
    return worker.decode() if state == b"running" and worker else None
