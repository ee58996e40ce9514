"""The web tier's record of how a reply goes, as the pipeline reports it
(`inference.pipeline.contracts.ReplySink`, registered in ChatConfig.ready): the
assistant message's status and text, and on a hand-over in words the conversation's
owner and the people watching it. Runs in whichever process reports: a CPU or model
worker, or the web process itself (a stream that timed out)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from inference.pipeline import api as pipeline
from tandem.actions import calls as action_calls
from tandem.webhooks import chat_events as webhook_events

from . import assignment, events, responder
from .models import Conversation, Message

# A message's progress, in order: a status only ever moves forward.
_PROGRESS = [Message.Status.QUEUED, Message.Status.PREFILLING, Message.Status.DECODING]
H = Conversation.Handoff


class ReplyRows:
    def reply_progressed(self, *, request_id: str, status: str) -> None:
        earlier = _PROGRESS[: _PROGRESS.index(status)]
        Message.objects.filter(pk=request_id, status__in=earlier).update(status=status)

    def reply_failed(self, *, request_id: str, error: str) -> bool:
        failed = bool(Message.objects.filter(pk=request_id, status__in=_PROGRESS).update(
            status=Message.Status.FAILED, error=error, finished_at=timezone.now()))
        if failed:
            webhook_events.reply_failed(request_id=request_id, code=error)
        return failed

    def reply_finished(self, *, request_id: str, outcome: pipeline.ReplyOutcome) -> bool:
        o = outcome
        status = Message.Status.CANCELLED if o.finish_reason == "cancelled" else Message.Status.DONE
        finished = bool(Message.objects.filter(pk=request_id, status__in=_PROGRESS).update(
            content=o.text, status=status, prompt_tokens=o.prompt_tokens,
            completion_tokens=o.completion_tokens, finish_reason=o.finish_reason,
            ttft_ms=o.ttft_ms, duration_ms=o.duration_ms, finished_at=timezone.now(),
        ))
        if finished:
            action_calls.reply_ended(request_id=request_id, text=o.text)  # a tool call: tandem.actions
            webhook_events.reply_ended(request_id=request_id)
        return finished

    def reply_handed_over(self, *, request_id: str, text: str, reason: str) -> pipeline.HandOver | None:
        """The conversation's one edge written here (bot | resolved -> pending_human) is
        the same conditional UPDATE as tandem.chat.responder's, in the reply's transaction."""
        now = timezone.now()
        with transaction.atomic():
            updated = Message.objects.filter(pk=request_id, status__in=_PROGRESS).update(
                status=Message.Status.DONE, content=text, finish_reason=pipeline.HANDOVER, finished_at=now)
            if not updated:
                return None
            conversation_id = Message.objects.filter(pk=request_id).values_list("conversation_id", flat=True).first()
            # The evaluation harness's conversations (tandem.evals.ask) keep the hand-over on
            # the reply alone: they are tests, nobody waits for a person there.
            moved = Conversation.objects.filter(pk=conversation_id, handoff__in=[H.BOT, H.RESOLVED]).exclude(
                visitor_id__startswith="eval:").update(
                handoff=H.PENDING_HUMAN, handoff_reason=reason, handoff_at=now, updated_at=now, assignee=None,
                claimed_at=None, first_human_reply_at=None, resolved_at=None)
            if moved:
                webhook_events.handoff_changed(tenant_id=Conversation.objects.get(pk=conversation_id).tenant_id,
                                               conversation_id=conversation_id, state=H.PENDING_HUMAN, reason=reason)
        return pipeline.HandOver(conversation_id=str(conversation_id), waits=bool(moved))

    def conversation_handed_over(self, *, conversation_id: str) -> None:
        """It waits for a person (offline when no agent is online); then to the next
        agent when the tenant assigns round-robin."""
        conversation = Conversation.objects.select_related("tenant").get(pk=conversation_id)
        client = pipeline.get_redis()
        event = assignment.state_event(state=H.PENDING_HUMAN, agent=None, tenant_id=conversation.tenant_id)
        events.publish(client, conversation_id, event,
                       inbox=(conversation.tenant_id, responder.inbox_feed_entry(conversation, event)))
        agent = assignment.assign_round_robin(conversation_id=conversation_id, tenant=conversation.tenant)
        if agent is not None:
            conversation.refresh_from_db()
            event = assignment.state_event(state=H.HUMAN, agent=agent, tenant_id=conversation.tenant_id)
            events.publish(client, conversation_id, event,
                           inbox=(conversation.tenant_id, responder.inbox_feed_entry(conversation, event)))

    def reply_state(self, *, request_id: str) -> pipeline.ReplyState | None:
        row = (Message.objects.filter(pk=request_id)
               .values_list("conversation__tenant_id", "status", "error", "finish_reason", "prompt_tokens",
                            "completion_tokens", "ttft_ms", "duration_ms").first())
        return pipeline.ReplyState(*row) if row is not None else None
