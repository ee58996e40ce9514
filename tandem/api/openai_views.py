"""The OpenAI-compatible endpoints: `POST /v1/chat/completions` and `GET /v1/models`."""

from __future__ import annotations

import dataclasses
import uuid

from django.http import JsonResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema

from inference.wire.spec import Sampling
from tandem.chat import services
from tandem.chat.models import Conversation
from tandem.chat.sampling import sampling_for_openai
from tandem.chat.validation import InvalidInput
from tandem.db_pool import pooled_sync_to_async

from . import serializers as s
from . import tool_calls
from .base import AsyncAPIView
from .errors import ApiError
from .replies import Reply, served_model_id
from .request_fields import refuse_unhonoured
from .structured import grammar_for_response_format

ERRORS = {code: OpenApiResponse(s.ErrorSerializer) for code in (400, 401, 404, 413, 429, 503)}


def submit_or_raise(*, input_param: str = "messages", **kwargs):
    """chat_submit, with its refusals turned into API errors; invalid text is reported
    against `input_param`, the request's own field that carried it."""
    try:
        return services.chat_submit(**kwargs)
    except InvalidInput as exc:
        raise ApiError(400, str(exc), code=exc.code, param=input_param) from None
    except services.NotFound as exc:
        raise ApiError(404, str(exc), code=exc.code) from None
    except services.QuotaRefused as exc:
        adm = exc.admission
        status = adm.http_status
        code = "rate_limit_exceeded" if status == 429 else exc.code
        param = {"prompt_too_long": "messages", "max_tokens_too_large": "max_tokens"}.get(exc.reason or "")
        raise ApiError(status, str(exc), code=code, param=param, headers=adm.headers()) from None


class ChatCompletionsView(AsyncAPIView):
    @extend_schema(operation_id="createChatCompletion", request=s.ChatCompletionRequestSerializer,
                   responses={200: s.ChatCompletionSerializer, **ERRORS},
                   description="OpenAI-compatible chat completion. With `stream: true` the answer is "
                               "`text/event-stream` of `chat.completion.chunk` events ending with `data: [DONE]`.")
    def post(self, request):  # schema only; requests go to post_async
        raise NotImplementedError

    async def post_async(self, request):
        api_key = await self.authenticate(request)
        body = self.json_body(request)
        refuse_unhonoured(body)  # before DRF, which would drop what it does not declare
        data = self.validate(s.ChatCompletionRequestSerializer, body)
        if data["model"] != served_model_id():
            raise ApiError(404, f"The model '{data['model']}' does not exist; this deployment serves "
                                f"'{served_model_id()}'.", code="model_not_found", param="model")
        calling = tool_calls.active(data)
        sampling = sampling_for_openai(
            quota=api_key.tenant.quota, max_tokens=data.get("max_completion_tokens") or data.get("max_tokens"),
            temperature=data.get("temperature"), top_p=data.get("top_p"), seed=data.get("seed"),
            stop=data.get("stop"), top_k=data.get("top_k"), frequency_penalty=data.get("frequency_penalty"),
            presence_penalty=data.get("presence_penalty"), repetition_penalty=data.get("repetition_penalty"),
            logit_bias=data.get("logit_bias"),
            grammar=tool_calls.grammar(data) if calling else grammar_for_response_format(data.get("response_format")),
            logprobs=data.get("logprobs"), top_logprobs=data.get("top_logprobs"),
        )
        # OpenAI's "developer" role is its newer name for "system"; tool calls and results
        # are written in the prompt format of tandem.api.tool_calls.
        messages = [("system", m["content"]) if m["role"] == "developer" else tool_calls.history_text(m)
                    for m in data["messages"]]
        if calling:
            messages.insert(0, ("system", tool_calls.system_prompt(data)))
        subs = await pooled_sync_to_async(submit_choices)(
            n=data.get("n") or 1, api_key=api_key, messages=messages, channel=Conversation.Channel.API,
            visitor_id=data.get("user") or data.get("safety_identifier") or "", sampling=sampling,
        )
        reply = Reply(subs, completion_id=f"chatcmpl-{uuid.UUID(str(subs[0].assistant_message.pk)).hex}",
                      tools=calling, logprobs=bool(data.get("logprobs")))
        if data.get("stream"):
            include_usage = bool((data.get("stream_options") or {}).get("include_usage"))
            return await reply.stream(include_usage=include_usage)
        return await reply.complete()


def submit_choices(*, n: int, sampling: Sampling, **kwargs) -> list[services.Submission]:
    """The `n` choices of one request: the same prompt submitted n times, each a reply of
    its own. The prompts are identical under the tenant's cache salt (a REST prompt's),
    so their KV is computed once: in one prefill forward when they meet there, through
    the prefix cache when they do not (docs/api.md). A seeded request's choice i draws
    from seed + i, so that the choices differ as OpenAI's do. A refusal of any choice
    cancels the ones before it."""
    subs: list[services.Submission] = []
    try:
        for i in range(n):
            seed = sampling.seed if sampling.seed is None or not i else _wrap_seed(sampling.seed + i)
            subs.append(submit_or_raise(sampling=dataclasses.replace(sampling, seed=seed), **kwargs))
    except BaseException:
        for sub in subs:
            services.chat_cancel(tenant=sub.api_key.tenant, message_id=sub.assistant_message.pk)
        raise
    return subs


def _wrap_seed(seed: int) -> int:
    return seed if seed <= s.SEED_MAX else seed - 2**64


class ModelsView(AsyncAPIView):
    @extend_schema(operation_id="listModels", responses={200: s.ModelListSerializer, 401: ERRORS[401]})
    def get(self, request):  # schema only
        raise NotImplementedError

    async def get_async(self, request):
        await self.authenticate(request)
        return JsonResponse({"object": "list", "data": [
            {"id": served_model_id(), "object": "model", "created": 0, "owned_by": "tandem"}]})
