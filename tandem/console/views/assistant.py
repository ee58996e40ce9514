"""Tenant → Assistant: the persona, the widget's appearance and texts, identity
verification (with "Rotate identity secret", the secret shown once) and the hand-over,
one form in fieldsets; beside it a live preview of the real widget (`assistant_preview`,
an iframe of a page on Tandem's origin) drawn from the form's unsaved values."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.utils.translation.trans_real import parse_accept_lang_header
from django.views.decorators.clickjacking import xframe_options_sameorigin

from tandem.chat.widget import text_color_on, widget_i18n
from tandem.handoff import phrases as handoff_phrases
from tenants import services
from tenants.membership import Can

from ..forms import AssistantForm, apply_errors
from .base import actor, render_page, tenant_page


def _page(request, access, form, *, secret: str = "", status: int = 200):
    tenant = access.tenant
    preview_query = {name: getattr(tenant, name) for name in AssistantForm.PREVIEW_FIELDS}
    return render_page(request, "console/assistant.html",
                       {"form": form if access.can_manage else None, "secret": secret,
                        "has_secret": bool(tenant.identity_secret), "preview_query": preview_query,
                        "phrases": handoff_phrases.read(tenant.handover_patterns),
                        "builtin": handoff_phrases.builtin_rules()},
                       access=access, nav="assistant", status=status)


@tenant_page(write=Can.MANAGE)
def assistant(request, access):
    tenant = access.tenant
    form = AssistantForm(request.POST or None, initial=AssistantForm.initial_for(tenant))
    if request.method == "POST" and form.is_valid():
        had_secret = bool(tenant.identity_secret)
        try:
            saved = services.tenant_set_assistant(tenant=tenant, actor=actor(request), **form.cleaned_data)
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            if saved.identity_secret and not had_secret:
                # Made just now (verification turned on): shown in this response alone.
                access = type(access)(tenant=saved, role=access.role)
                messages.success(request, "Saved. Identity verification is on with a new secret.")
                return _page(request, access, AssistantForm(initial=AssistantForm.initial_for(saved)),
                             secret=saved.identity_secret, status=201)
            messages.success(request, "Saved. The assistant and the widget use it from the next message on "
                                      "(pages pick up the widget's settings within a minute).")
            return redirect("console:assistant", slug=tenant.slug)
    return _page(request, access, form, status=400 if form.errors else 200)


@tenant_page(write=Can.MANAGE, methods=("POST",))
def identity_secret_rotate(request, access):
    secret = services.tenant_rotate_identity_secret(tenant=access.tenant, actor=actor(request))
    messages.success(request, "The identity secret was rotated: hashes made with the old one stop working now.")
    return _page(request, access, AssistantForm(initial=AssistantForm.initial_for(access.tenant)),
                 secret=secret, status=201)


SAMPLES = {
    "en": {"question": "Hi! How long does delivery take?",
           "answer": "Orders ship within **2 business days**, and delivery takes 3 to 5 more. "
                     "Anything else I can help with?",
           "reply": "This is a preview: the assistant answers here once the widget is on your site."},
    "fr": {"question": "Bonjour ! Quel est le délai de livraison ?",
           "answer": "Les commandes partent sous **2 jours ouvrés**, puis la livraison prend 3 à 5 jours. "
                     "Puis-je vous aider pour autre chose ?",
           "reply": "Ceci est un aperçu : l'assistant répondra ici une fois le widget sur votre site."},
}


def preview_config(tenant, params, *, langs: str = "") -> dict:
    """What /widget/config would answer with `params` (the form's unsaved values) saved:
    each valid value replaces the tenant's, an invalid one is left out. The widget's
    strings are in the language a visitor with the console user's browser (`langs`,
    its Accept-Language) would get."""
    form = AssistantForm({**AssistantForm.initial_for(tenant), **{k: params[k] for k in params
                                                                  if k in AssistantForm.PREVIEW_FIELDS}})
    form.is_valid()
    values = {name: form.cleaned_data.get(name, getattr(tenant, name)) if name not in form.errors
              else getattr(tenant, name) for name in AssistantForm.PREVIEW_FIELDS}
    return {"title": values["widget_title"] or tenant.name, "color": values["widget_color"],
            "text_color": text_color_on(values["widget_color"]), "greeting": values["widget_greeting"],
            "placeholder": values["widget_placeholder"], "position": values["widget_position"],
            "locale": values["widget_locale"] or None, "identity_verification": False,
            "i18n": widget_i18n(tenant=None, locale=values["widget_locale"], langs=langs)}


@xframe_options_sameorigin
@tenant_page(methods=("GET",))
def assistant_preview(request, access):
    """The real widget bundle on a page of its own, with a stand-in for its config
    request and its socket (static/console/widget-preview.js): no key is used and no
    message reaches a worker or the tenant's quota."""
    # The browser's languages, best first, as the loader sends them from navigator.languages.
    langs = ",".join(tag for tag, _q in parse_accept_lang_header(request.headers.get("Accept-Language", "")))
    config = preview_config(access.tenant, request.GET, langs=langs)
    sample = SAMPLES.get(config["i18n"]["locale"], SAMPLES["en"])  # in the widget's language
    return render(request, "console/assistant_preview.html",
                  {"tenant": access.tenant, "config": config, "sample": sample})
