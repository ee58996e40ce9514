"""Where attachments' bytes live: Django's storage named "attachments" in
settings.STORAGES (a local directory by default, TANDEM_ATTACHMENTS_DIR; an
S3-compatible bucket when TANDEM_ATTACHMENTS_STORAGE names a backend such as
django-storages' S3Storage: docs/attachments.md). Files are stored under a random name
in a folder per tenant; the name the person gave is kept in the database only."""

from __future__ import annotations

import uuid

from django.core.files.storage import Storage, storages

ALIAS = "attachments"


def attachment_storage() -> Storage:
    return storages[ALIAS]


def stored_name(tenant_id: int) -> str:
    return f"attachments/{tenant_id}/{uuid.uuid4().hex}"
