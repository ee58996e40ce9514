"""Ratings over REST (secret key): `POST /api/v1/messages/<id>/feedback/` (👍/👎 of a
reply, replacing an earlier one) and `GET|POST /api/v1/conversations/<id>/csat/`
(once per conversation). The rater is the conversation's own visitor: the tenant's
server relays what its user said. Thin: the rules are tandem.feedback.services'."""

from __future__ import annotations

from django.http import JsonResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema

from tandem.chat.validation import InvalidInput
from tandem.db_pool import pooled_sync_to_async
from tandem.feedback import selectors, services
from tandem.feedback.models import Csat, Feedback
from tenants.access import NotFound

from . import feedback_serializers as fs
from .base import AsyncAPIView
from .errors import ApiError
from .openai_views import ERRORS
from .request_fields import refuse_unknown

CONFLICT = {409: OpenApiResponse(description="The conversation has been rated already.")}


def _call(fn, **kwargs):
    try:
        return fn(**kwargs)
    except NotFound as exc:
        raise ApiError(404, str(exc), code=exc.code) from None
    except services.CsatAlreadyGiven as exc:
        raise ApiError(409, str(exc), code=exc.code) from None
    except InvalidInput as exc:
        raise ApiError(400, str(exc), code=exc.code, param=exc.param) from None


def _feedback(row: Feedback) -> dict:
    return {"object": "feedback", "message": str(row.message_id), "conversation": str(row.conversation_id),
            "rating": row.rating, "comment": row.comment, "updated_at": row.updated_at.isoformat()}


def _csat(row: Csat) -> dict:
    return {"object": "csat", "conversation": str(row.conversation_id), "score": row.score,
            "comment": row.comment, "answered_by": row.answered_by, "created_at": row.created_at.isoformat()}


class MessageFeedbackView(AsyncAPIView):
    @extend_schema(operation_id="rateMessage", request=fs.FeedbackRequestSerializer,
                   responses={200: fs.FeedbackSerializer, **ERRORS},
                   description="Rate one of the assistant's finished replies up or down, with an optional "
                               "comment. A second rating of the same reply replaces the first.")
    def post(self, request, message_id):
        raise NotImplementedError

    async def post_async(self, request, message_id):
        api_key = await self.authenticate(request)
        body = self.json_body(request)
        refuse_unknown(body, fs.FeedbackRequestSerializer)
        row = await pooled_sync_to_async(_call)(
            services.feedback_give, tenant=api_key.tenant, message_id=message_id,
            rating=body.get("rating"), comment=body.get("comment"))
        return JsonResponse(_feedback(row))


class ConversationCsatView(AsyncAPIView):
    @extend_schema(operation_id="getCsat", responses={200: fs.CsatSerializer, **ERRORS},
                   description="The conversation's satisfaction score; 404 `csat_not_found` while it has none.")
    def get(self, request, conversation_id):
        raise NotImplementedError

    @extend_schema(operation_id="rateConversation", request=fs.CsatRequestSerializer,
                   responses={201: fs.CsatSerializer, **ERRORS, **CONFLICT},
                   description="Score the conversation 1-5 with an optional comment; once per conversation.")
    def post(self, request, conversation_id):
        raise NotImplementedError

    async def get_async(self, request, conversation_id):
        api_key = await self.authenticate(request)
        row = await pooled_sync_to_async(_call)(selectors.csat_get, tenant=api_key.tenant,
                                                conversation_id=conversation_id)
        if row is None:
            raise ApiError(404, "This conversation has no score yet.", code="csat_not_found")
        return JsonResponse(_csat(row))

    async def post_async(self, request, conversation_id):
        api_key = await self.authenticate(request)
        body = self.json_body(request)
        refuse_unknown(body, fs.CsatRequestSerializer)
        row = await pooled_sync_to_async(_call)(
            services.csat_give, tenant=api_key.tenant, conversation_id=conversation_id,
            score=body.get("score"), comment=body.get("comment"))
        return JsonResponse(_csat(row), status=201)
