""""Suggest a reply": the assistant drafts an answer for the agent who owns a
conversation (docs/handoff.md). The draft is an ordinary request through the pipeline
(admitted against the tenant's quotas, its tokens in a Redis Stream, its UsageRecord
written at the end like any reply's), below the tenant's visitors' replies in priority,
and its row is a Message of role `draft`: never in the visitor's transcript, never in a
prompt, never published to the conversation's live events. Only the agent's socket
follows its stream (tandem.handoff.agent_socket) into the reply box; what reaches the
visitor is what the agent then sends, as their own reply."""

from __future__ import annotations

import uuid

from inference.pipeline import api as pipeline
from tandem.chat import services
from tandem.chat.models import Conversation, Message
from tandem.chat.validation import InvalidInput
from tenants.access import access_owned
from tenants.models import Tenant

from . import states
from .assignment import display_name

# Below every reply a visitor waits for: the agent can write their own meanwhile.
PRIORITY_DROP = 5


def draft_request(*, tenant: Tenant, conversation_id, agent) -> tuple[Message, bool]:
    """Start a draft of the reply to the visitor's newest message: (its queued Message,
    whether a worker serves the tenant's pool now). Raises NotFound (not the tenant's),
    states.NotYours (not this agent's conversation), InvalidInput (nothing to answer)
    or services.QuotaRefused."""
    tenant = Tenant.objects.select_related("quota").get(pk=tenant.pk)  # quotas as they are now
    conversation = access_owned(Conversation, "conversation", tenant=tenant, pk=conversation_id)
    if not (conversation.handoff == Conversation.Handoff.HUMAN and conversation.assignee_id == agent.pk):
        raise states.NotYours()
    quota = tenant.quota
    history = services.prompt_history(conversation, max_prompt_tokens=quota.max_prompt_tokens)
    while history and history[-1]["role"] != Message.Role.USER:
        history.pop()  # a draft answers the visitor, not the agent's own last reply
    if not history:
        raise InvalidInput("The visitor has not written anything to answer yet.", code="nothing_to_answer")
    request_id = str(uuid.uuid4())
    route = pipeline.route_for_tenant(tenant)
    spec = services.request_spec(
        tenant=tenant, route=route, request_id=request_id, conversation_id=conversation.pk,
        channel=conversation.channel, api_key_id=None, sampling=None, prompt_messages=history,
        # A person already has the conversation: nothing to hand over to.
        handover={"handover_patterns": pipeline.HANDOVER_OFF}, priority_drop=PRIORITY_DROP)
    admission = services.request_admit(spec=spec, tenant=tenant, history=[m["content"] for m in history[:-1]],
                                       new=[history[-1]["content"]])
    draft = services.request_submit(
        spec=spec, admission=admission,
        write_rows=lambda: Message.objects.create(id=request_id, conversation=conversation, role=Message.Role.DRAFT,
                                                  status=Message.Status.QUEUED, author=agent,
                                                  author_name=display_name(agent)))
    return draft, services.route_is_served(route)
