"""A person's decision on a call that needs one (its approval card in the agent inbox):
Approve queues it to run, Deny settles it as refused (the model is told, and answers in
text). One conditional UPDATE each, so two agents deciding at once make one decision
(the other is told who decided); both audited."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from tenants import audit
from tenants.models import Tenant

from . import lines
from .calls import publish_state
from .models import ActionCall
from .queue import call_queue

S = ActionCall.Status


class AlreadyDecided(Exception):
    code = "already_decided"

    def __init__(self, call: ActionCall):
        who = call.decided_by.get_username() if call.decided_by else "Someone"
        super().__init__(f"{who} already decided on this request ({call.get_status_display()}).")


def _decide(*, call: ActionCall, by, to: str, line: str, error: str = "") -> ActionCall:
    now = timezone.now()
    with transaction.atomic():
        won = ActionCall.objects.filter(pk=call.pk, status=S.AWAITING_APPROVAL).update(
            status=to, decided_by=by, decided_at=now, status_line=line, error=error)
        call.refresh_from_db()
        if not won:
            raise AlreadyDecided(call)
        verb = "approve" if to == S.QUEUED else "deny"
        audit.record(actor=audit.Actor.console(by), tenant=Tenant.objects.get(pk=call.tenant_id),
                     entity="action_call", entity_id=call.pk, action=verb,
                     changes={"status": [S.AWAITING_APPROVAL, to], "arguments": [None, call.arguments]},
                     summary=f"{verb} {call.name} in conversation {call.conversation_id}")
        transaction.on_commit(lambda: (publish_state(call), call_queue(str(call.pk))))
    return call


def call_approve(*, call: ActionCall, by) -> ActionCall:
    line = call.action.line if call.action else call.status_line
    return _decide(call=call, by=by, to=S.QUEUED, line=line)


def call_deny(*, call: ActionCall, by) -> ActionCall:
    return _decide(call=call, by=by, to=S.DENIED, line=lines.DENIED, error="a person declined it")
