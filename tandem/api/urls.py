from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required
from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from tandem.contacts import api as contacts

from . import conversation_views as conv
from . import eval_views as ev
from . import feedback_views as fbv
from . import knowledge_source_views as ksv
from . import knowledge_views as kv
from . import openai_views as oai
from . import webhook_views as whv


def docs_view(view):
    """The API docs: open when TANDEM_API_DOCS_PUBLIC (development), else staff only
    (read at each request, so a test or a deployment's setting applies)."""
    guarded = staff_member_required(view)

    def docs(request, *args, **kwargs):
        return (view if settings.TANDEM_API_DOCS_PUBLIC else guarded)(request, *args, **kwargs)
    return docs


urlpatterns = [
    path("v1/chat/completions", oai.ChatCompletionsView.as_view()),
    path("v1/models", oai.ModelsView.as_view()),
    path("api/v1/conversations/", conv.ConversationListView.as_view()),
    path("api/v1/conversations/<str:conversation_id>/", conv.ConversationDetailView.as_view()),
    path("api/v1/conversations/<str:conversation_id>/messages/", conv.ConversationMessagesView.as_view()),
    path("api/v1/conversations/<str:conversation_id>/csat/", fbv.ConversationCsatView.as_view()),
    path("api/v1/messages/<str:message_id>/feedback/", fbv.MessageFeedbackView.as_view()),
    path("api/v1/usage/", conv.UsageView.as_view()),
    # A contact id is the site's user id or a visitor id, with any characters (a slash, a
    # line break): the export route is tried first, and nothing of it is a Django HTML 404.
    re_path(r"^api/v1/contacts/(?P<contact_id>[\s\S]+)/export/$", contacts.ContactExportView.as_view()),
    re_path(r"^api/v1/contacts/(?P<contact_id>[\s\S]+)/$", contacts.ContactDetailView.as_view()),
    path("api/v1/knowledge/articles/", kv.ArticleListView.as_view()),
    path("api/v1/knowledge/articles/import/", kv.ArticleImportView.as_view()),
    path("api/v1/knowledge/articles/<str:article_id>/", kv.ArticleDetailView.as_view()),
    path("api/v1/knowledge/settings/", kv.KnowledgeSettingsView.as_view()),
    path("api/v1/knowledge/sources/", ksv.SourceListView.as_view()),
    path("api/v1/knowledge/sources/<str:source_id>/", ksv.SourceDetailView.as_view()),
    path("api/v1/knowledge/sources/<str:source_id>/sync/", ksv.SourceSyncView.as_view()),
    path("api/v1/knowledge/sources/<str:source_id>/files/", ksv.SourceFilesView.as_view()),
    path("api/v1/knowledge/sources/<str:source_id>/files/<str:file_id>/", ksv.SourceFileDetailView.as_view()),
    path("api/v1/webhooks/", whv.EndpointListView.as_view()),
    path("api/v1/webhooks/<str:endpoint_id>/", whv.EndpointDetailView.as_view()),
    path("api/v1/webhooks/<str:endpoint_id>/test/", whv.EndpointTestView.as_view()),
    path("api/v1/webhooks/<str:endpoint_id>/deliveries/", whv.EndpointDeliveriesView.as_view()),
    path("api/v1/evals/cases/", ev.CaseListView.as_view()),
    path("api/v1/evals/cases/<str:case_id>/", ev.CaseDetailView.as_view()),
    path("api/v1/evals/runs/", ev.RunListView.as_view()),
    path("api/v1/evals/runs/<str:run_id>/", ev.RunDetailView.as_view()),
    path("api/schema/", docs_view(SpectacularAPIView.as_view()), name="schema"),
    path("api/docs/", docs_view(SpectacularSwaggerView.as_view(url_name="schema")), name="api-docs"),
]
