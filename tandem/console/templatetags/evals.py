"""{% assistant_draft tenant as draft %}: the tenant's draft of the assistant's settings
(or None), for the Assistant page's draft panel (templates/console/evals/draft_panel.html),
which the page includes without its view knowing of drafts."""

from django import template

from tandem.evals.drafts import draft_get

register = template.Library()


@register.simple_tag
def assistant_draft(tenant):
    return draft_get(tenant=tenant) if tenant is not None else None
