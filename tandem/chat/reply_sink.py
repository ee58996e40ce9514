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
from tandem.handoff import states as handoff
from tandem.webhooks import chat_events as webhook_events

from .models import Message

# A message's progress, in order: a status only ever moves forward.
_PROGRESS = [Message.Status.QUEUED, Message.Status.PREFILLING, Message.Status.DECODING]


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
        """The reply's row and the conversation's one edge written here (bot | resolved ->
        pending_human: tandem.handoff.states.handoff_by_assistant), in one transaction."""
        now = timezone.now()
        with transaction.atomic():
            updated = Message.objects.filter(pk=request_id, status__in=_PROGRESS).update(
                status=Message.Status.DONE, content=text, finish_reason=pipeline.HANDOVER, finished_at=now)
            if not updated:
                return None
            conversation_id = Message.objects.filter(pk=request_id).values_list("conversation_id", flat=True).first()
            moved = handoff.handoff_by_assistant(conversation_id=conversation_id, reason=reason, now=now)
        return pipeline.HandOver(conversation_id=str(conversation_id), waits=moved)

    def conversation_handed_over(self, *, conversation_id: str) -> None:
        handoff.announce_waiting(conversation_id=conversation_id)

    def reply_state(self, *, request_id: str) -> pipeline.ReplyState | None:
        row = (Message.objects.filter(pk=request_id)
               .values_list("conversation__tenant_id", "status", "error", "finish_reason", "prompt_tokens",
                            "completion_tokens", "ttft_ms", "duration_ms").first())
        return pipeline.ReplyState(*row) if row is not None else None
