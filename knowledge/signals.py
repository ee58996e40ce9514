"""A tenant's retrieval settings travel in every request's spec, read by the web tier
with the tenant. A websocket keeps its tenant between messages and reads it again when
`tenants.changes` counts a change: so saving the settings counts as one."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save

from tenants import changes

from .models import KnowledgeSettings


def _on_change(sender, **kwargs):
    changes.bump()


def connect() -> None:
    uid = "knowledge.settings"
    post_save.connect(_on_change, sender=KnowledgeSettings, dispatch_uid=uid + ":save")
    post_delete.connect(_on_change, sender=KnowledgeSettings, dispatch_uid=uid + ":delete")
