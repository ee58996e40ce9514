"""Tenant → Inbox: the conversations handed to a person, for agents, admins and owners
(Can.INBOX), and where such members land after signing in (`home_url`). Claim, assign,
reply, internal notes and resolve are POSTs to tandem.handoff.states (an htmx post gets
the actions panel back, or after resolve a redirect to the next waiting conversation),
the agent's online / away toggle to tandem.handoff.assignment (and every inbox page is a
presence heartbeat), the bulk actions on ticked conversations to tandem.handoff.bulk;
the live transcript and typing come over the agent socket (tandem.handoff.agent_socket).
The URLs are the console's (tandem/console/urls.py, names "console:inbox…"), and so are
the templates (templates/console/inbox*.html). Another tenant's conversation id is a 404
like a missing one (tandem.console.views.base.tenant_page)."""

from __future__ import annotations

import logging
from datetime import date
from urllib.parse import urlencode

from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.dateparse import parse_date
from django_htmx.http import HttpResponseClientRedirect

from tandem.chat.models import Conversation, OfflineMessage
from tandem.chat.validation import InvalidInput
from tandem.console.views.base import Obj, render_page, tenant_page
from tandem.labels import selectors as label_selectors
from tenants import membership
from tenants.access import NotFound
from tenants.membership import Can

from . import assignment, bulk, states
from . import inbox as reads
from .offline import AlreadyAnswered, offline_message_answer

CONVERSATION = {"conversation_id": Obj("conv", Conversation.objects.all(), "conversation")}
OFFLINE = {"offline_id": Obj("offline", OfflineMessage.objects.select_related("tenant"), "offline message")}
INBOX = {"read": Can.INBOX, "write": Can.INBOX}
log = logging.getLogger(__name__)


def _presence(request, access) -> dict:
    assignment.presence_seen(tenant=access.tenant, agent=request.user)
    return {"presence": assignment.presence_of(tenant=access.tenant, agent=request.user),
            "online_count": assignment.online_agents(tenant=access.tenant).count()}


def home_url(user) -> str | None:
    """Where a member whose role has the inbox lands after signing in: the inbox of their
    first such tenant (by name). None for operators and for roles without it."""
    if user.is_staff:
        return None
    for a in membership.user_tenants(user):
        if a.can(Can.INBOX):
            return reverse("console:inbox", kwargs={"slug": a.tenant.slug})
    return None


def _date(request, name: str, errors: list) -> date | None:
    raw = (request.GET.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = parse_date(raw[:20])
    except ValueError:
        value = None
    if value is None:
        errors.append(f"{'From' if name == 'since' else 'To'}: {raw[:20]!r} is not a date (YYYY-MM-DD).")
    return value


def _rows(request, access) -> tuple[dict, int]:
    """The list in the filter the query names (?view=), narrowed by the search (?q=), a
    label (?label=<id>) and the dates it was handed over (?since=, ?until=). A filter
    that is not one (an unknown view, a label of no one's, a malformed date) is a 400
    that says so, showing the list without it."""
    errors: list[str] = []
    view = request.GET.get("view") or reads.DEFAULT_VIEW
    if view not in reads.VIEWS:
        errors.append(f"Unknown filter {view[:40]!r}: choose one of {', '.join(reads.VIEWS.values())}.")
        view = reads.DEFAULT_VIEW
    label, label_id = None, request.GET.get("label") or ""
    if label_id:
        label = label_selectors.label_by_id(tenant=access.tenant, label_id=label_id)
        if label is None:
            errors.append("No such label: it may have been deleted.")
    since, until = _date(request, "since", errors), _date(request, "until", errors)
    q = (request.GET.get("q") or "").strip()[:200]
    rows = reads.inbox_list(tenant=access.tenant, agent=request.user, view=view, q=q, label=label,
                            since=since, until=until)
    filters = {"q": q, "label": label.pk if label else "", "since": since.isoformat() if since else "",
               "until": until.isoformat() if until else ""}
    keep = urlencode({k: v for k, v in filters.items() if v})  # what the view links keep
    return {"rows": rows, "view": view, "views": reads.VIEWS, "view_error": " ".join(errors),
            "filters": filters, "keep": keep, "query": f"view={view}" + (f"&{keep}" if keep else ""),
            "label": label}, 400 if errors else 200


def inbox_page(request, access, *, status: int | None = None):
    ctx, rows_status = _rows(request, access)
    return render_page(request, "console/inbox.html",
                       {**ctx, "stats": reads.handoff_stats(tenant=access.tenant),
                        "all_labels": label_selectors.label_list(tenant=access.tenant),
                        "agents": assignment.inbox_agents(tenant=access.tenant),
                        "offline": reads.offline_list(tenant=access.tenant), **_presence(request, access)},
                       access=access, nav="inbox", status=status or rows_status)


@tenant_page(methods=("GET",), **INBOX)
def inbox(request, access):
    return inbox_page(request, access)


@tenant_page(methods=("GET",), **INBOX)
def inbox_rows(request, access):
    """The list alone, which the page polls (htmx) so a new hand-over shows within a second."""
    ctx, status = _rows(request, access)
    return render_page(request, "console/partials/inbox_rows.html", {**ctx, **_presence(request, access)},
                       access=access, status=status)


@tenant_page(methods=("GET",), **INBOX)
def inbox_count(request, access):
    """How many wait for a person: the badge in the tenant's nav, polled by every console
    page of the tenant (htmx); static/console/inbox_count.js puts it in the page title."""
    return render_page(request, "console/partials/inbox_count.html",
                       {"waiting": reads.waiting_count(tenant=access.tenant)}, access=access)


@tenant_page(methods=("POST",), **INBOX)
def inbox_presence(request, access):
    """The agent's online / away toggle."""
    try:
        status = assignment.presence_set(tenant=access.tenant, agent=request.user, status=request.POST.get("status"))
    except InvalidInput as exc:
        if _wants_json(request):
            return JsonResponse({"ok": False, "detail": str(exc)}, status=400)
        messages.error(request, str(exc))
    else:
        if _wants_json(request):
            return JsonResponse({"ok": True, "status": status})
        messages.success(request, "You are online: new conversations may come to you." if status == "online"
                         else "You are away.")
    return redirect("console:inbox", slug=access.tenant.slug)


@tenant_page(methods=("GET",), objects=CONVERSATION, **INBOX)
def inbox_conversation(request, access, conv):
    return render_page(request, "console/inbox_conversation.html",
                       {**_actions_context(request, access, conv), "items": reads.inbox_transcript(conv),
                        "all_labels": label_selectors.label_list(tenant=access.tenant),
                        "current": {lb.pk for lb in conv.labels.all()},
                        "context": reads.visitor_context(conv), **_presence(request, access)},
                       access=access, nav="inbox")


def _actions_context(request, access, conv) -> dict:
    return {"conversation": conv, "visitor": reads.visitor_name(conv),
            "mine": conv.handoff == Conversation.Handoff.HUMAN and conv.assignee_id == request.user.pk,
            "agents": assignment.inbox_agents(tenant=access.tenant)}


def _htmx_answer(request, access, conv, *, action: str, status: int, text: str):
    """What an htmx post (the conversation page's buttons) gets: after a resolve, a
    redirect to the conversation that has waited longest (else the inbox), with the outcome
    as a message; otherwise the actions panel as it now stands, with the outcome in it (an
    error keeps its status; inbox.js swaps those in too)."""
    if action == "resolve" and status == 200:
        messages.success(request, text)
        nxt = reads.next_waiting(tenant=access.tenant, after=conv)
        to = (reverse("console:inbox_conversation", kwargs={"slug": access.tenant.slug, "conversation_id": nxt.pk})
              if nxt else reverse("console:inbox", kwargs={"slug": access.tenant.slug}))
        return HttpResponseClientRedirect(to)
    conv.refresh_from_db()
    return render_page(request, "console/partials/inbox_actions.html",
                       {**_actions_context(request, access, conv), "outcome": text, "failed": status != 200,
                        "oob": True}, access=access, status=status)


@tenant_page(methods=("POST",), objects=CONVERSATION, **INBOX)
def inbox_action(request, access, conv, action):
    """claim | assign | resolve | reply | note. A fetch() (the page's script) gets JSON; a plain
    form post is redirected back with a message."""
    status, text = 200, ""
    try:
        if action == "claim":
            states.conversation_claim(conversation=conv, agent=request.user)
            text = "You are answering this conversation."
        elif action == "assign":
            to = assignment.agent_get(tenant=access.tenant, user_id=request.POST.get("agent"))
            states.conversation_assign(conversation=conv, to=to, by=request.user)
            text = f"Assigned to {assignment.display_name(to)}."
        elif action == "resolve":
            if not states.conversation_resolve(conversation=conv):
                status, text = 409, "This conversation is not with a person."
            else:
                text = "Resolved: the assistant answers the visitor's next message."
        else:
            # The reply box's switch says which; a note stays a note whichever URL it reached.
            note = action == "note" or request.POST.get("mode") == "note"
            msg = states.agent_message(conversation=conv, agent=request.user,
                                       text=request.POST.get("text", ""), note=note)
            if _wants_json(request):
                return JsonResponse({"ok": True, "message": states.message_event(msg)})
    except (states.Taken, states.NotYours, states.Stale) as exc:
        status, text = 409, str(exc)
    except NotFound:
        status, text = 400, "Choose an agent of this tenant who may use the inbox."
    except InvalidInput as exc:
        status, text = 400, str(exc)
    if getattr(request, "htmx", False) and action in ("claim", "assign", "resolve"):
        return _htmx_answer(request, access, conv, action=action, status=status, text=text)
    if _wants_json(request):
        return JsonResponse({"ok": status == 200, "detail": text, "state": conv.handoff}, status=status)
    if text:
        (messages.success if status == 200 else messages.error)(request, text)
    return redirect("console:inbox_conversation", slug=access.tenant.slug, conversation_id=conv.pk)


@tenant_page(methods=("POST",), **INBOX)
def inbox_bulk_action(request, access):
    """The ticked conversations (`c`, repeated), `action` and its `label` or `agent`; back
    to the list the agent was on, with what was done (and what was not) said. Nothing
    ticked or no action is a 400, a conversation, label or agent not of this tenant a
    404, both with the inbox and the reason."""
    back = reverse("console:inbox", kwargs={"slug": access.tenant.slug})
    query = request.POST.get("back", "")
    if query.startswith("?") and "\n" not in query and len(query) < 2000:
        back += query
    try:
        done = bulk.inbox_bulk(tenant=access.tenant, by=request.user, ids=request.POST.getlist("c"),
                               action=request.POST.get("action", ""), label_id=request.POST.get("label"),
                               agent_id=request.POST.get("agent"))
    except InvalidInput as exc:
        messages.error(request, f"{exc} Nothing was changed.")
        return inbox_page(request, access, status=400)
    except NotFound as exc:
        what = str(exc).removeprefix("No such ").rstrip(".")
        messages.error(request, f"That {what} is not one of this tenant's (or no longer exists): nothing was changed.")
        return inbox_page(request, access, status=404)
    (messages.success if not done.skipped else messages.warning)(request, done.summary())
    return redirect(back)


@tenant_page(methods=("POST",), objects=OFFLINE, **INBOX)
def inbox_offline_answer(request, access, offline):
    """Answer an offline message by e-mail (tandem.handoff.offline)."""
    try:
        offline_message_answer(offline=offline, agent=request.user, text=request.POST.get("text", ""))
    except (InvalidInput, AlreadyAnswered) as exc:
        messages.error(request, str(exc))
    except Exception:  # the mail server refused or is down: nothing was sent, say so
        log.exception("answering offline message %s failed", offline.pk)
        messages.error(request, "The e-mail could not be sent; nothing was sent. Try again later.")
    else:
        messages.success(request, f"Sent to {offline.email}.")
    return redirect("console:inbox", slug=access.tenant.slug)


def _wants_json(request) -> bool:
    return "application/json" in request.headers.get("Accept", "")
