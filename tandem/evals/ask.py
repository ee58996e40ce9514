"""One question to the assistant with given settings (live or a draft's), through the
real pipeline: admitted against the tenant's quotas, routed to its pool at a low
priority, its tokens metered in a UsageRecord like any reply's. The conversation is a
REST one of the tenant's whose visitor id starts `eval:`: the Outcomes figures, the
knowledge gaps and the inbox leave such conversations out (they test the assistant;
no visitor asked). The hand-over check is the widget's, so a case can expect one: the
reply then says the hand-over text and ends `handover`, and nobody is called."""

from __future__ import annotations

import uuid

from inference.pipeline import api as pipeline
from tandem.chat import services
from tandem.chat.models import Conversation, Message
from tandem.chat.validation import clean_user_text
from tandem.handoff import states as handoff
from tenants.models import Tenant

from .assistant_settings import AssistantSettings

EVAL_VISITOR = "eval:"  # tandem.feedback.rollup and the reply sink know this prefix
# Below every reply a visitor waits for, with agents' suggested replies (the broker's last
# step for a tenant at the default priority).
PRIORITY_DROP = 5


def ask(*, tenant: Tenant, question: str, settings: AssistantSettings, visitor_id: str,
        conversation: Conversation | None = None) -> Message:
    """The queued reply to `question` (in `conversation`, else a new one). Raises
    InvalidInput (the text, or a conversation at its length limit) or
    services.QuotaRefused (nothing stored then)."""
    if not visitor_id.startswith(EVAL_VISITOR):
        raise ValueError(f"An evaluation's visitor id starts {EVAL_VISITOR!r}.")
    tenant = Tenant.objects.select_related("quota").get(pk=tenant.pk)  # quotas as they are now
    text = clean_user_text(question)
    history = []
    if conversation is not None:
        services.conversation_check_length(conversation, adding=2)
        history = services.prompt_history(conversation, max_prompt_tokens=tenant.quota.max_prompt_tokens)
    request_id = uuid.uuid4()
    conversation_id = conversation.pk if conversation is not None else uuid.uuid4()
    route = pipeline.route_for_tenant(tenant)
    spec = services.request_spec(
        tenant=tenant, route=route, request_id=request_id, conversation_id=conversation_id,
        channel=Conversation.Channel.API, api_key_id=None, sampling=None,
        prompt_messages=[*history, {"role": Message.Role.USER, "content": text}],
        handover=handoff.handoff_spec(tenant=tenant, channel=Conversation.Channel.WIDGET),
        priority_drop=PRIORITY_DROP)
    settings.apply(spec, tenant=tenant)
    admission = services.request_admit(spec=spec, tenant=tenant, history=[m["content"] for m in history], new=[text])

    def write_rows() -> Message:
        stored = conversation or Conversation.objects.create(
            id=conversation_id, tenant=tenant, channel=Conversation.Channel.API, visitor_id=visitor_id)
        if conversation is not None:
            stored.save(update_fields=["updated_at"])
        return Message.objects.bulk_create([
            Message(conversation=stored, role=Message.Role.USER, content=text),
            Message(id=request_id, conversation=stored, role=Message.Role.ASSISTANT, status=Message.Status.QUEUED),
        ])[-1]

    return services.request_submit(spec=spec, admission=admission, write_rows=write_rows)
