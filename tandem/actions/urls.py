"""The actions pages, under the console's tenant prefix (tandem/console/urls.py adds them
to its namespace, so the console's page and IDOR sweeps cover them)."""

from django.urls import path

from tandem import url_converters  # noqa: F401 - registers <id:…>, used below

from . import views


def patterns(prefix: str) -> list:
    return [
        path(prefix + "actions/", views.action_list, name="actions"),
        path(prefix + "actions/<id:action_id>/", views.action_detail, name="action"),
        path(prefix + "actions/<id:action_id>/delete/", views.action_delete, name="action_delete"),
        path(prefix + "approvals/", views.approvals_partial, name="action_approvals"),
        path(prefix + "approvals/<uuid:call_id>/approve/", views.call_decide, {"decision": "approve"},
             name="action_approve"),
        path(prefix + "approvals/<uuid:call_id>/deny/", views.call_decide, {"decision": "deny"},
             name="action_deny"),
    ]
