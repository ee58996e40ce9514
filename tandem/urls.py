from django.contrib import admin
from django.urls import include, path

from tandem import ops
from tandem.console.views.auth import admin_login

urlpatterns = [
    # Answered by ops.OpsMiddleware before host validation; named here for reverse().
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics_view, name="metrics"),
    path("admin/login/", admin_login),  # the console's throttled sign-in
    path("admin/", admin.site.urls),
    path("", include("tandem.chat.urls")),
    path("", include("tandem.attachments.urls")),
    path("", include("tandem.api.urls")),
    path("", include("tandem.console.urls")),
]
