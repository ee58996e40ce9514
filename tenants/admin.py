from django.contrib import admin

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
    list_display = ("slug", "name", "is_active", "created_at")
    search_fields = ("slug", "name")
    inlines = [QuotaInline, AllocationInline]

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        services.tenant_ensure_setup(tenant=form.instance)  # inlines left empty save nothing


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
