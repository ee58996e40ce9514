from django.contrib import admin, messages

from . import services
from .models import Allocation, ApiKey, ComputePool, Membership, Quota, Tenant, UsageRecord


class QuotaInline(admin.StackedInline):
    model = Quota
    can_delete = False


class AllocationInline(admin.StackedInline):
    model = Allocation
    can_delete = False


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
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
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("prefix", "kind", "tenant", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("kind",)
    # The hash is never useful to a person, and keys are issued by the service (which
    # shows the plaintext once), not typed into a form.
    exclude = ("key_hash",)
    readonly_fields = ("prefix", "public_key", "created_at", "last_used_at")

    def has_add_permission(self, request):
        return False


@admin.register(ComputePool)
class ComputePoolAdmin(admin.ModelAdmin):
    list_display = ("slug", "role", "device", "dedicated", "max_batch")


admin.site.register(Membership)


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):
    list_display = ("created_at", "tenant", "prompt_tokens", "completion_tokens", "ttft_ms",
                    "decode_pool", "decode_worker", "finish_reason")
    list_filter = ("tenant",)
