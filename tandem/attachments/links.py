"""Signed, expiring links to attachments (django.core.signing with a timestamp, read
back with max_age). A link is minted only where the reader was already checked to be a
participant of the conversation: the visitor's own socket (history, live frames) and
the tenant's console pages. Its path is relative (`/attachments/<token>/`): the widget
puts its Tandem base URL in front. A link that expired or was tampered with serves
nothing (views.attachment_serve)."""

from __future__ import annotations

from django.conf import settings
from django.core import signing
from django.urls import reverse

SALT = "tandem.attachments.link"


class LinkExpired(Exception):
    pass


class LinkInvalid(Exception):
    pass


def attachment_url(attachment_id) -> str:
    return reverse("attachment", kwargs={"token": signing.dumps(str(attachment_id), salt=SALT, compress=False)})


def attachment_id_read(token: str, *, max_age: float | None = None) -> str:
    """The attachment id a link names; LinkExpired past its age, LinkInvalid otherwise."""
    max_age = settings.TANDEM_ATTACHMENT_URL_MAX_AGE_S if max_age is None else max_age
    try:
        return signing.loads(token, salt=SALT, max_age=max_age)
    except signing.SignatureExpired:
        raise LinkExpired() from None
    except signing.BadSignature:
        raise LinkInvalid() from None
