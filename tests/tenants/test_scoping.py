import pytest

from tandem.chat.models import Conversation, Message
from tenants.models import UsageRecord
from tenants.selectors import scope_to_tenant
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


def test_scoping_hides_other_tenants_conversations_and_messages():
    a, b = make_tenant().tenant, make_tenant().tenant
    conv_a = Conversation.objects.create(tenant=a, channel="api")
    conv_b = Conversation.objects.create(tenant=b, channel="api")
    Message.objects.create(conversation=conv_a, role="user", content="a")
    Message.objects.create(conversation=conv_b, role="user", content="b")

    assert list(scope_to_tenant(Conversation.objects.all(), tenant=a)) == [conv_a]
    assert [m.content for m in scope_to_tenant(Message.objects.all(), tenant=b)] == ["b"]
    assert not scope_to_tenant(Conversation.objects.filter(pk=conv_b.pk), tenant=a).exists()


def test_scoping_applies_to_usage_records():
    a, b = make_tenant().tenant, make_tenant().tenant
    import uuid

    UsageRecord.objects.create(tenant=a, message_id=uuid.uuid4(), completion_tokens=3)
    assert scope_to_tenant(UsageRecord.objects.all(), tenant=b).count() == 0
    assert scope_to_tenant(UsageRecord.objects.all(), tenant=a).count() == 1
