"""A tenant's draft of the assistant's settings (models.AssistantDraft): started from the
live settings, edited, tried (eval runs, the trial chat), then published by a person
or discarded. Publishing is one audited change: the system prompt through
tenants.services.tenant_set_assistant, retrieval through knowledge.services, and an
`assistant_draft` entry in the audit log that lists every field it changed."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from knowledge import services as knowledge_services
from knowledge.selectors import settings_for
from tandem.repetition.selectors import penalties_for, repetition_get
from tandem.repetition.services import repetition_save
from tenants import audit
from tenants.access import access_list, access_owned
from tenants.audit import Actor
from tenants.models import Tenant
from tenants.services import tenant_set_assistant

from .models import AssistantDraft

FIELDS = ("system_prompt", "knowledge_enabled", "top_k", "min_score", "mode", "temperature", "frequency_penalty",
          "max_tokens")
# Sampling the live assistant has no setting of its own for (the platform's defaults and
# the tenant's quota apply): tried in drafts, not published. The frequency penalty is
# published to the tenant's repetition control (tandem.repetition).
DRAFT_ONLY = ("temperature", "max_tokens")
LABELS = {"system_prompt": "System prompt", "knowledge_enabled": "Retrieval on", "top_k": "Passages per message",
          "min_score": "Minimum score", "mode": "Retrieval mode", "temperature": "Temperature",
          "frequency_penalty": "Frequency penalty", "max_tokens": "Max reply tokens"}


class DraftError(ValueError):
    """A draft that cannot be saved or published as it is; `field` names the culprit."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


def draft_get(*, tenant: Tenant) -> AssistantDraft | None:
    return access_list(AssistantDraft, tenant=tenant).select_related("tenant").first()


def draft_get_by_id(*, tenant: Tenant, draft_id) -> AssistantDraft:
    """NotFound("draft") for another tenant's id, like a missing one."""
    return access_owned(AssistantDraft.objects.select_related("tenant"), "draft", tenant=tenant, pk=draft_id)


def live_values(tenant: Tenant) -> dict:
    """The live settings as a draft's fields."""
    k = settings_for(tenant)
    return {"system_prompt": tenant.system_prompt, "knowledge_enabled": k.enabled, "top_k": k.top_k,
            "min_score": k.min_score, "mode": k.mode, "temperature": None,
            "frequency_penalty": penalties_for(tenant_id=tenant.pk).frequency, "max_tokens": None}


def draft_save(*, tenant: Tenant, user=None, **values) -> AssistantDraft:
    """The tenant's draft with `values` (any of FIELDS; the rest as they were, or as the
    live settings are for a new draft). DraftError for a value out of range."""
    unknown = set(values) - set(FIELDS)
    if unknown:
        raise DraftError(f"Not a draft setting: {', '.join(sorted(unknown))}.", field=sorted(unknown)[0])
    max_out = tenant.quota.max_output_tokens
    if values.get("max_tokens") and values["max_tokens"] > max_out:
        raise DraftError(f"At most the tenant's maximum output tokens ({max_out}).", field="max_tokens")
    with transaction.atomic():
        draft = AssistantDraft.objects.select_for_update().filter(tenant=tenant).first()
        if draft is None:
            draft = AssistantDraft(tenant=tenant, **live_values(tenant))
        for name, value in values.items():
            setattr(draft, name, value.strip() if isinstance(value, str) else value)
        draft.updated_by = user if getattr(user, "pk", None) else None
        try:
            draft.full_clean(exclude=["tenant", "updated_by"])
        except ValidationError as exc:
            name, errors = next(iter(exc.message_dict.items()))
            raise DraftError(errors[0], field=name) from None
        draft.save()
    return draft


def draft_discard(*, tenant: Tenant) -> bool:
    return bool(access_list(AssistantDraft, tenant=tenant).delete()[0])


def draft_changes(draft: AssistantDraft) -> dict[str, list]:
    """{field: [live, draft]} for each field the draft changes."""
    live = live_values(draft.tenant)
    return {f: [live[f], getattr(draft, f)] for f in FIELDS if live[f] != getattr(draft, f)}


def draft_publish(*, tenant: Tenant, draft_id, actor: Actor) -> dict[str, list]:
    """Make the draft the live settings and delete it; what changed, {field: [old, new]}.
    Only a person does this (the console's Publish button); the audit log names them.
    A frequency penalty goes to the tenant's repetition control (its other penalties as
    they are, the control on). DraftError when the draft sets a temperature or a reply
    length: the live assistant has no such settings, so that part could not be published."""
    with transaction.atomic():
        draft = draft_get_by_id(tenant=tenant, draft_id=draft_id)
        draft = AssistantDraft.objects.select_for_update().select_related("tenant").get(pk=draft.pk)
        set_sampling = [f for f in DRAFT_ONLY if getattr(draft, f) is not None]
        if set_sampling:
            raise DraftError("Temperature and reply length are tried in drafts only: the live assistant uses the "
                             f"platform's defaults. Clear {', '.join(LABELS[f] for f in set_sampling).lower()} "
                             "to publish.", field=set_sampling[0])
        changes = draft_changes(draft)
        if "system_prompt" in changes:
            tenant_set_assistant(tenant=tenant, system_prompt=draft.system_prompt, actor=actor)
        knowledge = {name: getattr(draft, f) for f, name in (("knowledge_enabled", "enabled"), ("top_k", "top_k"),
                                                             ("min_score", "min_score"), ("mode", "mode"))
                     if f in changes}
        if knowledge:
            try:
                knowledge_services.settings_update(tenant=tenant, **knowledge)
            except knowledge_services.KnowledgeInputError as exc:
                raise DraftError(str(exc), field=exc.field) from None
        if "frequency_penalty" in changes and draft.frequency_penalty is not None:
            current = repetition_get(tenant_id=tenant.pk)
            repetition_save(tenant=tenant, actor=actor, enabled=True, frequency_penalty=draft.frequency_penalty,
                            presence_penalty=current.presence_penalty if current.enabled else 0.0,
                            repetition_penalty=current.repetition_penalty if current.enabled else 1.0)
        audit.record(actor=actor, tenant=tenant, entity="assistant_draft", entity_id=draft.pk, action="publish",
                     changes=changes, summary=f"draft of {tenant.slug}'s assistant published: "
                                              f"{', '.join(changes) or 'no change'}")
        draft.delete()
    return changes
