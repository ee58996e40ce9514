"""Actions as a tenant's admins manage them in the console: create (the signing secret
is answered once, as the secret header's value is), update, delete; each change
audited. Keyword-only; input that cannot be used raises ActionInputError naming the
field."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.db import transaction

from tandem.webhooks.crypto import secret_encrypt
from tenants import audit
from tenants.models import Tenant

from . import definitions as d
from .models import Action

MAX_ACTIONS = 32
AUDITED = ("name", "description", "status_text", "parameters", "method", "url_template", "headers",
           "secret_header_name", "timeout_s", "who", "needs_approval", "trigger_phrases", "enabled")


@dataclass
class Saved:
    action: Action
    signing_secret: str = ""  # shown once, at creation
    secret_header_value: str = ""  # shown once, when set


def _apply(action: Action, fields: dict) -> str:
    """Validate `fields` onto `action`; returns a new secret header value ("" if none)."""
    if "name" in fields:
        action.name = d.clean_name(fields["name"])
        clash = Action.objects.filter(tenant_id=action.tenant_id, name=action.name).exclude(pk=action.pk)
        if clash.exists():
            raise d.ActionInputError("name", f"This tenant already has an action named {action.name}.")
    if "description" in fields:
        action.description = d.clean_text("description", fields["description"], max_chars=1000, required=True)
    if "status_text" in fields:
        action.status_text = d.clean_text("status_text", fields["status_text"] or "", max_chars=120)
    if "parameters" in fields:
        action.parameters = d.clean_parameters(fields["parameters"])
    if "method" in fields:
        action.method = d.clean_method(fields["method"])
    if "url_template" in fields or "parameters" in fields:
        action.url_template = d.clean_url_template(fields.get("url_template", action.url_template),
                                                   action.parameters)
    if "headers" in fields:
        action.headers = d.clean_headers(fields["headers"])
    shown = ""
    if "secret_header_name" in fields:
        name, value = d.clean_secret_header(fields["secret_header_name"], fields.get("secret_header_value"),
                                            has_value=bool(action.secret_header_encrypted))
        if name.lower() in {h.lower() for h in action.headers}:
            raise d.ActionInputError("secret_header_name", f"{name} is among the plain headers too.")
        action.secret_header_name = name
        if not name:
            action.secret_header_encrypted = ""
        elif value is not None:
            action.secret_header_encrypted, shown = secret_encrypt(value), value
    if "timeout_s" in fields:
        action.timeout_s = d.clean_timeout(fields["timeout_s"])
    if "who" in fields:
        action.who = d.clean_choice("who", fields["who"], Action.Who.choices)
    for flag in ("needs_approval", "enabled"):
        if flag in fields:
            if not isinstance(fields[flag], bool):
                raise d.ActionInputError(flag, f"{flag} is true or false.")
            setattr(action, flag, fields[flag])
    if "trigger_phrases" in fields:
        action.trigger_phrases = d.clean_phrases(fields["trigger_phrases"])
    return shown


def action_create(*, tenant: Tenant, by, **fields) -> Saved:
    for required in ("name", "description", "url_template"):
        fields.setdefault(required, "")
    if Action.objects.filter(tenant=tenant).count() >= MAX_ACTIONS:
        raise d.ActionInputError("name", f"A tenant has at most {MAX_ACTIONS} actions.")
    action = Action(tenant=tenant)
    fields.setdefault("parameters", {})
    shown = _apply(action, fields)
    signing = "acsec_" + secrets.token_urlsafe(32)
    action.signing_secret_encrypted = secret_encrypt(signing)
    with transaction.atomic():
        action.save()
        audit.record(actor=audit.Actor.console(by), tenant=tenant, entity="action", entity_id=action.pk,
                     action="create", changes={f: [None, audit.value_of(action, f)] for f in AUDITED},
                     summary=f"action {action.name} created")
    return Saved(action=action, signing_secret=signing, secret_header_value=shown)


def action_update(*, action: Action, by, **fields) -> Saved:
    before = audit.snapshot(action, AUDITED)
    shown = _apply(action, fields)
    after = audit.snapshot(action, AUDITED)
    changes = {f: [before[f], after[f]] for f in AUDITED if before[f] != after[f]}
    if shown:
        changes["secret_header_value"] = ["…", "(new value)"]  # never the value itself
    with transaction.atomic():
        action.save()
        if changes:
            audit.record(actor=audit.Actor.console(by), tenant=action.tenant, entity="action", entity_id=action.pk,
                         action="update", changes=changes, summary=f"action {action.name} changed")
    return Saved(action=action, secret_header_value=shown)


def action_delete(*, action: Action, by) -> None:
    with transaction.atomic():
        audit.record(actor=audit.Actor.console(by), tenant=action.tenant, entity="action", entity_id=action.pk,
                     action="delete", changes={}, summary=f"action {action.name} deleted")
        action.delete()
