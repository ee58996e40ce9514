"""One request cannot hold the shared CPU worker (issue 27, finding 1): the CPU tier's
task has a wall-clock budget (TANDEM_CPU_TIME_BUDGET_S); past it the reply fails with
`cpu_time_exceeded` and the worker takes the next request."""

from __future__ import annotations

import signal
import time

import pytest

from inference import tasks
from inference.wire import streams
from inference.wire.connections import get_redis
from inference.wire.workers import live_workers
from inference.worker.budget import BudgetExceeded, time_budget
from tandem.chat import services
from tandem.chat.models import Conversation, Message
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_budget_stops_python_work_that_would_otherwise_run_on():
    started = time.perf_counter()
    with pytest.raises(BudgetExceeded), time_budget(0.2):
        while time.perf_counter() - started < 30:  # a stand-in for a request that never ends
            pass
    assert time.perf_counter() - started < 2


def _submit(created, text: str) -> str:
    conv = Conversation.objects.create(tenant=created.tenant, channel="api")
    Message.objects.bulk_create([Message(conversation=conv, role="user" if i % 2 == 0 else "assistant",
                                         content="An earlier question about returns and refunds. " * 20,
                                         status="done") for i in range(30)])
    sub = services.chat_submit(api_key=created.secret_key.api_key, messages=[("user", text)],
                               conversation_id=conv.pk, channel="api")
    return str(sub.assistant_message.pk)


def test_a_request_past_the_cpu_tiers_budget_fails_with_a_clear_code_and_the_next_one_goes_on(
        settings, redis_client):
    if live_workers(get_redis(), role="cpu"):
        pytest.skip("the session platform's CPU worker (its own budget) would race this test for the task")
    created = make_tenant()
    for key in redis_client.scan_iter(f"tandem:quota:{created.tenant.pk}:*"):
        redis_client.delete(key)
    # A budget far below what a 30-message prompt takes stands in for a request that runs on.
    settings.TANDEM_CPU_TIME_BUDGET_S = 0.001
    slow = _submit(created, "And now?")
    tasks.preprocess_within_budget(slow)
    records = streams.read_all(redis_client, slow)
    assert records[-1]["type"] == "error" and records[-1]["code"] == "cpu_time_exceeded"
    failed = Message.objects.get(pk=slow)
    assert failed.status == Message.Status.FAILED and failed.error.startswith("cpu_time_exceeded")
    settings.TANDEM_CPU_TIME_BUDGET_S = 5
    normal = _submit(created, "And now?")
    tasks.preprocess_within_budget(normal)
    assert Message.objects.get(pk=normal).status != Message.Status.FAILED
    assert streams.read_all(redis_client, normal)[-1]["type"] == "status"  # queued on the model tier


def test_a_budget_gives_an_earlier_timer_back_less_the_time_it_ran():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)  # e.g. pytest-timeout's
        with time_budget(0.05):
            time.sleep(0.01)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 29 < left < 30 and not fired
        with time_budget(60):  # would end after the other timer: not armed
            assert 29 < signal.getitimer(signal.ITIMER_REAL)[0] < 30
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
