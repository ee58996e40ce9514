"""Chat services: submitting a message (websocket or REST), cancelling a reply, creating
and reading conversations. Every lookup goes through `tenants.access` (the tenant) and,
for a widget socket, `visitors.Visitor.owns` (the visitor): what is not theirs answers
exactly as what does not exist."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.conf import settings

from inference.pipeline import api as pipeline
from inference.pipeline.api import RequestSpec, Route, Sampling
from knowledge.selectors import retrieval_spec
from tandem.actions import offer as action_offer
from tandem.actions.models import TOOL_ROLE
from tandem.api import tool_calls
from tandem.chat.validation import InvalidInput, clean_user_text
from tandem.handoff import states as handoff
from tandem.webhooks import chat_events as webhook_events
from tenants import changes, quotas
from tenants.access import NotFound, access_list, access_owned  # noqa: F401 - NotFound: what callers catch
from tenants.models import ApiKey, Tenant
from tenants.services import api_key_refresh

from .limits import refusal_text, widget_subjects
from .models import Conversation, Message
from .sampling import sampling_for_tandem
from .visitors import Visitor, visitor_recheck

AGENTS_ONLY = (Message.Role.NOTE, Message.Role.DRAFT)  # messages the visitor never sees


class QuotaRefused(Exception):
    """Admission refused the request; nothing was stored or enqueued."""

    def __init__(self, admission: quotas.Admission):
        self.admission = admission
        self.reason = admission.reason
        if admission.reason in quotas.SIZE_REASONS:
            self.code = "context_length_exceeded" if admission.reason == "prompt_too_long" else "max_tokens_too_large"
        else:
            self.code = "rate_limited"
        super().__init__(_refusal_text(admission))


def _refusal_text(adm: quotas.Admission) -> str:
    texts = {
        "requests_per_minute": "Too many requests per minute for this tenant.",
        "tokens_per_minute": "Too many tokens per minute for this tenant.",
        "concurrent_streams": "Too many replies in progress at once for this tenant.",
        "daily_token_budget": "This tenant's daily token budget is spent.",
        "prompt_too_long": "The message is longer than this tenant's maximum prompt.",
        "max_tokens_too_large": "max_tokens is above this tenant's maximum output tokens.",
    }
    text = texts.get(adm.reason or "") or refusal_text(adm.reason)
    if adm.retry_after_s is not None and adm.reason not in quotas.SIZE_REASONS:
        text += f" Retry after {adm.retry_after_s:.1f} s."
    return text


@dataclass(frozen=True)
class Submission:
    api_key: ApiKey  # the key as this submission used it (read again if it had changed)
    key_version: int | None  # the tenants.changes version that key was read at
    conversation: Conversation
    assistant_message: Message
    route: Route
    admission: quotas.Admission
    # False when no live worker serves the first tier the request goes to; the client is
    # told the request is queued rather than left waiting in silence.
    served: bool
    visitor: Visitor | None = None  # the widget visitor, as checked against the tenant read here


def _visible(model, visitor: Visitor | None):
    """`model`'s rows, narrowed to `visitor`'s when a widget socket asks: of messages,
    never the agents' own (notes, drafts), whose ids a visitor could try to resume."""
    rows = model.objects.all()
    if visitor is None:
        return rows
    if model is Message:
        rows = rows.exclude(role__in=AGENTS_ONLY)
    return visitor.owns(rows)


def conversation_get(*, tenant: Tenant, conversation_id, visitor: Visitor | None = None) -> Conversation:
    return access_owned(_visible(Conversation, visitor), "conversation", tenant=tenant, pk=conversation_id)


def message_get(*, tenant: Tenant, message_id, visitor: Visitor | None = None) -> Message:
    return access_owned(_visible(Message, visitor), "message", tenant=tenant, pk=message_id)


def conversation_list(*, tenant: Tenant, limit: int) -> tuple[list[Conversation], bool]:
    """The tenant's newest `limit` conversations, and whether there are more."""
    rows = list(access_list(Conversation, tenant=tenant)[: limit + 1])
    return rows[:limit], len(rows) > limit


def conversation_create(*, tenant: Tenant, channel: str, visitor_id: str = "") -> Conversation:
    conversation = Conversation.objects.create(tenant=tenant, channel=channel, visitor_id=visitor_id)
    webhook_events.conversation_created(conversation)
    return conversation


def conversation_messages(*, tenant: Tenant, conversation_id) -> list[Message]:
    """A conversation's transcript, oldest first (NotFound when it is not the tenant's)."""
    conversation = conversation_get(tenant=tenant, conversation_id=conversation_id)
    return list(conversation.messages.exclude(role=Message.Role.DRAFT).order_by("seq"))


def route_is_served(route: Route) -> bool:
    # One read of the heartbeats for both tiers (each read is two round trips).
    return pipeline.route_is_served(route)


def prompt_history(conversation: Conversation, *, max_prompt_tokens: int) -> list[dict]:
    """The conversation's messages a new prompt is built from, oldest first, as
    {"role", "content"}: replies that failed or were cancelled are left out, and so are
    messages with no text (a reply still being written).

    Bounded, so that one request's cost does not grow with the conversation: only the
    newest `TANDEM_HISTORY_MAX_MESSAGES` rows are read, and of those only the newest that
    fit `TANDEM_HISTORY_CHARS_PER_TOKEN` characters per prompt token (no prompt of
    `max_prompt_tokens` could hold more; the CPU tier trims the rest by tokens)."""
    rows = conversation.messages.exclude(content="").exclude(role__in=AGENTS_ONLY).exclude(
        role=Message.Role.ASSISTANT, status__in=[Message.Status.FAILED, Message.Status.CANCELLED]
    ).order_by("-seq").values_list("role", "content")[: settings.TANDEM_HISTORY_MAX_MESSAGES]
    room = max_prompt_tokens * settings.TANDEM_HISTORY_CHARS_PER_TOKEN
    kept: list[dict] = []
    for role, content in rows:
        room -= len(content)
        if room < 0:
            break
        if role == TOOL_ROLE:  # an action's result, as the tool-call format writes it
            role, content = tool_calls.history_text({"role": role, "content": content})
        # An agent's replies are the support side of the conversation, as the assistant's are.
        kept.append({"role": Message.Role.ASSISTANT if role == Message.Role.AGENT else role, "content": content})
    return kept[::-1]


def conversation_check_length(conversation: Conversation, adding: int) -> None:
    """A conversation holds at most TANDEM_CONVERSATION_MAX_MESSAGES messages."""
    limit = settings.TANDEM_CONVERSATION_MAX_MESSAGES
    if conversation.messages.exclude(role=Message.Role.DRAFT).count() + adding > limit:
        raise InvalidInput(f"This conversation has reached its limit of {limit} messages; start a new one.",
                           param="conversation", code="conversation_too_long")


def chat_submit(
    *,
    api_key: ApiKey,
    messages: list[tuple[str, str]],
    conversation_id=None,
    channel: str = Conversation.Channel.WIDGET,
    visitor_id: str = "",
    sampling: Sampling | None = None,
    key_version: int | None = None,
    refresh_key: bool = False,
    visitor: Visitor | None = None,
    client_ip: str = "",
    locale: str = "",
    offer_actions: bool = False,
) -> Submission:
    """Append `messages` (the last one from the user) to a conversation, create the
    queued assistant message and enqueue the request. Raises InvalidInput, NotFound,
    QuotaRefused, AuthenticationFailed (a key re-read and found revoked), or
    IdentityRefused (the widget `visitor`'s identity no longer verifies).

    A widget socket passes its `visitor`: their identity is checked again against the
    tenant as read here, the conversation must be theirs, and a new one is theirs. The
    visitor and their `client_ip` have limits of their own, admitted with the tenant's.

    A caller that holds its key between requests (a websocket) passes the
    `tenants.changes` version it read the key and tenant at: the admission checks it in
    the same round trip, and the key is read again when a change was counted since.
    `refresh_key` reads it again regardless (the copy's maximum age). The submission
    carries the key it used and that key's version. `locale`: the visitor's language as
    the widget sends it, which the assistant is asked to answer in. `offer_actions`: the
    tenant's actions are offered to the model as tools (tandem.actions.offer; the widget
    socket and REST conversation messages, never /v1/chat/completions); the reply's row
    records whether they were (Message.offered_actions)."""
    if not messages or messages[-1][0] != Message.Role.USER:
        raise InvalidInput("The last message must be from the user.", param="messages")
    cleaned = [(role, clean_user_text(text)) for role, text in messages]
    if refresh_key:
        key_version = changes.version(pipeline.get_redis())  # before the read: a later change is noticed
        api_key = api_key_refresh(api_key=api_key)
    if visitor is not None:
        visitor = visitor_recheck(tenant=api_key.tenant, visitor=visitor)
    conversation = (conversation_get(tenant=api_key.tenant, conversation_id=conversation_id, visitor=visitor)
                    if conversation_id else None)
    if conversation is not None and conversation.channel != channel:
        # A conversation continues on the channel that made it (the widget never writes to
        # a REST conversation, nor REST to a visitor's): answered like a missing one.
        raise NotFound("conversation")
    if conversation:
        conversation_check_length(conversation, adding=len(cleaned) + 1)
        # A person owns it: stored for them, no model call (HeldForPerson).
        handoff.hold_if_with_person(conversation=conversation, text=cleaned[-1][1])
    history = (prompt_history(conversation, max_prompt_tokens=api_key.tenant.quota.max_prompt_tokens)
               if conversation else [])
    request_id = uuid.uuid4()
    conversation_id = conversation.pk if conversation else uuid.uuid4()
    # Admission before anything is stored: a refused request leaves no trace, and an
    # admitted one holds its reservation until the workers reconcile or release it. Its
    # spec (what every tier reads) is stored by the same script.
    for attempt in range(3):
        tenant = api_key.tenant
        route = pipeline.route_for_tenant(tenant)
        spec = request_spec(
            tenant=tenant, route=route, request_id=request_id, conversation_id=conversation_id, channel=channel,
            api_key_id=api_key.pk, sampling=sampling,
            prompt_messages=history + [{"role": role, "content": text} for role, text in cleaned],
            handover=handoff.handoff_spec(tenant=tenant, channel=channel, locale=locale), locale=locale)
        offered = offer_actions and action_offer.offer_to(spec, tenant_id=tenant.pk, text=cleaned[-1][1])
        checked = key_version is not None and attempt < 2  # the last try reads and admits unchecked
        admission = request_admit(
            spec=spec, tenant=tenant, history=[m["content"] for m in history], new=[t for _, t in cleaned],
            if_current=(changes.KEY, key_version) if checked else None,
            subjects=widget_subjects(visitor=visitor, client_ip=client_ip) if visitor is not None else ())
        if admission.reason != "stale":
            break
        # An operator changed a tenant, key or pool since the key was read: read it again.
        key_version = admission.current
        api_key = api_key_refresh(api_key=api_key)
        if visitor is not None:  # the change may be to identity verification
            visitor = visitor_recheck(tenant=api_key.tenant, visitor=visitor)

    def write_rows() -> tuple[Conversation, Message]:
        # The new messages and the queued reply in one INSERT, numbered (Message.seq) in
        # this order, with the conversation they go in.
        if conversation is None:
            owner = visitor.conversation_fields() if visitor is not None else {"visitor_id": visitor_id}
            stored = Conversation.objects.create(id=conversation_id, tenant=tenant, channel=channel, **owner)
        else:
            stored = conversation
            stored.save(update_fields=["updated_at"])  # a new one is created with it set
        assistant = Message(id=request_id, conversation=stored, role=Message.Role.ASSISTANT,
                            status=Message.Status.QUEUED, offered_actions=offered)
        rows = Message.objects.bulk_create(
            [*(Message(conversation=stored, role=role, content=text) for role, text in cleaned), assistant])
        if conversation is None:
            webhook_events.conversation_created(stored)
        for row in rows[:-1]:
            webhook_events.message_created(row, tenant_id=tenant.pk)
        return stored, assistant

    conversation, assistant = request_submit(spec=spec, admission=admission, write_rows=write_rows)
    return Submission(api_key=api_key, key_version=key_version, conversation=conversation,
                      assistant_message=assistant, route=route, admission=admission, served=route_is_served(route),
                      visitor=visitor)


# -- one request to the pipeline, as a visitor's message (chat_submit) and an agent's
# draft (tandem.handoff.drafts) both make it ---------------------------------------------

T = TypeVar("T")


def request_spec(*, tenant: Tenant, route: Route, request_id, conversation_id, channel: str, api_key_id: int | None,
                 sampling: Sampling | None, prompt_messages: list[dict], handover: dict,
                 priority_drop: int = 0, locale: str = "") -> RequestSpec:
    """What every tier reads of a request. The prompt's inputs travel in it, so the CPU
    tier reads no database but for retrieval (one query, with the settings it needs in
    the spec). `handover`: the CPU tier's "asks for a person in words" settings
    (tandem.handoff.states.handoff_spec, or {"handover_patterns": pipeline.HANDOVER_OFF})."""
    quota = tenant.quota
    return RequestSpec(
        request_id=str(request_id), tenant_id=tenant.pk, api_key_id=api_key_id,
        conversation_id=str(conversation_id), channel=channel,
        sampling=sampling or sampling_for_tandem(quota=quota),
        priority=route.priority - priority_drop, max_decode_slots=route.max_decode_slots,
        prefill_pool=route.prefill_pool, decode_pool=route.decode_pool, colocated=route.colocated,
        system_prompt=tenant.system_prompt, max_prompt_tokens=quota.max_prompt_tokens,
        prompt_messages=prompt_messages, **handover, retrieval=retrieval_spec(tenant), locale=locale,
    )


def request_admit(*, spec: RequestSpec, tenant: Tenant, history: list[str], new: list[str],
                  if_current: tuple[str, int] | None = None, subjects=()) -> quotas.Admission:
    """Admit `spec` against its tenant's quotas (and `subjects`' own limits), storing its
    keys in the same round trip; `if_current` makes the admission "stale" when a
    tenants.changes version moved since the caller read it. The prompt's size is an
    estimate from `history` and the `new` messages' text."""
    quota = tenant.quota
    return quotas.admit(
        pipeline.get_redis(), tenant_id=tenant.pk, limits=quotas.QuotaLimits.from_quota(quota),
        request_id=spec.request_id,
        prompt_tokens=pipeline.estimate_prompt_tokens(
            system_prompt=tenant.system_prompt, history=history, new=new, max_prompt_tokens=quota.max_prompt_tokens),
        max_output_tokens=spec.sampling.max_tokens, if_current=if_current, store=pipeline.request_keys(spec),
        subjects=subjects,
    )


def request_submit(*, spec: RequestSpec, admission: quotas.Admission, write_rows: Callable[[], T]) -> T:
    """QuotaRefused when the admission refused; else submit the request with the rows
    `write_rows` stores for it (pipeline.submit: enqueued before the rows are written,
    so the CPU tier prepares the prompt while they are; the commit is reported when the
    caller's outermost transaction commits)."""
    if not admission.allowed:
        raise QuotaRefused(admission)
    return pipeline.submit(spec=spec, write_rows=write_rows)


def chat_cancel(*, tenant: Tenant, message_id, visitor: Visitor | None = None) -> Message:
    msg = message_get(tenant=tenant, message_id=message_id, visitor=visitor)
    if not msg.is_final:
        pipeline.cancel(request_id=str(msg.pk))
    return msg
