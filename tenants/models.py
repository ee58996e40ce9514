"""Who may do what and how much: tenants, members, API keys, quotas, compute pools,
allocations and usage. Rules live in `services.py`; reads scoped to a tenant in
`selectors.py`."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

COLOR = RegexValidator(r"^#[0-9a-fA-F]{6}$", "A colour as #rrggbb.")


class Tenant(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    system_prompt = models.TextField(
        blank=True,
        default="You are a helpful, concise customer-support assistant.",
        help_text="The support persona: always the first message of every prompt.",
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    # The browser widget's look and words (GET /widget/config serves them; docs/widget.md).
    class WidgetPosition(models.TextChoices):
        RIGHT = "right", "bottom right"
        LEFT = "left", "bottom left"

    class WidgetLocale(models.TextChoices):
        AUTO = "", "the visitor's browser"
        EN = "en", "English"
        FR = "fr", "French"

    widget_title = models.CharField(max_length=80, blank=True, default="",
                                    help_text="The panel's header; the tenant's name when blank.")
    widget_color = models.CharField(max_length=7, default="#2f5bd3", validators=[COLOR],
                                    help_text="Header, launcher and the visitor's messages, as #rrggbb; "
                                              "the text on it is black or white, whichever contrasts more.")
    widget_greeting = models.CharField(max_length=500, blank=True, default="",
                                       help_text="The first message a visitor sees; a default greeting when blank.")
    widget_placeholder = models.CharField(max_length=100, blank=True, default="",
                                          help_text="The message box's placeholder; a default when blank.")
    widget_position = models.CharField(max_length=8, choices=WidgetPosition.choices, default=WidgetPosition.RIGHT)
    widget_locale = models.CharField(max_length=8, choices=WidgetLocale.choices, blank=True, default="",
                                     help_text="The widget's own strings; a page may override it.")
    identity_verification = models.BooleanField(
        default=False,
        help_text="Visitors who say who they are (Tandem.identify) must prove it: hash = "
                  "HMAC-SHA256(identity secret, user id), checked on connect and for every message.")
    # Handing a conversation to a person (docs/handoff.md). The patterns are matched by the
    # CPU tier (inference.text.handover) against each visitor message.
    handover_patterns = models.TextField(
        blank=True, default="",
        help_text="Phrases that mean \"let me talk to a person\", one regular expression a line "
                  "(case-insensitive); blank: the built-in English and French set. \"-\" alone: off.")
    handover_text = models.CharField(max_length=300, blank=True, default="",
                                     help_text="What the assistant says when it hands over; a default when blank.")
    handover_round_robin = models.BooleanField(
        default=False,
        help_text="A conversation handed over goes straight to the online agent who was assigned one "
                  "least recently, instead of waiting in the inbox for a claim.")
    handover_ungrounded = models.BooleanField(
        default=False,
        help_text="Hand over, instead of answering, when knowledge retrieval finds no passage above "
                  "its minimum score (needs knowledge on).")
    # Shared with the tenant's own servers, which compute the hash: stored as it is (an
    # HMAC needs the key itself), shown in the admin, never sent to a browser.
    identity_secret = models.CharField(max_length=64, blank=True, default="", editable=False)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        ADMIN = "admin"
        AGENT = "agent"  # answers conversations handed to a person (the console's inbox)
        VIEWER = "viewer"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="uniq_membership")]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant} ({self.role})"


class ApiKey(models.Model):
    class Kind(models.TextChoices):
        SECRET = "secret"  # sk_…: server-to-server, REST API; only its hash is stored
        WIDGET = "widget"  # pk_…: publishable, embedded in pages, limited to allowed origins

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    name = models.CharField(max_length=100, blank=True, default="")
    # SHA-256 of the whole key. Keys are 32 random bytes, so a fast hash is enough
    # (no dictionary to attack), and lookups stay one indexed query.
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=16, help_text="First characters, for display only.")
    # Publishable keys are public by design (they sit in page source), so the console
    # may show them again for the embed snippet. Secret keys never have this set.
    public_key = models.CharField(max_length=80, blank=True, default="")
    allowed_origins = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.kind}, {self.tenant})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


class Quota(models.Model):
    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="quota")
    requests_per_minute = models.PositiveIntegerField(default=60)
    tokens_per_minute = models.PositiveIntegerField(default=100_000)
    max_concurrent_streams = models.PositiveIntegerField(default=16)
    daily_token_budget = models.PositiveBigIntegerField(default=2_000_000)
    max_prompt_tokens = models.PositiveIntegerField(default=1536)
    max_output_tokens = models.PositiveIntegerField(default=512)

    def __str__(self) -> str:
        return f"quota({self.tenant})"


class ComputePool(models.Model):
    class Role(models.TextChoices):
        PREFILL = "prefill"
        DECODE = "decode"
        COLOCATED = "colocated"

    slug = models.SlugField(max_length=64)
    role = models.CharField(max_length=16, choices=Role.choices)
    device = models.CharField(max_length=64, default="cpu", help_text="e.g. cpu, cuda:0, h200")
    dedicated = models.BooleanField(default=False, help_text="Serves only tenants allocated to it.")
    max_batch = models.PositiveIntegerField(default=64)
    description = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["role", "slug"]
        constraints = [models.UniqueConstraint(fields=["slug", "role"], name="uniq_pool_slug_role")]

    def __str__(self) -> str:
        return f"{self.role}.{self.slug}"

    @property
    def queue(self) -> str:
        return f"{self.role}.{self.slug}"


class Allocation(models.Model):
    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="allocation")
    prefill_pool = models.ForeignKey(
        ComputePool, on_delete=models.PROTECT, related_name="prefill_allocations",
        limit_choices_to={"role__in": ["prefill", "colocated"]},
    )
    decode_pool = models.ForeignKey(
        ComputePool, on_delete=models.PROTECT, related_name="decode_allocations",
        limit_choices_to={"role__in": ["decode", "colocated"]},
    )
    priority = models.IntegerField(default=0, help_text="Higher is admitted first in shared pools.")
    max_decode_slots = models.PositiveIntegerField(
        default=16, help_text="Cap on this tenant's share of a shared decode pool's batch."
    )

    def __str__(self) -> str:
        return f"allocation({self.tenant})"


class UsageRecord(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="usage_records")
    api_key = models.ForeignKey(ApiKey, on_delete=models.SET_NULL, null=True, blank=True)
    message_id = models.UUIDField(unique=True, help_text="The assistant message (request id).")
    prompt_tokens = models.PositiveIntegerField(default=0)
    cached_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    ttft_ms = models.FloatField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    # The wait before the model began the prompt: CPU tier, queues, prefill batch, decode slot.
    queue_ms = models.FloatField(null=True, blank=True)
    prefill_pool = models.CharField(max_length=64, blank=True, default="")
    decode_pool = models.CharField(max_length=64, blank=True, default="")
    prefill_worker = models.CharField(max_length=200, blank=True, default="")
    decode_worker = models.CharField(max_length=200, blank=True, default="")
    finish_reason = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "created_at"])]

    def __str__(self) -> str:
        return f"usage({self.tenant}, {self.message_id})"


class AuditLog(models.Model):
    """One change to what a tenant may use or who may use it (a quota, an allocation, a
    key, a member, a pool, the tenant itself), made in the console, the admin or a
    command: who, when, and each changed field's old and new value. Written by the
    services (tenants/audit.py), never edited."""

    class Source(models.TextChoices):
        CONSOLE = "console"
        ADMIN = "admin"
        COMMAND = "command"
        SYSTEM = "system"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # The actor's name is kept beside the link, so the record still says who when the
    # user is deleted later; the tenant's slug likewise.
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="+")
    actor_name = models.CharField(max_length=150, blank=True, default="")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.SYSTEM)
    tenant = models.ForeignKey(Tenant, on_delete=models.SET_NULL, null=True, blank=True,
                               related_name="audit_records")
    tenant_slug = models.CharField(max_length=64, blank=True, default="")
    entity = models.CharField(max_length=32, help_text="quota, allocation, api_key, membership, pool, tenant")
    entity_id = models.CharField(max_length=64, blank=True, default="")
    action = models.CharField(max_length=16, help_text="create, update, delete, revoke")
    summary = models.CharField(max_length=300, blank=True, default="")
    # {"field": [old, new], ...}; values as JSON (numbers, strings, lists, null).
    changes = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_name or 'system'} {self.action} {self.entity}"


class Invitation(models.Model):
    """An owner's offer of a role in a tenant to a person named by username or e-mail.
    Nobody becomes a member without saying yes: the person accepts it from their own
    session (it is listed for the account whose username or e-mail it names), or through
    its link, where a new person sets a password. Only the link token's SHA-256 is
    stored. An invitation expires (`expires_at`), can be revoked, and every step is in
    the audit log (tenants/invitations.py)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        ACCEPTED = "accepted"
        DECLINED = "declined"
        REVOKED = "revoked"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="invitations")
    # As the owner typed it, normalised: a username (NFKC), or an e-mail address (lower case).
    identifier = models.CharField(max_length=254)
    role = models.CharField(max_length=16, choices=Membership.Role.choices, default=Membership.Role.VIEWER)
    token_hash = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    closed_at = models.DateTimeField(null=True, blank=True, help_text="When it was accepted, declined or revoked.")
    answered_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="+")

    class Meta:
        indexes = [models.Index(fields=["identifier", "status"], name="invitation_for_whom")]

    def __str__(self) -> str:
        return f"{self.identifier} → {self.tenant} ({self.role}, {self.status})"
