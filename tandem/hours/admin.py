from django.contrib import admin

from .models import BusinessHours


@admin.register(BusinessHours)
class BusinessHoursAdmin(admin.ModelAdmin):
    list_display = ("tenant", "enabled", "time_zone", "updated_at")
    list_filter = ("enabled",)
