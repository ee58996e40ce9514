""""Suggest a reply": the assistant drafts an answer for the agent who owns a
conversation (docs/handoff.md). The draft is an ordinary request through the pipeline
(admitted against the tenant's quotas, its tokens in a Redis Stream, its UsageRecord
written at the end like any reply's), below the tenant's visitors' replies in priority,
and its row is a Message of role `draft`: never in the visitor's transcript, never in a
prompt, never published to the conversation's live events. Only the agent's socket
follows its stream (tandem.console.agent_socket) into the reply box; what reaches the
visitor is what the agent then sends, as their own reply."""

from __future__ import annotations

import uuid

from django.db import transaction

from inference.pipeline import submit as pipeline
from inference.pipeline.route import route_for_tenant
from inference.text import handover
from inference.text.tokenizer import estimate_prompt_tokens
from inference.text.validation import InvalidInput
from inference.wire.connections import get_redis
from inference.wire.spec import RequestSpec
from knowledge.selectors import retrieval_spec
from tenants import quotas
from tenants.access import access_owned
from tenants.models import Tenant

from . import responder, services
from .models import Conversation, Message
from .sampling import sampling_for_tandem

# Below every reply a visitor waits for: the agent can write their own meanwhile.
PRIORITY_DROP = 5


def draft_request(*, tenant: Tenant, conversation_id, agent) -> tuple[Message, bool]:
    """Start a draft of the reply to the visitor's newest message: (its queued Message,
    whether a worker serves the tenant's pool now). Raises NotFound (not the tenant's),
    responder.NotYours (not this agent's conversation), InvalidInput (nothing to answer)
    or services.QuotaRefused."""
    tenant = Tenant.objects.select_related("quota").get(pk=tenant.pk)  # quotas as they are now
    conversation = access_owned(Conversation, "conversation", tenant=tenant, pk=conversation_id)
    if not (conversation.handoff == Conversation.Handoff.HUMAN and conversation.assignee_id == agent.pk):
        raise responder.NotYours()
    quota = tenant.quota
    history = services.prompt_history(conversation, max_prompt_tokens=quota.max_prompt_tokens)
    while history and history[-1]["role"] != Message.Role.USER:
        history.pop()  # a draft answers the visitor, not the agent's own last reply
    if not history:
        raise InvalidInput("The visitor has not written anything to answer yet.", code="nothing_to_answer")
    request_id = str(uuid.uuid4())
    route = route_for_tenant(tenant)
    spec = RequestSpec(
        request_id=request_id, tenant_id=tenant.pk, api_key_id=None, conversation_id=str(conversation.pk),
        channel=conversation.channel, sampling=sampling_for_tandem(quota=quota),
        priority=route.priority - PRIORITY_DROP, max_decode_slots=route.max_decode_slots,
        prefill_pool=route.prefill_pool, decode_pool=route.decode_pool, colocated=route.colocated,
        system_prompt=tenant.system_prompt, max_prompt_tokens=quota.max_prompt_tokens,
        prompt_messages=history,
        # A person already has the conversation: nothing to hand over to.
        handover_patterns=handover.OFF, retrieval=retrieval_spec(tenant),
    )
    client = get_redis()
    admission = quotas.admit(
        client, tenant_id=tenant.pk, limits=quotas.QuotaLimits.from_quota(quota), request_id=request_id,
        prompt_tokens=estimate_prompt_tokens(system_prompt=tenant.system_prompt,
                                             history=[m["content"] for m in history[:-1]],
                                             new=[history[-1]["content"]], max_prompt_tokens=quota.max_prompt_tokens),
        max_output_tokens=spec.sampling.max_tokens, store=pipeline.request_keys(spec))
    if not admission.allowed:
        raise services.QuotaRefused(admission)
    try:
        pipeline.request_enqueue(spec=spec)
        with transaction.atomic():
            draft = Message.objects.create(id=request_id, conversation=conversation, role=Message.Role.DRAFT,
                                           status=Message.Status.QUEUED, author=agent,
                                           author_name=responder.display_name(agent))
    except BaseException:
        quotas.release(client, tenant_id=tenant.pk, request_id=request_id)
        pipeline.request_stored(request_id=request_id, committed=False)
        raise
    transaction.on_commit(lambda: pipeline.request_stored(request_id=request_id, committed=True))
    return draft, services.route_is_served(route)
