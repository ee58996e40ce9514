"""Tenant → Assistant → Draft: a draft of the settings that shape a reply (system
prompt, retrieval, sampling), saved beside the live ones, tried in the trial chat and in
evaluation runs, then published by a person (audited) or discarded."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from tandem.evals import drafts
from tenants.access import NotFound
from tenants.membership import Can

from ..eval_forms import DraftForm
from .base import actor, render_page, tenant_page


def _page(request, access, form, *, status=200):
    draft = drafts.draft_get(tenant=access.tenant)
    return render_page(request, "console/evals/draft.html",
                       {"form": form if access.can_manage else None, "draft": draft,
                        "changes": [(drafts.LABELS[name], was, now) for name, (was, now)
                                    in (drafts.draft_changes(draft) if draft else {}).items()]},
                       access=access, nav="assistant", status=status)


@tenant_page(write=Can.MANAGE)
def draft(request, access):
    current = drafts.draft_get(tenant=access.tenant)
    initial = ({f: getattr(current, f) for f in drafts.FIELDS} if current else drafts.live_values(access.tenant))
    form = DraftForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            drafts.draft_save(tenant=access.tenant, user=request.user, **form.cleaned_data)
        except drafts.DraftError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        else:
            messages.success(request, "Draft saved. Try it in the chat or run the test cases with it; "
                                      "visitors still get the live settings until you publish.")
            return redirect("console:assistant_draft", slug=access.tenant.slug)
    return _page(request, access, form, status=400 if form.errors else 200)


@tenant_page(write=Can.MANAGE, methods=("POST",))
def draft_publish(request, access):
    try:
        changes = drafts.draft_publish(tenant=access.tenant, draft_id=request.POST.get("draft", ""),
                                       actor=actor(request))
    except NotFound:
        messages.error(request, "That draft is gone: it was published or discarded meanwhile.")
    except drafts.DraftError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Published: {', '.join(changes) or 'nothing changed'}. Visitors get it from "
                                  "their next message on.")
        return redirect("console:assistant", slug=access.tenant.slug)
    return redirect("console:assistant_draft", slug=access.tenant.slug)


@tenant_page(write=Can.MANAGE, methods=("POST",))
def draft_discard(request, access):
    if drafts.draft_discard(tenant=access.tenant):
        messages.success(request, "Draft discarded.")
    return redirect("console:assistant_draft", slug=access.tenant.slug)
