"""Writing saved replies. Bad input is an InvalidInput naming its field, which the
console shows as a form error."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction

from tandem.chat.validation import InvalidInput
from tenants.models import Tenant

from .models import SavedReply
from .templating import VARIABLES, unknown_variables

SHORTCUT = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
MAX_TEXT = 4000


def saved_reply_create(*, tenant: Tenant, shortcut: str, text: str, by=None) -> SavedReply:
    shortcut = (shortcut or "").strip().lstrip("/").lower()
    text = (text or "").strip()
    if not SHORTCUT.fullmatch(shortcut):
        raise InvalidInput("A shortcut is 1 to 32 lower-case letters, digits, - or _, such as “refund”.",
                           code="invalid_shortcut", param="shortcut")
    if not text:
        raise InvalidInput("The reply is empty.", code="empty", param="text")
    if len(text) > MAX_TEXT:
        raise InvalidInput(f"A saved reply is at most {MAX_TEXT} characters.", code="too_long", param="text")
    unknown = unknown_variables(text)
    if unknown:
        raise InvalidInput(f"Unknown variable {', '.join('{{' + u + '}}' for u in unknown)}: use one of "
                           f"{', '.join('{{' + v + '}}' for v in VARIABLES)}.", code="unknown_variable", param="text")
    try:
        with transaction.atomic():
            return SavedReply.objects.create(tenant=tenant, shortcut=shortcut, text=text, created_by=by)
    except IntegrityError:
        raise InvalidInput(f"/{shortcut} already exists.", code="duplicate", param="shortcut") from None


def saved_reply_delete(*, reply: SavedReply) -> None:
    reply.delete()
