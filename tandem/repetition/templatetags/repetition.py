"""`{% repetition_of tenant as repetition %}`: the tenant's repetition control as its
replies use it (the defaults when it has no row), for pages that show it beside others."""

from __future__ import annotations

from django import template

from ..selectors import repetition_get

register = template.Library()


@register.simple_tag
def repetition_of(tenant):
    return repetition_get(tenant_id=tenant.pk)
