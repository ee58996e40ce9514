import uuid

import pytest

from tandem.chat.models import Conversation, Message
from tenants.access import NotFound, access_list, access_owned
from tenants.models import UsageRecord
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


def test_scoping_hides_other_tenants_conversations_and_messages():
    a, b = make_tenant().tenant, make_tenant().tenant
    conv_a = Conversation.objects.create(tenant=a, channel="api")
    conv_b = Conversation.objects.create(tenant=b, channel="api")
    Message.objects.create(conversation=conv_a, role="user", content="a")
    Message.objects.create(conversation=conv_b, role="user", content="b")

    assert list(access_list(Conversation, tenant=a)) == [conv_a]
    assert [m.content for m in access_list(Message, tenant=b)] == ["b"]
    assert not access_list(Conversation.objects.filter(pk=conv_b.pk), tenant=a).exists()


def test_scoping_applies_to_usage_records():
    a, b = make_tenant().tenant, make_tenant().tenant
    UsageRecord.objects.create(tenant=a, message_id=uuid.uuid4(), completion_tokens=3)
    assert access_list(UsageRecord, tenant=b).count() == 0
    assert access_list(UsageRecord, tenant=a).count() == 1


def test_another_tenants_id_is_answered_exactly_like_a_missing_or_malformed_one():
    a, b = make_tenant().tenant, make_tenant().tenant
    conv_b = Conversation.objects.create(tenant=b, channel="api")
    assert access_owned(Conversation, "conversation", tenant=b, pk=conv_b.pk) == conv_b
    answers = []
    for pk in (conv_b.pk, uuid.uuid4(), "not-a-uuid", None):
        with pytest.raises(NotFound) as caught:
            access_owned(Conversation, "conversation", tenant=a, pk=pk)
        answers.append((str(caught.value), caught.value.code))
    assert answers == [("No such conversation.", "conversation_not_found")] * 4
