"""`{% message_attachments message %}`: a message's files in a console transcript, each
behind a fresh signed link (the page's reader was checked to be the tenant's member):
images as thumbnails, the rest as download links."""

from __future__ import annotations

from django import template

from ..models import Attachment
from ..selectors import attachment_data

register = template.Library()


@register.inclusion_tag("attachments/message_files.html")
def message_attachments(message) -> dict:
    cache = getattr(message, "_prefetched_objects_cache", {})
    rows = cache["attachments"] if "attachments" in cache else Attachment.objects.filter(message=message)
    return {"files": [attachment_data(a) for a in rows]}
