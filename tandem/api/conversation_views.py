"""Tandem's own REST resources: conversations, their messages, and usage. Every lookup
is scoped to the key's tenant (another tenant's ids are 404, never 403).

A conversation's message is offered the tenant's actions (tandem.actions; not with
`"actions": false`), as a widget visitor's is: its answer is then followed across the
call, the wait for its result (and for a person's approval) and the reply that
continues (TurnReply); the call and its result are entries of the transcript."""

from __future__ import annotations

import datetime as dt

import redis
from django.http import JsonResponse
from drf_spectacular.utils import extend_schema

from inference.wire.connections import get_redis
from knowledge.selectors import citations_for
from tandem.actions.stream import TurnFollower
from tandem.actions.transcript import rest_fields
from tandem.chat import services
from tandem.chat.models import Conversation, Message
from tandem.chat.sampling import sampling_for_tandem
from tandem.db_pool import pooled_sync_to_async
from tenants import quotas
from tenants.selectors import usage_daily

from . import serializers as s
from .base import AsyncAPIView
from .errors import ApiError
from .openai_views import ERRORS, submit_or_raise
from .replies import Reply
from .request_fields import refuse_unknown

MAX_PAGE = 100


def _conversation(c: Conversation) -> dict:
    return s.ConversationSerializer(c).data


def _message(m: Message, sources: list[dict] | None = None, extra: dict | None = None) -> dict:
    return {**s.MessageSerializer(m).data, "sources": sources or [], **(extra or {})}


class TurnReply(Reply):
    """A reply that was offered the tenant's actions: each choice read across its passes
    (tandem.actions.stream.TurnFollower), so the answer ends with the reply that
    continued after a call."""

    def _followers(self):
        return [TurnFollower(rid, conversation_id=sub.conversation.pk, served=sub.served)
                for rid, sub in zip(self.request_ids, self.submissions, strict=True)]


def _not_found(call, **kwargs):
    try:
        return call(**kwargs)
    except services.NotFound as exc:
        raise ApiError(404, str(exc), code=exc.code) from None


class ConversationListView(AsyncAPIView):
    @extend_schema(operation_id="listConversations", responses={200: s.ConversationListSerializer, **ERRORS},
                   parameters=[s.ListQuerySerializer])
    def get(self, request):
        raise NotImplementedError

    @extend_schema(operation_id="createConversation", request=s.ConversationCreateSerializer,
                   responses={201: s.ConversationSerializer, **ERRORS})
    def post(self, request):
        raise NotImplementedError

    async def get_async(self, request):
        api_key = await self.authenticate(request)
        try:
            limit = int(request.GET.get("limit", 20))
        except ValueError:
            raise ApiError(400, "limit must be an integer.", code="invalid_value", param="limit") from None
        if not 1 <= limit <= MAX_PAGE:
            raise ApiError(400, f"limit must be between 1 and {MAX_PAGE}.", code="invalid_value", param="limit")

        def page():
            rows, more = services.conversation_list(tenant=api_key.tenant, limit=limit)
            return [_conversation(c) for c in rows], more

        data, more = await pooled_sync_to_async(page)()
        return JsonResponse({"object": "list", "data": data, "has_more": more})

    async def post_async(self, request):
        api_key = await self.authenticate(request)
        data = self.validate(s.ConversationCreateSerializer, self.json_body(request))
        conv = await pooled_sync_to_async(services.conversation_create)(
            tenant=api_key.tenant, channel=Conversation.Channel.API, visitor_id=data.get("visitor_id", ""))
        return JsonResponse(_conversation(conv), status=201)


class ConversationDetailView(AsyncAPIView):
    @extend_schema(operation_id="getConversation", responses={200: s.ConversationSerializer, **ERRORS})
    def get(self, request, conversation_id):
        raise NotImplementedError

    async def get_async(self, request, conversation_id):
        api_key = await self.authenticate(request)
        conv = await pooled_sync_to_async(_not_found)(services.conversation_get, tenant=api_key.tenant,
                                                      conversation_id=conversation_id)
        return JsonResponse(_conversation(conv))


class ConversationMessagesView(AsyncAPIView):
    @extend_schema(operation_id="listMessages", responses={200: s.MessageListSerializer, **ERRORS})
    def get(self, request, conversation_id):
        raise NotImplementedError

    @extend_schema(operation_id="postMessage", request=s.PostMessageSerializer,
                   responses={200: s.ChatCompletionSerializer, **ERRORS},
                   description="Add a user message and get the assistant's reply: waited for, or with "
                               "`stream: true` as `chat.completion.chunk` server-sent events.")
    def post(self, request, conversation_id):
        raise NotImplementedError

    async def get_async(self, request, conversation_id):
        api_key = await self.authenticate(request)

        def transcript():
            messages = _not_found(services.conversation_messages, tenant=api_key.tenant,
                                  conversation_id=conversation_id)
            cited = citations_for(tenant=api_key.tenant,
                                  message_ids=[m.pk for m in messages if m.role == Message.Role.ASSISTANT])
            calls = rest_fields(messages)
            return [_message(m, cited.get(str(m.pk)), calls.get(str(m.pk))) for m in messages]

        return JsonResponse({"object": "list", "data": await pooled_sync_to_async(transcript)()})

    async def post_async(self, request, conversation_id):
        api_key = await self.authenticate(request)
        body = self.json_body(request)
        refuse_unknown(body, s.PostMessageSerializer)
        data = self.validate(s.PostMessageSerializer, body)
        # Reads the tenant's repetition control (tandem.repetition): the database.
        sampling = await pooled_sync_to_async(sampling_for_tandem)(
            quota=api_key.tenant.quota, max_tokens=data.get("max_tokens"), temperature=data.get("temperature"),
            seed=data.get("seed"), frequency_penalty=data.get("frequency_penalty"),
            presence_penalty=data.get("presence_penalty"), top_p=data.get("top_p"),
            repetition_penalty=data.get("repetition_penalty"))

        sub = await pooled_sync_to_async(submit_or_raise)(
            api_key=api_key, messages=[("user", data["content"])], conversation_id=conversation_id,
            channel=Conversation.Channel.API, sampling=sampling, input_param="content",
            offer_actions=data["actions"])
        # Offered only when the tenant has an enabled action (and the request allowed it).
        follow = TurnReply if sub.assistant_message.offered_actions else Reply
        reply = follow([sub], completion_id=f"msg-{sub.assistant_message.pk}")
        if data.get("stream"):
            return await reply.stream(include_usage=True)
        return await reply.complete()


class UsageView(AsyncAPIView):
    @extend_schema(operation_id="getUsage", responses={200: s.UsageListSerializer, **ERRORS},
                   parameters=[s.UsageQuerySerializer])
    def get(self, request):
        raise NotImplementedError

    async def get_async(self, request):
        api_key = await self.authenticate(request)
        today = dt.datetime.now(dt.UTC).date()
        start = _date_param(request, "from", today - dt.timedelta(days=30))
        end = _date_param(request, "to", today)
        if start > end:
            raise ApiError(400, "'from' must not be after 'to'.", code="invalid_value", param="from")
        if (end - start).days > 366:
            raise ApiError(400, "The range may span at most 366 days.", code="invalid_value", param="from")
        days = await pooled_sync_to_async(usage_daily)(tenant=api_key.tenant, start=start, end=end)
        return JsonResponse({"object": "list", "data": days,
                             "refused_today": await pooled_sync_to_async(_refused_today)(api_key.tenant)})


def _refused_today(tenant) -> dict[str, int]:
    """What admission refused today and why (a widget flood shows here); {} when Redis
    cannot be read."""
    try:
        return quotas.usage_snapshot(get_redis(), tenant_id=tenant.pk,
                                     limits=quotas.QuotaLimits.from_quota(tenant.quota))["refused_today"]
    except redis.RedisError:
        return {}


def _date_param(request, name: str, default: dt.date) -> dt.date:
    raw = request.GET.get(name)
    if not raw:
        return default
    try:
        return dt.date.fromisoformat(raw)
    except ValueError:
        raise ApiError(400, f"'{name}' must be a date like 2026-01-31.", code="invalid_value", param=name) from None
