from django.contrib import admin

from .models import Conversation, Message


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    fields = ("role", "content", "status", "completion_tokens", "finish_reason")


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("id", "tenant", "channel", "status", "user_id", "user_verified", "updated_at")
    list_filter = ("tenant", "channel", "user_verified")
    search_fields = ("visitor_id", "user_id", "user_email")
    inlines = [MessageInline]
