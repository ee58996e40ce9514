"""Who is on the other end of a widget socket, and which conversations are theirs.

A visitor is an id the server issued and signed (`visitor_token_issue`); the browser
keeps the token and sends it back, and a token that does not verify gets a new id, so a
client can neither pick another visitor's id nor invent ids of its own. A site may also say which of its users the
visitor is (`Tandem.identify({id, hash})`). With the tenant's identity verification on,
that claim needs hash = HMAC-SHA256(identity secret, user id): it is checked when the
socket connects and again for every message, against the tenant as it is then (a new
secret, or verification turned on, applies to the very next message), and a verified
user owns their conversations on any device. With it off, the user's id, name and email
are kept on the conversation as the visitor's own unverified words, and the
conversation still belongs to the anonymous visitor id alone.

Unlike Chatwoot, which checks the hash once when the user is set and then accepts
messages without it, nothing here is stored for a claim that does not verify."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.core import signing
from django.db.models import QuerySet

from tenants.models import Tenant
from tenants.services import identity_verified

MAX_ID, MAX_NAME, MAX_EMAIL = 128, 200, 254
MAX_PAGE_URL, MAX_USER_AGENT = 2000, 400


class IdentityRefused(Exception):
    code = "identity_verification_failed"

    def __init__(self):
        super().__init__("This visitor's identity could not be verified: the user hash does not "
                         "match the user id (HMAC-SHA256 with the tenant's identity secret).")


@dataclass(frozen=True)
class Visitor:
    visitor_id: str = ""
    user_id: str = ""
    user_hash: str = ""
    name: str = ""
    email: str = ""
    verified: bool = False
    # Where the socket's page is and what browser it runs in, as the page said: shown to
    # agents (the inbox's side panel), never part of who the visitor is.
    page_url: str = field(default="", compare=False)
    user_agent: str = field(default="", compare=False)

    def owns(self, conversations: QuerySet) -> QuerySet:
        """`conversations` (a Conversation or Message queryset) narrowed to this visitor's:
        widget conversations only (never one made through the REST API), and never any for
        a visitor with no id."""
        prefix = "conversation__" if conversations.model._meta.model_name == "message" else ""
        conversations = conversations.filter(**{f"{prefix}channel": "widget"})
        if self.verified:
            return conversations.filter(**{f"{prefix}user_verified": True, f"{prefix}user_id": self.user_id})
        if not self.visitor_id:
            return conversations.none()
        return conversations.filter(**{f"{prefix}user_verified": False, f"{prefix}visitor_id": self.visitor_id})

    @property
    def subject(self) -> str:
        """Who the per-visitor limits count: the verified user, or the visitor id."""
        return f"user:{self.user_id}" if self.verified else f"visitor:{self.visitor_id}"

    def conversation_fields(self) -> dict:
        """What a new conversation of this visitor records about them."""
        return {"visitor_id": self.visitor_id, "user_id": self.user_id, "user_verified": self.verified,
                "user_name": self.name, "user_email": self.email, "page_url": self.page_url,
                "user_agent": self.user_agent}


def _signer(tenant: Tenant) -> signing.Signer:
    return signing.Signer(salt=f"tandem.chat.visitor:{tenant.pk}")


def visitor_token_issue(*, tenant: Tenant) -> tuple[str, str]:
    """A new visitor id and the signed token the browser keeps for it."""
    visitor_id = uuid.uuid4().hex
    return visitor_id, visitor_token_for(tenant=tenant, visitor_id=visitor_id)


def visitor_token_for(*, tenant: Tenant, visitor_id: str) -> str:
    """The signed token of an existing visitor id (tests, and ids issued before signing)."""
    return _signer(tenant).sign(visitor_id)


def visitor_token_read(*, tenant: Tenant, token: str) -> str | None:
    """The visitor id a token was issued for by this tenant's widget, or None."""
    try:
        return _signer(tenant).unsign(token or "") or None
    except signing.BadSignature:
        return None


def page_context(*, page_url: str = "", user_agent: str = "") -> dict:
    """The page a socket says it is on (an http(s) URL, else nothing: it becomes a link
    in the console), without its query or fragment (a site's pages may carry a visitor's
    tokens there), and its browser's User-Agent, cut to their columns."""
    try:
        parts = urlsplit((page_url or "").strip())
        page_url = parts._replace(query="", fragment="").geturl()
        ok = parts.scheme in ("http", "https") and bool(parts.netloc) and len(page_url) <= MAX_PAGE_URL
    except ValueError:
        ok = False
    return {"page_url": page_url if ok else "", "user_agent": (user_agent or "")[:MAX_USER_AGENT]}


def visitor_establish(*, tenant: Tenant, visitor_id: str = "", user_id: str = "", user_hash: str = "",
                      name: str = "", email: str = "", page_url: str = "", user_agent: str = "") -> Visitor:
    """The visitor a socket speaks for, from what its page sent; raises IdentityRefused
    when the tenant verifies identities and the claimed user's hash is wrong or missing.
    Inputs longer than the columns are cut (the id before it is checked: a tenant's user
    ids are short)."""
    visitor_id, user_id = (visitor_id or "")[:MAX_ID], (user_id or "")[:MAX_ID]
    name, email = (name or "")[:MAX_NAME], (email or "")[:MAX_EMAIL]
    where = page_context(page_url=page_url, user_agent=user_agent)
    if not user_id:
        return Visitor(visitor_id=visitor_id, **where)
    verified = False
    if tenant.identity_verification:
        if not identity_verified(tenant=tenant, user_id=user_id, user_hash=user_hash or ""):
            raise IdentityRefused()
        verified = True
    return Visitor(visitor_id=visitor_id, user_id=user_id, user_hash=user_hash or "", name=name,
                   email=email, verified=verified, **where)


def visitor_recheck(*, tenant: Tenant, visitor: Visitor) -> Visitor:
    """The same claim checked again against the tenant as it is now (for every message)."""
    return visitor_establish(tenant=tenant, visitor_id=visitor.visitor_id, user_id=visitor.user_id,
                             user_hash=visitor.user_hash, name=visitor.name, email=visitor.email,
                             page_url=visitor.page_url, user_agent=visitor.user_agent)
