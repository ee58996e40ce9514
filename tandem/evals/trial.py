"""The console's "Try the assistant": a person's chat with the assistant through the
real pipeline, with the tenant's draft settings or the live ones, showing what it
cited. Each person's trial conversations are their own (visitor id `eval:try:<user>`),
left out of the Outcomes figures and the inbox like the harness's."""

from __future__ import annotations

from inference.pipeline import api as pipeline
from knowledge.models import Citation
from tandem.chat.models import Conversation, Message
from tenants.access import NotFound, access_list
from tenants.models import Tenant

from . import drafts
from .ask import EVAL_VISITOR, ask
from .assistant_settings import AssistantSettings, draft_settings, live_settings

TRY_VISITOR = f"{EVAL_VISITOR}try:"


def _visitor(user) -> str:
    return f"{TRY_VISITOR}{user.pk}"


def trial_settings(*, tenant: Tenant, which: str) -> AssistantSettings:
    """The draft's settings ("draft", when the tenant has one) or the live ones."""
    draft = drafts.draft_get(tenant=tenant) if which == "draft" else None
    return draft_settings(draft) if draft is not None else live_settings(tenant)


def trial_conversation(*, tenant: Tenant, user, conversation_id) -> Conversation:
    """This person's trial conversation; NotFound for anyone else's, like a missing one."""
    found = access_list(Conversation, tenant=tenant).filter(pk=conversation_id, visitor_id=_visitor(user)).first()
    if found is None:
        raise NotFound("conversation")
    return found


def trial_ask(*, tenant: Tenant, user, question: str, which: str, conversation_id=None) -> Message:
    """The queued reply (in the person's conversation `conversation_id`, else a new one).
    Raises what `ask` raises, and NotFound for a conversation not theirs."""
    conversation = (trial_conversation(tenant=tenant, user=user, conversation_id=conversation_id)
                    if conversation_id else None)
    return ask(tenant=tenant, question=question, settings=trial_settings(tenant=tenant, which=which),
               visitor_id=_visitor(user), conversation=conversation)


def trial_reply(*, tenant: Tenant, user, message_id) -> tuple[Message, list[Citation]]:
    """One of the person's trial replies and the sources it cited, by rank."""
    msg = (access_list(Message, tenant=tenant).select_related("conversation")
           .filter(pk=message_id, role=Message.Role.ASSISTANT, conversation__visitor_id=_visitor(user)).first())
    if msg is None:
        raise NotFound("message")
    if not msg.is_final:
        # The page polls the stored reply instead of following its stream: each poll keeps
        # it listened to, and a closed page lets it be cancelled like a socket's.
        pipeline.keep_listening(request_ids=[str(msg.pk)])
    return msg, list(access_list(Citation, tenant=tenant).filter(message_id=msg.pk).order_by("rank"))
