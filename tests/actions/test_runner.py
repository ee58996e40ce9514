"""A call's run on the CPU tier without the platform (the runner called as its task
calls it, against a real HTTP server on 127.0.0.1, the test database and Redis): a call
whose worker died mid-run is taken over once its lease is over and continued once; a
call a live worker still holds is left to it, the task told when to look again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tandem.actions import runner, services
from tandem.actions.models import ActionCall
from tandem.chat.models import Conversation, Message
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def running_call(endpoint, *, started_s_ago: float) -> ActionCall:
    tenant = make_tenant().tenant
    action = services.action_create(
        tenant=tenant, by=None, name="order_status", description="Look up an order.", who="anyone",
        url_template=f"{endpoint.url}/orders/{{order_id}}",
        parameters={"type": "object", "properties": {"order_id": {"type": "string"}}}).action
    conv = Conversation.objects.create(tenant=tenant, channel="widget")
    Message.objects.create(conversation=conv, role="user", content="Where is order 7?")
    reply = Message.objects.create(conversation=conv, role="assistant", finish_reason="tool_calls",
                                   content='<tool_call>{"name": "order_status", "arguments": {"order_id": "7"}}'
                                           "</tool_call>")
    return ActionCall.objects.create(tenant=tenant, conversation=conv, message=reply, action=action,
                                     name=action.name, arguments={"order_id": "7"}, status="running",
                                     started_at=timezone.now() - timedelta(seconds=started_s_ago))


def test_a_call_whose_worker_died_is_taken_over_after_its_lease_and_continued_once(endpoint, allow_loopback):
    call = running_call(endpoint, started_s_ago=runner.lease_s() + 1)
    assert runner.call_run(call_id=str(call.pk)) is None
    assert [r.path for r in endpoint.requests] == ["/orders/7"]
    call.refresh_from_db()
    assert call.status == "succeeded" and call.continuation_id is not None
    roles = list(call.conversation.messages.order_by("seq").values_list("role", flat=True))
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert runner.call_run(call_id=str(call.pk)) is None  # redelivered: nothing runs or continues twice
    assert len(endpoint.requests) == 1 and call.conversation.messages.count() == 4


def test_a_call_a_live_worker_holds_is_left_to_it(endpoint, allow_loopback):
    call = running_call(endpoint, started_s_ago=5)
    wait = runner.call_run(call_id=str(call.pk))
    assert wait is not None and runner.lease_s() - 10 < wait <= runner.lease_s()
    assert endpoint.requests == [] and ActionCall.objects.get(pk=call.pk).status == "running"
