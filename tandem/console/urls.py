"""The console's URLs, all under /console/ and namespaced "console". A tenant's pages
live under t/<slug>/; every id in a path is resolved through tenants.membership (see
views/base.py), which tests/console/test_idor.py checks for every pattern here."""

from django.urls import path

from .views import (
    assistant,
    audit,
    auth,
    conversations,
    hardware,
    inbox,
    invitations,
    keys,
    knowledge,
    members,
    overview,
    tenants,
)

app_name = "console"

T = "console/t/<slug:slug>/"

urlpatterns = [
    path("console/login/", auth.SignInView.as_view(), name="login"),
    path("console/logout/", auth.SignOutView.as_view(), name="logout"),
    path("console/password/", auth.PasswordChangeView.as_view(), name="password_change"),
    path("console/password/done/", auth.PasswordChangeDoneView.as_view(), name="password_change_done"),

    path("console/", overview.overview, name="overview"),
    path("console/live/", overview.overview_live, name="overview_live"),
    path("console/charts.json", overview.overview_charts, name="overview_charts"),

    path("console/tenants/", tenants.tenant_list, name="tenants"),
    path("console/tenants/rows/", tenants.tenant_list_rows, name="tenant_rows"),
    path("console/tenants/new/", tenants.tenant_create, name="tenant_create"),

    path("console/hardware/", hardware.hardware, name="hardware"),
    path("console/hardware/live/", hardware.hardware_live, name="hardware_live"),
    path("console/hardware/pools/new/", hardware.pool_create, name="pool_create"),
    path("console/hardware/pools/<int:pool_id>/", hardware.pool_edit, name="pool_edit"),

    path("console/audit/", audit.audit_all, name="audit"),

    path("console/invitations/", invitations.my_invitations, name="invitations"),
    path("console/invitations/<int:invitation_id>/accept/", invitations.invitation_accept, name="invitation_accept"),
    path("console/invitations/<int:invitation_id>/decline/", invitations.invitation_decline,
         name="invitation_decline"),
    path("console/invite/<str:token>/", invitations.invitation_link, name="invitation_link"),

    path(T, overview.tenant_overview, name="tenant"),
    path(T + "live/", overview.tenant_overview_live, name="tenant_live"),
    path(T + "charts.json", overview.tenant_charts, name="tenant_charts"),
    path(T + "active/", tenants.tenant_set_active, name="tenant_set_active"),
    path(T + "quotas/", tenants.quotas, name="quotas"),
    path(T + "allocation/", tenants.allocation, name="allocation"),
    path(T + "keys/", keys.keys, name="keys"),
    path(T + "keys/new/", keys.key_create, name="key_create"),
    path(T + "keys/<int:key_id>/revoke/", keys.key_revoke, name="key_revoke"),
    path(T + "keys/<int:key_id>/origins/", keys.key_origins, name="key_origins"),
    path(T + "assistant/", assistant.assistant, name="assistant"),
    path(T + "assistant/preview/", assistant.assistant_preview, name="assistant_preview"),
    path(T + "assistant/identity-secret/rotate/", assistant.identity_secret_rotate, name="identity_secret_rotate"),
    path(T + "knowledge/", knowledge.knowledge, name="knowledge"),
    path(T + "knowledge/rows/", knowledge.knowledge_rows, name="knowledge_rows"),
    path(T + "knowledge/new/", knowledge.article_create, name="article_create"),
    path(T + "knowledge/import/", knowledge.article_import, name="article_import"),
    path(T + "knowledge/settings/", knowledge.knowledge_settings, name="knowledge_settings"),
    path(T + "knowledge/<uuid:article_id>/", knowledge.article_edit, name="article_edit"),
    path(T + "knowledge/<uuid:article_id>/delete/", knowledge.article_delete, name="article_delete"),
    path(T + "conversations/", conversations.conversations, name="conversations"),
    path(T + "conversations/export.csv", conversations.conversations_export, {"fmt": "csv"},
         name="conversations_csv"),
    path(T + "conversations/export.json", conversations.conversations_export, {"fmt": "json"},
         name="conversations_json"),
    path(T + "conversations/<uuid:conversation_id>/", conversations.conversation_detail, name="conversation"),
    path(T + "conversations/<uuid:conversation_id>/export.csv", conversations.conversation_export,
         {"fmt": "csv"}, name="conversation_csv"),
    path(T + "conversations/<uuid:conversation_id>/export.json", conversations.conversation_export,
         {"fmt": "json"}, name="conversation_json"),
    path(T + "inbox/", inbox.inbox, name="inbox"),
    path(T + "inbox/rows/", inbox.inbox_rows, name="inbox_rows"),
    path(T + "inbox/presence/", inbox.inbox_presence, name="inbox_presence"),
    path(T + "inbox/offline/<int:offline_id>/answer/", inbox.inbox_offline_answer, name="inbox_offline_answer"),
    path(T + "inbox/<uuid:conversation_id>/", inbox.inbox_conversation, name="inbox_conversation"),
    *(path(T + f"inbox/<uuid:conversation_id>/{action}/", inbox.inbox_action, {"action": action},
           name=f"inbox_{action}") for action in ("claim", "assign", "resolve", "reply", "note")),
    path(T + "members/", members.members, name="members"),
    path(T + "members/<int:membership_id>/role/", members.member_role, name="member_role"),
    path(T + "members/<int:membership_id>/remove/", members.member_remove, name="member_remove"),
    path(T + "members/invitations/<int:invitation_id>/revoke/", members.invitation_revoke,
         name="invitation_revoke"),
    path(T + "audit/", audit.tenant_audit, name="tenant_audit"),
]
