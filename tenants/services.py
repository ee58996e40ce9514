"""The rules about tenants and their keys. Views, consumers and commands call these;
they never write tenant models directly.

Functions are keyword-only and named `<entity>_<action>` (HackSoft style)."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from . import audit, keys
from .audit import SYSTEM, Actor
from .models import Allocation, ApiKey, ComputePool, Membership, Quota, Tenant

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
    *, tenant: Tenant, kind: str, name: str = "", allowed_origins: list[str] | None = None,
    actor: Actor = SYSTEM,
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
    audit.record(actor=actor, tenant=tenant, entity="api_key", entity_id=api_key.pk, action="create",
                 changes={"kind": [None, kind], "name": [None, name], "prefix": [None, api_key.prefix],
                          "allowed_origins": [None, api_key.allowed_origins]},
                 summary=f"{kind} key {api_key.prefix}… created")
    return IssuedKey(api_key=api_key, plaintext=plaintext)


def api_key_revoke(*, api_key: ApiKey, actor: Actor = SYSTEM) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
        audit.record(actor=actor, tenant=api_key.tenant, entity="api_key", entity_id=api_key.pk,
                     action="revoke", changes={"revoked_at": [None, api_key.revoked_at.isoformat()]},
                     summary=f"{api_key.kind} key {api_key.prefix}… revoked")
    return api_key


@transaction.atomic
def tenant_create(
    *,
    slug: str,
    name: str,
    system_prompt: str | None = None,
    allowed_origins: list[str] | None = None,
    quota: dict | None = None,
    actor: Actor = SYSTEM,
) -> CreatedTenant:
    fields = {"slug": slug, "name": name}
    if system_prompt is not None:
        fields["system_prompt"] = system_prompt
    tenant = Tenant.objects.create(**fields)
    Quota.objects.create(tenant=tenant, **(quota or {}))
    tenant_ensure_setup(tenant=tenant)
    audit.record(actor=actor, tenant=tenant, entity="tenant", entity_id=tenant.pk, action="create",
                 changes={"slug": [None, slug], "name": [None, name]}, summary=f"tenant {slug} created")
    secret = api_key_create(tenant=tenant, kind=ApiKey.Kind.SECRET, name="default", actor=actor)
    widget = api_key_create(
        tenant=tenant, kind=ApiKey.Kind.WIDGET, name="widget", allowed_origins=allowed_origins,
        actor=actor,
    )
    return CreatedTenant(tenant=tenant, secret_key=secret, widget_key=widget)


@transaction.atomic
def tenant_rotate_secret_key(*, tenant: Tenant, actor: Actor = SYSTEM) -> IssuedKey:
    """Revoke every live secret key of the tenant and issue a new one."""
    for api_key in ApiKey.objects.select_for_update().filter(
        tenant=tenant, kind=ApiKey.Kind.SECRET, revoked_at__isnull=True
    ):
        api_key_revoke(api_key=api_key, actor=actor)
    return api_key_create(tenant=tenant, kind=ApiKey.Kind.SECRET, name="rotated", actor=actor)


# --- what the console (and the admin, and commands) change, each change audited --------
#
# Each raises django.core.exceptions.ValidationError ({field: message}) for a value the
# rules refuse, which forms show beside the field; nothing is saved then.

QUOTA_FIELDS = ("requests_per_minute", "tokens_per_minute", "max_concurrent_streams",
                "daily_token_budget", "max_prompt_tokens", "max_output_tokens")
ALLOCATION_FIELDS = ("prefill_pool", "decode_pool", "priority", "max_decode_slots")
POOL_FIELDS = ("slug", "role", "device", "dedicated", "max_batch", "description")
PRIORITY_RANGE = (-100, 100)
MAX_DECODE_SLOTS = 100_000


def _full_clean(instance, *, exclude=()) -> None:
    try:
        instance.full_clean(exclude=list(exclude), validate_unique=False)
    except ValidationError as exc:
        raise ValidationError(exc.message_dict) from None


@transaction.atomic
def quota_update(*, tenant: Tenant, actor: Actor = SYSTEM, **values: int) -> Quota:
    """Set some of the tenant's limits. The save counts a change (tenants.changes), so
    the tenant's very next request is admitted against the new limits."""
    unknown = set(values) - set(QUOTA_FIELDS)
    if unknown:
        raise TypeError(f"not quota fields: {sorted(unknown)}")
    quota = Quota.objects.select_for_update().get(tenant=tenant)
    before = audit.snapshot(quota, QUOTA_FIELDS)
    for field, value in values.items():
        setattr(quota, field, value)
    _full_clean(quota, exclude=["tenant"])
    quota.save()
    audit.record_change(actor=actor, tenant=tenant, entity="quota", instance=quota, before=before,
                        fields=QUOTA_FIELDS, summary=f"quota of {tenant.slug} changed")
    return quota


def allocation_check(*, prefill_pool: ComputePool, decode_pool: ComputePool, priority: int,
                     max_decode_slots: int) -> None:
    errors: dict[str, str] = {}
    if prefill_pool.role not in (ComputePool.Role.PREFILL, ComputePool.Role.COLOCATED):
        errors["prefill_pool"] = f"{prefill_pool} is a {prefill_pool.role} pool, not a prefill or colocated one."
    if decode_pool.role not in (ComputePool.Role.DECODE, ComputePool.Role.COLOCATED):
        errors["decode_pool"] = f"{decode_pool} is a {decode_pool.role} pool, not a decode or colocated one."
    colocated = {p.role == ComputePool.Role.COLOCATED for p in (prefill_pool, decode_pool)}
    if True in colocated and prefill_pool.pk != decode_pool.pk:
        errors["decode_pool"] = "A colocated pool does prefill and decode: pick it for both."
    lo, hi = PRIORITY_RANGE
    if not lo <= priority <= hi:
        errors["priority"] = f"Priority must be between {lo} and {hi}."
    if not 1 <= max_decode_slots <= MAX_DECODE_SLOTS:
        errors["max_decode_slots"] = f"Max decode slots must be between 1 and {MAX_DECODE_SLOTS}."
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def allocation_update(
    *, tenant: Tenant, prefill_pool: ComputePool, decode_pool: ComputePool, priority: int,
    max_decode_slots: int, actor: Actor = SYSTEM,
) -> Allocation:
    """Route the tenant to other pools (a dedicated pool is just another pool here), or
    change its priority and decode-slot cap; applies to the tenant's next request."""
    allocation_check(prefill_pool=prefill_pool, decode_pool=decode_pool, priority=priority,
                     max_decode_slots=max_decode_slots)
    allocation = Allocation.objects.select_for_update().get(tenant=tenant)
    before = audit.snapshot(allocation, ALLOCATION_FIELDS)
    allocation.prefill_pool, allocation.decode_pool = prefill_pool, decode_pool
    allocation.priority, allocation.max_decode_slots = priority, max_decode_slots
    allocation.save()
    audit.record_change(actor=actor, tenant=tenant, entity="allocation", instance=allocation,
                        before=before, fields=ALLOCATION_FIELDS,
                        summary=f"allocation of {tenant.slug} changed")
    return allocation


@transaction.atomic
def pool_create(
    *, slug: str, role: str, device: str = "cpu", dedicated: bool = False, max_batch: int = 64,
    description: str = "", actor: Actor = SYSTEM,
) -> ComputePool:
    if ComputePool.objects.filter(slug=slug, role=role).exists():
        raise ValidationError({"slug": f"There is already a {role} pool called {slug}."})
    pool = ComputePool(slug=slug, role=role, device=device, dedicated=dedicated, max_batch=max_batch,
                       description=description)
    _full_clean(pool)
    if pool.max_batch < 1:
        raise ValidationError({"max_batch": "Max batch must be at least 1."})
    pool.save()
    audit.record(actor=actor, tenant=None, entity="pool", entity_id=pool.pk, action="create",
                 changes={f: [None, v] for f, v in audit.snapshot(pool, POOL_FIELDS).items()},
                 summary=f"pool {pool} created")
    return pool


@transaction.atomic
def pool_update(
    *, pool: ComputePool, device: str, dedicated: bool, max_batch: int, description: str = "",
    actor: Actor = SYSTEM,
) -> ComputePool:
    """A pool's slug and role name its workers' queue (`<role>.<slug>`), so they stay as
    created; the rest describes the pool and may change."""
    pool = ComputePool.objects.select_for_update().get(pk=pool.pk)
    before = audit.snapshot(pool, POOL_FIELDS)
    pool.device, pool.dedicated, pool.max_batch, pool.description = device, dedicated, max_batch, description
    _full_clean(pool)
    if pool.max_batch < 1:
        raise ValidationError({"max_batch": "Max batch must be at least 1."})
    pool.save()
    audit.record_change(actor=actor, tenant=None, entity="pool", instance=pool, before=before,
                        fields=POOL_FIELDS, summary=f"pool {pool} changed")
    return pool


def origins_clean(origins: list[str]) -> list[str]:
    """Normalise widget origins (`https://shop.example`, `http://localhost:8000`) and
    refuse anything that is not a bare scheme://host[:port]."""
    from urllib.parse import urlsplit

    out: list[str] = []
    for raw in origins:
        origin = raw.strip().rstrip("/").lower()
        if not origin:
            continue
        try:
            parts = urlsplit(origin)
            port_ok = parts.port is None or 0 < parts.port < 65536
        except ValueError:
            parts, port_ok = None, False
        if (parts is None or not port_ok or parts.scheme not in ("http", "https") or not parts.hostname
                or parts.path or parts.query or parts.fragment or "@" in parts.netloc):
            raise ValidationError({"allowed_origins": f"{raw.strip()!r} is not an origin: write "
                                                      "scheme://host[:port], e.g. https://shop.example"})
        if origin not in out:
            out.append(origin)
    return out


def api_key_set_origins(*, api_key: ApiKey, allowed_origins: list[str], actor: Actor = SYSTEM) -> ApiKey:
    """The pages a widget key works from. Secret keys have no origins."""
    if api_key.kind != ApiKey.Kind.WIDGET:
        raise ValidationError({"allowed_origins": "Only widget keys have allowed origins."})
    before = audit.snapshot(api_key, ("allowed_origins",))
    api_key.allowed_origins = origins_clean(allowed_origins)
    api_key.save(update_fields=["allowed_origins"])
    audit.record_change(actor=actor, tenant=api_key.tenant, entity="api_key", instance=api_key,
                        before=before, fields=("allowed_origins",),
                        summary=f"origins of widget key {api_key.prefix}… changed")
    return api_key


def tenant_set_active(*, tenant: Tenant, active: bool, actor: Actor = SYSTEM) -> Tenant:
    """A deactivated tenant's keys stop working at its next request; nothing is deleted."""
    if tenant.is_active != active:
        before = audit.snapshot(tenant, ("is_active",))
        tenant.is_active = active
        tenant.save(update_fields=["is_active"])
        audit.record_change(actor=actor, tenant=tenant, entity="tenant", instance=tenant, before=before,
                            fields=("is_active",),
                            summary=f"tenant {tenant.slug} {'activated' if active else 'deactivated'}")
    return tenant


ASSISTANT_FIELDS = ("system_prompt", "widget_title", "widget_color", "widget_greeting", "widget_placeholder",
                    "widget_position", "widget_locale", "identity_verification", "handover_patterns",
                    "handover_text", "handover_round_robin", "handover_ungrounded")


def tenant_set_assistant(*, tenant: Tenant, system_prompt: str | None = None, actor: Actor = SYSTEM,
                         **values) -> Tenant:
    """The assistant's persona (the first message of every prompt from the next one on),
    the widget's appearance and texts, identity verification and the hand-over settings:
    any of `ASSISTANT_FIELDS`, one audited change. Turning identity verification on
    makes a secret when there is none (`tenant_identity_secret_ensure`)."""
    if system_prompt is not None:
        values["system_prompt"] = system_prompt
    unknown = set(values) - set(ASSISTANT_FIELDS)
    if unknown:
        raise ValidationError(f"Not an assistant setting: {', '.join(sorted(unknown))}.")
    fields = tuple(f for f in ASSISTANT_FIELDS if f in values)
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        before = audit.snapshot(tenant, fields)
        for name in fields:
            value = values[name]
            setattr(tenant, name, value.strip() if isinstance(value, str) else value)
        _full_clean(tenant)
        tenant.save(update_fields=list(fields))
        tenant_identity_secret_ensure(tenant=tenant)
        changed = [f for f in fields if before[f] != audit.value_of(tenant, f)]
        audit.record_change(actor=actor, tenant=tenant, entity="tenant", instance=tenant, before=before,
                            fields=fields, summary=f"assistant of {tenant.slug} changed: {', '.join(changed)}")
    return tenant


def tenant_rotate_identity_secret(*, tenant: Tenant, actor: Actor = SYSTEM) -> str:
    """A new identity secret, audited (the secret itself is never logged); returns it."""
    secret = tenant_identity_secret_rotate(tenant=tenant)
    audit.record(actor=actor, tenant=tenant, entity="tenant", entity_id=tenant.pk, action="rotate",
                 summary=f"identity secret of {tenant.slug} rotated")
    return secret


def _owners_locked(tenant_id) -> list[int]:
    """The ids of the tenant's owners, their rows locked until the transaction ends, in
    id order (so two changes never deadlock). The last-owner rule counts these: two
    owners demoting (or removing) each other at once would otherwise each see the other
    still an owner, under PostgreSQL's read committed, and leave none. The second waits
    for the first to commit and then counts what it left."""
    return list(Membership.objects.select_for_update().filter(tenant_id=tenant_id, role=Membership.Role.OWNER)
                .order_by("pk").values_list("pk", flat=True))


def _locked(membership: Membership) -> Membership:
    """The membership's row, locked after its tenant's owner rows (always in that order)."""
    return (Membership.objects.select_for_update(of=("self",)).select_related("tenant", "user")
            .get(pk=membership.pk))


def _role_check(role: str) -> None:
    if role not in Membership.Role.values:
        raise ValidationError({"role": f"Role must be one of {', '.join(Membership.Role.values)}."})


def user_find(*, identifier: str):
    """A user by exact username, else by e-mail (case-insensitive; only when exactly one
    user has it)."""
    User = get_user_model()
    identifier = (identifier or "").strip()
    if not identifier:
        return None
    user = User.objects.filter(username=identifier).first()
    if user is None and "@" in identifier:
        matches = list(User.objects.filter(email__iexact=identifier)[:2])
        user = matches[0] if len(matches) == 1 else None
    return user


@transaction.atomic
def member_add(
    *, tenant: Tenant, identifier: str, role: str, actor: Actor = SYSTEM,
    create_user: bool = False, password: str | None = None,
) -> Membership:
    """Give a person (by username or e-mail) a role in the tenant. `create_user` (the
    command line's) makes the user when missing, with `password` if given (an existing
    user's password is never changed here)."""
    _role_check(role)
    user = user_find(identifier=identifier)
    if user is None and create_user:
        User = get_user_model()
        if "@" in identifier or not identifier.strip():
            raise ValidationError({"user": "Give a username to create a user."})
        user = User(username=identifier.strip())
        try:
            user.full_clean(exclude=["password"])
        except ValidationError as exc:
            raise ValidationError({"user": "; ".join(m for ms in exc.message_dict.values() for m in ms)}) from None
        if password:
            user.set_password(password)
        else:
            user.set_unusable_password()
        user.save()
    if user is None:
        raise ValidationError({"user": f"No user with the username or e-mail {identifier.strip()!r}."})
    if Membership.objects.filter(tenant=tenant, user=user).exists():
        raise ValidationError({"user": f"{user.get_username()} is already a member of {tenant.name}."})
    membership = Membership.objects.create(tenant=tenant, user=user, role=role)
    audit.record(actor=actor, tenant=tenant, entity="membership", entity_id=membership.pk, action="create",
                 changes={"user": [None, user.get_username()], "role": [None, role]},
                 summary=f"{user.get_username()} added to {tenant.slug} as {role}")
    return membership


@transaction.atomic
def member_set_role(*, membership: Membership, role: str, actor: Actor = SYSTEM) -> Membership:
    _role_check(role)
    owners = _owners_locked(membership.tenant_id)
    membership = _locked(membership)
    if membership.role == Membership.Role.OWNER and role != Membership.Role.OWNER and owners == [membership.pk]:
        raise ValidationError({"role": "A tenant keeps at least one owner: make someone else owner first."})
    before = audit.snapshot(membership, ("user", "role"))
    membership.role = role
    membership.save(update_fields=["role"])
    audit.record_change(actor=actor, tenant=membership.tenant, entity="membership", instance=membership,
                        before=before, fields=("user", "role"),
                        summary=f"role of {membership.user.get_username()} in {membership.tenant.slug} changed")
    return membership


@transaction.atomic
def member_remove(*, membership: Membership, actor: Actor = SYSTEM) -> None:
    owners = _owners_locked(membership.tenant_id)
    membership = _locked(membership)
    if membership.role == Membership.Role.OWNER and owners == [membership.pk]:
        raise ValidationError({"role": "A tenant keeps at least one owner: make someone else owner first."})
    audit.record(actor=actor, tenant=membership.tenant, entity="membership", entity_id=membership.pk,
                 action="delete", changes={"user": [membership.user.get_username(), None],
                                           "role": [membership.role, None]},
                 summary=f"{membership.user.get_username()} removed from {membership.tenant.slug}")
    membership.delete()


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
