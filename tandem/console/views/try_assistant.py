"""Tenant → Assistant → Try: a chat with the real assistant (through the pipeline, on
the tenant's pool and quota) with the draft settings or the live ones; each reply is
polled by htmx until it is final and shows the sources it cited. It spends the tenant's
quota, so it is for those who manage the tenant (admins, owners)."""

from __future__ import annotations

from tandem.chat.models import Message
from tandem.chat.services import QuotaRefused
from tandem.chat.validation import InvalidInput
from tandem.evals import drafts, trial
from tenants.access import NotFound
from tenants.membership import Can

from ..eval_forms import TryForm
from .base import Obj, render_page, tenant_page

# A trial reply of the tenant's (whose it is, the view checks: another person's is missing).
REPLY = {"message_id": Obj("reply", Message.objects.filter(role=Message.Role.ASSISTANT,
                                                          conversation__visitor_id__startswith=trial.TRY_VISITOR),
                           "message")}


@tenant_page(read=Can.MANAGE, write=Can.MANAGE, methods=("GET",))
def try_page(request, access):
    has_draft = drafts.draft_get(tenant=access.tenant) is not None
    form = TryForm(initial={"settings": "draft" if has_draft else "live"})
    return render_page(request, "console/evals/try.html", {"form": form, "has_draft": has_draft},
                       access=access, nav="assistant")


@tenant_page(write=Can.MANAGE, methods=("POST",))
def try_ask(request, access):
    """The exchange (the question and the reply, polling) appended to the chat; a
    refusal is answered in the exchange's place with its reason, status 200 so that htmx
    swaps it in."""
    form = TryForm(request.POST)
    ctx = {"question": request.POST.get("question", "")}
    if not form.is_valid():
        ctx["error"] = " ".join(e for errors in form.errors.values() for e in errors)
    else:
        try:
            msg = trial.trial_ask(tenant=access.tenant, user=request.user, question=form.cleaned_data["question"],
                                  which=form.cleaned_data["settings"],
                                  conversation_id=form.cleaned_data["conversation"])
        except (InvalidInput, QuotaRefused, NotFound) as exc:
            ctx["error"] = str(exc)
        else:
            ctx.update(msg=msg, sources=[], settings=form.cleaned_data["settings"])
    return render_page(request, "console/evals/partials/try_exchange.html", ctx, access=access)


@tenant_page(read=Can.MANAGE, write=Can.MANAGE, methods=("GET",), objects=REPLY)
def try_reply(request, access, reply):
    try:
        msg, sources = trial.trial_reply(tenant=access.tenant, user=request.user, message_id=reply.pk)
    except NotFound:
        return render_page(request, "console/evals/partials/try_reply.html", {"missing": True}, access=access,
                           status=404)
    return render_page(request, "console/evals/partials/try_reply.html", {"msg": msg, "sources": sources},
                       access=access)
