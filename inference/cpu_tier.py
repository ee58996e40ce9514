"""The CPU tier: validate, build the prompt (tenant system prompt + history within the
context window), tokenize, route to the tenant's pools. No model weights here: only the
tokenizer, loaded once per worker process."""

from __future__ import annotations

import logging

from django.conf import settings

from tandem.chat.models import Message
from tenants.models import Tenant

from . import services, streams
from .engine.prompting import PromptTooLong, build_prompt
from .redis_client import get_redis
from .requests import load, save
from .routing import broker_priority
from .tokens import get_tokenizer
from .validation import InvalidInput, clean_user_text

log = logging.getLogger(__name__)


def preprocess_request(request_id: str) -> str | None:
    """Returns the queue the request went to next, or None when it ended here."""
    client = get_redis()
    spec = load(client, request_id)
    if spec is None:
        services.request_fail(request_id=request_id, code="expired", message="The request expired before it was processed.")
        return None
    if services.is_cancelled(request_id=request_id):
        services.request_fail(request_id=request_id, code="cancelled", message="Cancelled before processing.")
        return None
    msg = Message.objects.select_related("conversation").filter(pk=request_id).first()
    if msg is None or msg.is_final:
        return None  # a redelivered task for a request already finished: nothing to do
    tenant = Tenant.objects.select_related("quota").get(pk=spec.tenant_id)
    history, extra_system = [], []
    for m in Message.objects.filter(conversation_id=msg.conversation_id, created_at__lt=msg.created_at).exclude(
        role=Message.Role.ASSISTANT, status__in=[Message.Status.FAILED, Message.Status.CANCELLED]
    ).order_by("created_at"):
        if m.role == Message.Role.SYSTEM:
            extra_system.append(m.content)  # an integrator's own instructions, after the tenant's
            continue
        if m.role == Message.Role.ASSISTANT and not m.content:
            continue
        history.append({"role": m.role, "content": m.content})
    try:
        if not history or history[-1]["role"] != "user":
            raise InvalidInput("The conversation must end with a user message.")
        history[-1]["content"] = clean_user_text(history[-1]["content"])
        context_room = max(16, settings.TANDEM_MAX_CONTEXT - spec.sampling.max_tokens)
        prompt = build_prompt(
            get_tokenizer(), system_prompt="\n\n".join(p for p in [tenant.system_prompt, *extra_system] if p) or None,
            history=_alternating(history),
            max_prompt_tokens=min(tenant.quota.max_prompt_tokens, context_room),
        )
    except PromptTooLong as exc:
        services.request_fail(request_id=request_id, code="prompt_too_long", message=str(exc))
        return None
    except (InvalidInput, ValueError) as exc:
        services.request_fail(request_id=request_id, code=getattr(exc, "code", "invalid_message"), message=str(exc))
        return None
    spec.prompt_token_ids = prompt.token_ids
    spec.cache_salt = f"tenant:{tenant.pk}"
    save(client, spec)
    queue = f"colocated.{spec.prefill_pool}" if spec.colocated else f"prefill.{spec.prefill_pool}"
    from .tasks import colocated, prefill

    streams.publish(client, request_id, [streams.status_record("prefilling", f"queued on {queue}")])
    (colocated if spec.colocated else prefill).apply_async(args=[request_id], queue=queue, priority=broker_priority(spec.priority))
    return queue


def _alternating(history: list[dict]) -> list[dict]:
    """Merge consecutive messages of the same role (e.g. a user who sent two messages
    while no reply came): chat templates expect user and assistant to alternate."""
    merged: list[dict] = []
    for m in history:
        if merged and merged[-1]["role"] == m["role"]:
            merged[-1] = {"role": m["role"], "content": merged[-1]["content"] + "\n\n" + m["content"]}
        else:
            merged.append(dict(m))
    return merged
