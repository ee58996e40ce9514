"""The console's pages of the assistant's draft, its trial chat and the evaluation
harness (tandem.evals), added to console/urls.py's patterns under the tenant's path."""

from django.urls import path

from tandem import url_converters  # noqa: F401 - registers <id:…>, used below

from .views import assistant_draft, evals, try_assistant

T = "console/t/<slug:slug>/"

urlpatterns = [
    path(T + "assistant/draft/", assistant_draft.draft, name="assistant_draft"),
    path(T + "assistant/draft/publish/", assistant_draft.draft_publish, name="assistant_draft_publish"),
    path(T + "assistant/draft/discard/", assistant_draft.draft_discard, name="assistant_draft_discard"),
    path(T + "assistant/try/", try_assistant.try_page, name="assistant_try"),
    path(T + "assistant/try/ask/", try_assistant.try_ask, name="assistant_try_ask"),
    path(T + "assistant/try/replies/<uuid:message_id>/", try_assistant.try_reply, name="assistant_try_reply"),
    path(T + "assistant/evals/", evals.evals, name="evals"),
    path(T + "assistant/evals/cases/new/", evals.case_create, name="eval_case_create"),
    path(T + "assistant/evals/cases/<id:case_id>/", evals.case_edit, name="eval_case"),
    path(T + "assistant/evals/cases/<id:case_id>/delete/", evals.case_delete, name="eval_case_delete"),
    path(T + "assistant/evals/runs/", evals.run_start, name="eval_run_start"),
    path(T + "assistant/evals/runs/<id:run_id>/", evals.run_detail, name="eval_run"),
    path(T + "assistant/evals/runs/<id:run_id>/progress/", evals.run_progress, name="eval_run_progress"),
    path(T + "assistant/evals/compare/", evals.runs_compare, name="eval_compare"),
]
