"""The inbox's bulk actions: several conversations ticked in the list, then one action
for all of them (add a label, resolve, assign to an agent). Each conversation goes
through the same service as its own page's button (tandem.handoff.states,
tandem.labels.services), so a bulk action is never a way around a rule; what one of them
refuses (taken meanwhile, not with a person) is counted and said, not hidden."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from tandem.chat.models import Conversation
from tandem.chat.validation import InvalidInput
from tandem.labels import selectors as label_selectors
from tandem.labels import services as label_services
from tenants.access import NotFound, access_list
from tenants.models import Tenant

from . import assignment, states

ACTIONS = ("label", "resolve", "assign")
MAX_BULK = 100  # the inbox shows at most this many


@dataclass
class BulkOutcome:
    action: str
    done: int = 0
    skipped: list[str] = field(default_factory=list)  # why each refused one was left alone

    def summary(self) -> str:
        verb = {"label": "Labelled", "resolve": "Resolved", "assign": "Assigned"}[self.action]
        text = f"{verb} {self.done} conversation{'' if self.done == 1 else 's'}."
        if self.skipped:
            text += f" {len(self.skipped)} left as they were: " + "; ".join(sorted(set(self.skipped)))
        return text


def _conversations(tenant: Tenant, ids: list[str]) -> list[Conversation]:
    if not ids:
        raise InvalidInput("Tick at least one conversation.", code="none_selected", param="c")
    if len(ids) > MAX_BULK:
        raise InvalidInput(f"At most {MAX_BULK} conversations at once.", code="too_many", param="c")
    try:
        wanted = {uuid.UUID(str(i)) for i in ids}
    except ValueError:
        raise NotFound("conversation") from None
    found = list(access_list(Conversation, tenant=tenant).filter(pk__in=wanted).select_related("assignee", "tenant"))
    if len(found) != len(wanted):
        raise NotFound("conversation")
    return found


def inbox_bulk(*, tenant: Tenant, by, ids: list[str], action: str, label_id=None, agent_id=None) -> BulkOutcome:
    """Raises InvalidInput (no action, nothing ticked) or NotFound (a conversation, label
    or agent that is not this tenant's)."""
    if action not in ACTIONS:
        raise InvalidInput("Choose what to do with the ticked conversations.", code="invalid_action", param="action")
    convs = _conversations(tenant, ids)
    out = BulkOutcome(action)
    if action == "label":
        label = label_selectors.label_by_id(tenant=tenant, label_id=label_id)
        if label is None:
            raise NotFound("label")
        label_services.labels_add(label=label, conversations=convs)
        out.done = len(convs)
    elif action == "resolve":
        for c in convs:
            if states.conversation_resolve(conversation=c):
                out.done += 1
            else:
                out.skipped.append("not with a person")
    else:
        to = assignment.agent_get(tenant=tenant, user_id=agent_id)  # NotFound for anyone else
        for c in convs:
            try:
                states.conversation_assign(conversation=c, to=to, by=by)
                out.done += 1
            except states.Stale:
                out.skipped.append("reassigned meanwhile" if c.with_person else "not with a person")
    return out
