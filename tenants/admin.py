from django.contrib import admin, messages

from . import audit, services
from .models import (
    Allocation,
    ApiKey,
    AuditLog,
    ComputePool,
    Invitation,
    Membership,
    Quota,
    Tenant,
    UsageRecord,
)

# What the audit log records of a change made here (the same fields the services log).
_AUDITED = {
    Quota: ("quota", services.QUOTA_FIELDS),
    Allocation: ("allocation", services.ALLOCATION_FIELDS),
    ApiKey: ("api_key", ("name", "allowed_origins", "revoked_at")),
    ComputePool: ("pool", services.POOL_FIELDS),
    Membership: ("membership", ("user", "tenant", "role")),
    Tenant: ("tenant", ("slug", "name", "is_active", "system_prompt", "identity_verification")),
}


def _tenant_of(obj):
    if isinstance(obj, Tenant):
        return obj
    return getattr(obj, "tenant", None)


def audit_saved(request, obj, *, created: bool, before: dict | None) -> None:
    """Log a row saved through the admin, as the services log theirs."""
    entity, fields = _AUDITED[type(obj)]
    actor = audit.Actor.admin(request.user)
    if created or before is None:
        audit.record(actor=actor, tenant=_tenant_of(obj), entity=entity, entity_id=obj.pk, action="create",
                     changes={f: [None, v] for f, v in audit.snapshot(obj, fields).items()},
                     summary=f"{entity} {obj} created in the admin")
    else:
        audit.record_change(actor=actor, tenant=_tenant_of(obj), entity=entity, instance=obj, before=before,
                            fields=fields, summary=f"{entity} {obj} changed in the admin")


def audit_deleted(request, obj) -> None:
    entity, fields = _AUDITED[type(obj)]
    audit.record(actor=audit.Actor.admin(request.user), tenant=_tenant_of(obj), entity=entity,
                 entity_id=obj.pk, action="delete",
                 changes={f: [v, None] for f, v in audit.snapshot(obj, fields).items()},
                 summary=f"{entity} {obj} deleted in the admin")


def _before(obj):
    if obj.pk is None:
        return None
    old = type(obj).objects.filter(pk=obj.pk).first()
    return audit.snapshot(old, _AUDITED[type(obj)][1]) if old is not None else None


class AuditedAdmin(admin.ModelAdmin):
    """Every save and delete made here goes to the audit log with the old and new values."""

    def save_model(self, request, obj, form, change):
        before = _before(obj)
        super().save_model(request, obj, form, change)
        audit_saved(request, obj, created=not change, before=before)

    def delete_model(self, request, obj):
        audit_deleted(request, obj)
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            audit_deleted(request, obj)
        super().delete_queryset(request, queryset)

    def save_formset(self, request, form, formset, change):
        befores = {f.instance.pk: _before(f.instance) for f in formset.forms
                   if f.instance.pk is not None and type(f.instance) in _AUDITED}
        super().save_formset(request, form, formset, change)
        for obj in formset.new_objects:
            if type(obj) in _AUDITED:
                audit_saved(request, obj, created=True, before=None)
        for obj, _ in formset.changed_objects:
            if type(obj) in _AUDITED:
                audit_saved(request, obj, created=False, before=befores.get(obj.pk))
        for obj in formset.deleted_objects:
            if type(obj) in _AUDITED:
                audit_deleted(request, obj)


class QuotaInline(admin.StackedInline):
    model = Quota
    can_delete = False


class AllocationInline(admin.StackedInline):
    model = Allocation
    can_delete = False


@admin.register(Tenant)
class TenantAdmin(AuditedAdmin):
    list_display = ("slug", "name", "is_active", "identity_verification", "created_at")
    search_fields = ("slug", "name")
    inlines = [QuotaInline, AllocationInline]
    readonly_fields = ("identity_secret",)
    actions = ["rotate_identity_secret"]
    fieldsets = [
        (None, {"fields": ("slug", "name", "system_prompt", "is_active")}),
        ("Chat widget", {
            "fields": ("widget_title", "widget_color", "widget_greeting", "widget_placeholder",
                       "widget_position", "widget_locale"),
            "description": "What the embedded widget shows (docs/widget.md). Pages may override "
                           "the position and locale with window.TandemSettings.",
        }),
        ("Identity verification", {
            "fields": ("identity_verification", "identity_secret"),
            "description": "With it on, a visitor who says who they are must send hash = "
                           "HMAC-SHA256(identity secret, user id), computed by your server; the "
                           "secret is made when you turn it on. Keep it on your server only.",
        }),
    ]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        services.tenant_identity_secret_ensure(tenant=obj)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        services.tenant_ensure_setup(tenant=form.instance)  # inlines left empty save nothing

    @admin.action(description="Generate a new identity secret (old visitor hashes stop working)")
    def rotate_identity_secret(self, request, queryset):
        for tenant in queryset:
            services.tenant_identity_secret_rotate(tenant=tenant)
        self.message_user(request, f"New identity secrets for {queryset.count()} tenant(s).",
                          messages.SUCCESS)


@admin.register(ApiKey)
class ApiKeyAdmin(AuditedAdmin):
    list_display = ("prefix", "kind", "tenant", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("kind",)
    # The hash is never useful to a person, and keys are issued by the service (which
    # shows the plaintext once), not typed into a form.
    exclude = ("key_hash",)
    readonly_fields = ("prefix", "public_key", "created_at", "last_used_at")

    def has_add_permission(self, request):
        return False


@admin.register(ComputePool)
class ComputePoolAdmin(AuditedAdmin):
    list_display = ("slug", "role", "device", "dedicated", "max_batch")


@admin.register(Membership)
class MembershipAdmin(AuditedAdmin):
    list_display = ("user", "tenant", "role", "created_at")
    list_filter = ("role",)


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    """Read only: invitations are made, answered and revoked in the console
    (tenants.invitations, audited); operators add members directly with MembershipAdmin."""

    list_display = ("created_at", "tenant", "identifier", "role", "status", "expires_at", "invited_by")
    list_filter = ("status", "role")
    search_fields = ("identifier", "tenant__slug")
    exclude = ("token_hash",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(AuditLog)
class AuditLogAdmin(admin.ModelAdmin):
    """Read only: the log is written by the services, never edited."""

    list_display = ("created_at", "actor_name", "source", "tenant_slug", "entity", "action", "summary")
    list_filter = ("entity", "source")
    search_fields = ("actor_name", "tenant_slug", "summary")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):
    list_display = ("created_at", "tenant", "prompt_tokens", "completion_tokens", "ttft_ms",
                    "decode_pool", "decode_worker", "finish_reason")
    list_filter = ("tenant",)
