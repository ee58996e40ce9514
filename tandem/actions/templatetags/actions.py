"""`{% approval_cards tenant conversation? %}`: the inbox's box of actions awaiting a
person's approval (polled; tandem.actions.views.approvals_partial)."""

from __future__ import annotations

from django import template

register = template.Library()


@register.inclusion_tag("actions/approvals_box.html", takes_context=True)
def approval_cards(context, tenant, conversation=None):
    return {"tenant": tenant, "conversation": conversation, "next": context["request"].get_full_path()}
