"""The console's URLs, all under /console/ and namespaced "console". A tenant's pages
live under t/<slug>/; every id in a path is resolved through tenants.membership (see
views/base.py), which tests/console/test_idor.py checks for every pattern here."""

from django.urls import path

from tandem import url_converters  # noqa: F401 - registers <id:…>, used below
from tandem.actions import urls as actions_urls
from tandem.attachments import console as attachments_console
from tandem.contacts import views as contacts
from tandem.handoff import views as inbox
from tandem.hours import views as hours
from tandem.repetition import views as repetition

from . import eval_urls
from .views import (
    assistant,
    audit,
    auth,
    conversations,
    hardware,
    inbox_labels,
    install,
    invitations,
    keys,
    knowledge,
    knowledge_retrieval,
    knowledge_sources,
    members,
    outcomes,
    overview,
    saved_replies,
    tenants,
    webhooks,
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
    path("console/hardware/pools/<id:pool_id>/", hardware.pool_edit, name="pool_edit"),

    path("console/audit/", audit.audit_all, name="audit"),

    path("console/invitations/", invitations.my_invitations, name="invitations"),
    path("console/invitations/<id:invitation_id>/accept/", invitations.invitation_accept, name="invitation_accept"),
    path("console/invitations/<id:invitation_id>/decline/", invitations.invitation_decline,
         name="invitation_decline"),
    path("console/invite/<str:token>/", invitations.invitation_link, name="invitation_link"),

    path(T, overview.tenant_overview, name="tenant"),
    path(T + "usage/", overview.tenant_usage, name="tenant_usage"),
    path(T + "live/", overview.tenant_overview_live, name="tenant_live"),
    path(T + "charts.json", overview.tenant_charts, name="tenant_charts"),
    path(T + "active/", tenants.tenant_set_active, name="tenant_set_active"),
    path(T + "quotas/", tenants.quotas, name="quotas"),
    path(T + "allocation/", tenants.allocation, name="allocation"),
    path(T + "install/", install.install, name="install"),
    path(T + "install/copied/", install.install_copied, name="install_copied"),
    path(T + "keys/", keys.keys, name="keys"),
    path(T + "keys/new/", keys.key_create, name="key_create"),
    path(T + "keys/<id:key_id>/revoke/", keys.key_revoke, name="key_revoke"),
    path(T + "keys/<id:key_id>/origins/", keys.key_origins, name="key_origins"),
    path(T + "assistant/", assistant.assistant, name="assistant"),
    path(T + "assistant/preview/", assistant.assistant_preview, name="assistant_preview"),
    path(T + "assistant/hours/", hours.business_hours, name="business_hours"),
    path(T + "assistant/repetition/", repetition.repetition, name="repetition"),
    path(T + "assistant/identity-secret/rotate/", assistant.identity_secret_rotate, name="identity_secret_rotate"),
    *eval_urls.urlpatterns,  # the assistant's draft, trial chat and evaluations (tandem.evals)
    path(T + "knowledge/", knowledge.knowledge, name="knowledge"),
    path(T + "knowledge/rows/", knowledge.knowledge_rows, name="knowledge_rows"),
    path(T + "knowledge/new/", knowledge.article_create, name="article_create"),
    path(T + "knowledge/import/", knowledge.article_import, name="article_import"),
    path(T + "knowledge/settings/", knowledge.knowledge_settings, name="knowledge_settings"),
    path(T + "knowledge/test/", knowledge_retrieval.retrieval_test, name="knowledge_test"),
    *actions_urls.patterns(T),  # tenant → Actions, and the inbox's approval cards
    path(T + "webhooks/", webhooks.endpoint_list, name="webhooks"),
    path(T + "webhooks/<uuid:endpoint_id>/", webhooks.endpoint_detail, name="webhook"),
    path(T + "webhooks/<uuid:endpoint_id>/test/", webhooks.endpoint_test, name="webhook_test"),
    path(T + "webhooks/<uuid:endpoint_id>/enable/", webhooks.endpoint_enable, name="webhook_enable"),
    path(T + "webhooks/<uuid:endpoint_id>/delete/", webhooks.endpoint_delete, name="webhook_delete"),
    path(T + "webhooks/<uuid:endpoint_id>/deliveries/<uuid:delivery_id>/resend/", webhooks.delivery_resend,
         name="webhook_resend"),
    path(T + "knowledge/sources/", knowledge_sources.source_list, name="knowledge_sources"),
    path(T + "knowledge/sources/rows/", knowledge_sources.source_list_rows, name="knowledge_source_rows"),
    path(T + "knowledge/sources/website/", knowledge_sources.website_create, name="knowledge_website_create"),
    path(T + "knowledge/sources/files/", knowledge_sources.files_create, name="knowledge_files_create"),
    path(T + "knowledge/sources/<uuid:source_id>/", knowledge_sources.source_detail, name="knowledge_source"),
    path(T + "knowledge/sources/<uuid:source_id>/progress/", knowledge_sources.source_progress,
         name="knowledge_source_progress"),
    path(T + "knowledge/sources/<uuid:source_id>/sync/", knowledge_sources.source_sync, name="knowledge_source_sync"),
    path(T + "knowledge/sources/<uuid:source_id>/delete/", knowledge_sources.source_delete,
         name="knowledge_source_delete"),
    path(T + "knowledge/sources/<uuid:source_id>/files/", knowledge_sources.source_file_add,
         name="knowledge_source_file_add"),
    path(T + "knowledge/sources/<uuid:source_id>/files/<id:file_id>/remove/", knowledge_sources.source_file_remove,
         name="knowledge_source_file_remove"),
    path(T + "knowledge/<uuid:article_id>/", knowledge.article_edit, name="article_edit"),
    path(T + "knowledge/<uuid:article_id>/delete/", knowledge.article_delete, name="article_delete"),
    path(T + "conversations/", conversations.conversations, name="conversations"),
    path(T + "outcomes/", outcomes.outcomes, name="outcomes"),
    path(T + "outcomes/export.csv", outcomes.outcomes_export, name="outcomes_csv"),
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
    path(T + "inbox/count/", inbox.inbox_count, name="inbox_count"),
    path(T + "inbox/replies/", saved_replies.saved_replies, name="saved_replies"),
    path(T + "inbox/replies/<id:saved_reply_id>/delete/", saved_replies.saved_reply_delete,
         name="saved_reply_delete"),
    path(T + "inbox/<uuid:conversation_id>/replies/", saved_replies.saved_reply_matches, name="saved_reply_matches"),
    path(T + "inbox/presence/", inbox.inbox_presence, name="inbox_presence"),
    path(T + "inbox/labels/", inbox_labels.labels, name="inbox_labels"),
    path(T + "inbox/labels/<id:label_id>/edit/", inbox_labels.label_edit, name="inbox_label_edit"),
    path(T + "inbox/labels/<id:label_id>/delete/", inbox_labels.label_delete, name="inbox_label_delete"),
    path(T + "inbox/bulk/", inbox.inbox_bulk_action, name="inbox_bulk"),
    path(T + "inbox/<uuid:conversation_id>/labels/", inbox_labels.inbox_conversation_labels,
         name="inbox_conversation_labels"),
    path(T + "inbox/offline/<id:offline_id>/answer/", inbox.inbox_offline_answer, name="inbox_offline_answer"),
    path(T + "inbox/<uuid:conversation_id>/", inbox.inbox_conversation, name="inbox_conversation"),
    *(path(T + f"inbox/<uuid:conversation_id>/{action}/", inbox.inbox_action, {"action": action},
           name=f"inbox_{action}") for action in ("claim", "assign", "resolve", "reply", "note")),
    path(T + "members/", members.members, name="members"),
    path(T + "members/<id:membership_id>/role/", members.member_role, name="member_role"),
    path(T + "members/<id:membership_id>/remove/", members.member_remove, name="member_remove"),
    path(T + "members/invitations/<id:invitation_id>/revoke/", members.invitation_revoke,
         name="invitation_revoke"),
    path(T + "audit/", audit.tenant_audit, name="tenant_audit"),
    path(T + "privacy/", contacts.privacy, name="privacy"),
    path(T + "conversations/<uuid:conversation_id>/contact/", contacts.contact_detail, name="contact"),
    path(T + "conversations/<uuid:conversation_id>/contact/export.json", contacts.contact_export,
         name="contact_export"),
    path(T + "conversations/<uuid:conversation_id>/contact/delete/", contacts.contact_delete, name="contact_delete"),
    path(T + "attachments/", attachments_console.attachment_settings, name="attachment_settings"),
    path(T + "inbox/<uuid:conversation_id>/attach/", attachments_console.inbox_attach, name="inbox_attach"),
]
