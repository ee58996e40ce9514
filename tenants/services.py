"""The rules about tenants and their keys. Views, consumers and commands call these;
they never write tenant models directly.

Functions are keyword-only and named `<entity>_<action>` (HackSoft style)."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from . import keys
from .models import Allocation, ApiKey, ComputePool, Quota, Tenant

DEFAULT_POOL_SLUG = "shared"


class AuthenticationFailed(Exception):
    """The key is unknown, revoked, of the wrong kind, or its tenant is inactive."""

    def __init__(self, message: str, *, code: str = "invalid_api_key"):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    plaintext: str  # shown once; never stored for secret keys


@dataclass(frozen=True)
class CreatedTenant:
    tenant: Tenant
    secret_key: IssuedKey
    widget_key: IssuedKey


def pools_ensure_defaults() -> tuple[ComputePool, ComputePool]:
    prefill, _ = ComputePool.objects.get_or_create(
        slug=DEFAULT_POOL_SLUG, role=ComputePool.Role.PREFILL,
        defaults={"description": "Default shared prefill pool."},
    )
    decode, _ = ComputePool.objects.get_or_create(
        slug=DEFAULT_POOL_SLUG, role=ComputePool.Role.DECODE,
        defaults={"description": "Default shared decode pool."},
    )
    return prefill, decode


def tenant_ensure_setup(*, tenant: Tenant) -> None:
    """Give a tenant the quota and allocation every request and the console read, with
    the defaults (the shared pools) where one is missing: a tenant added in the Django
    admin with its inline forms left untouched has neither."""
    Quota.objects.get_or_create(tenant=tenant)
    if not Allocation.objects.filter(tenant=tenant).exists():
        prefill, decode = pools_ensure_defaults()
        Allocation.objects.create(tenant=tenant, prefill_pool=prefill, decode_pool=decode)


def api_key_create(
    *, tenant: Tenant, kind: str, name: str = "", allowed_origins: list[str] | None = None
) -> IssuedKey:
    prefix = keys.SECRET_PREFIX if kind == ApiKey.Kind.SECRET else keys.WIDGET_PREFIX
    plaintext = keys.generate_key(prefix)
    api_key = ApiKey.objects.create(
        tenant=tenant,
        kind=kind,
        name=name,
        key_hash=keys.hash_key(plaintext),
        prefix=keys.display_prefix(plaintext),
        public_key=plaintext if kind == ApiKey.Kind.WIDGET else "",
        allowed_origins=list(allowed_origins or []),
    )
    return IssuedKey(api_key=api_key, plaintext=plaintext)


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


@transaction.atomic
def tenant_create(
    *,
    slug: str,
    name: str,
    system_prompt: str | None = None,
    allowed_origins: list[str] | None = None,
    quota: dict | None = None,
) -> CreatedTenant:
    fields = {"slug": slug, "name": name}
    if system_prompt is not None:
        fields["system_prompt"] = system_prompt
    tenant = Tenant.objects.create(**fields)
    Quota.objects.create(tenant=tenant, **(quota or {}))
    tenant_ensure_setup(tenant=tenant)
    secret = api_key_create(tenant=tenant, kind=ApiKey.Kind.SECRET, name="default")
    widget = api_key_create(
        tenant=tenant, kind=ApiKey.Kind.WIDGET, name="widget", allowed_origins=allowed_origins
    )
    return CreatedTenant(tenant=tenant, secret_key=secret, widget_key=widget)


@transaction.atomic
def tenant_rotate_secret_key(*, tenant: Tenant) -> IssuedKey:
    """Revoke every live secret key of the tenant and issue a new one."""
    for api_key in ApiKey.objects.select_for_update().filter(
        tenant=tenant, kind=ApiKey.Kind.SECRET, revoked_at__isnull=True
    ):
        api_key_revoke(api_key=api_key)
    return api_key_create(tenant=tenant, kind=ApiKey.Kind.SECRET, name="rotated")


# What serving a request reads with its key: the tenant, its quota, allocation and pools.
_SERVING = ("tenant__quota", "tenant__allocation__prefill_pool", "tenant__allocation__decode_pool")


def api_key_authenticate(*, plaintext: str, kind: str | None = None) -> ApiKey:
    """Return the live key for `plaintext`, or raise AuthenticationFailed.

    The lookup is by SHA-256 digest (an indexed equality, so timing does not depend on
    how many leading characters match), and the digest is compared again with
    `hmac.compare_digest` so the check itself is constant-time."""
    if not plaintext or not isinstance(plaintext, str) or len(plaintext) > 200:
        raise AuthenticationFailed("Missing or malformed API key.")
    digest = keys.hash_key(plaintext)
    api_key = ApiKey.objects.select_related(*_SERVING).filter(key_hash=digest).first()
    if api_key is None or not hmac.compare_digest(api_key.key_hash, digest):
        raise AuthenticationFailed("Incorrect API key provided.")
    _check_usable(api_key, kind=kind)
    # Touch last_used_at at most once a minute: a write per request would make the key
    # row the hottest row in the database.
    now = timezone.now()
    if api_key.last_used_at is None or (now - api_key.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key


def api_key_refresh(*, api_key: ApiKey) -> ApiKey:
    """The key read again with its tenant, for a connection that has held it a while
    (a websocket): an operator's change to the quota or allocation applies, and a key
    revoked (or a tenant deactivated) since stops working. Raises AuthenticationFailed."""
    fresh = ApiKey.objects.select_related(*_SERVING).filter(pk=api_key.pk).first()
    if fresh is None:
        raise AuthenticationFailed("This API key no longer exists.", code="revoked_api_key")
    _check_usable(fresh, kind=api_key.kind)
    return fresh


def _check_usable(api_key: ApiKey, *, kind: str | None) -> None:
    if api_key.revoked_at is not None:
        raise AuthenticationFailed("This API key has been revoked.", code="revoked_api_key")
    if not api_key.tenant.is_active:
        raise AuthenticationFailed("This tenant is inactive.", code="tenant_inactive")
    if kind is not None and api_key.kind != kind:
        raise AuthenticationFailed(f"A {kind} key is required here.", code="wrong_key_kind")


def tenant_identity_secret_rotate(*, tenant: Tenant) -> str:
    """A new identity secret: every visitor hash made with the old one stops working at
    the next connect or message. Returns the secret (the tenant's servers need it)."""
    tenant.identity_secret = keys.generate_identity_secret()
    tenant.save(update_fields=["identity_secret"])
    return tenant.identity_secret


def tenant_identity_secret_ensure(*, tenant: Tenant) -> None:
    """Identity verification needs a secret: make one when it is on and there is none."""
    if tenant.identity_verification and not tenant.identity_secret:
        tenant_identity_secret_rotate(tenant=tenant)


def identity_verified(*, tenant: Tenant, user_id: str, user_hash: str) -> bool:
    """The visitor's hash is HMAC-SHA256(tenant's identity secret, user id) (constant time)."""
    return keys.identity_hash_matches(tenant.identity_secret, user_id, user_hash)


def origin_allowed(*, api_key: ApiKey, origin: str | None) -> bool:
    """A widget key only works from the origins its tenant listed."""
    if not origin:
        return False
    normalized = origin.rstrip("/").lower()
    return any(normalized == allowed.rstrip("/").lower() for allowed in api_key.allowed_origins)
