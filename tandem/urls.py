from django.contrib import admin
from django.urls import include, path

from tandem.console.views.auth import admin_login

urlpatterns = [
    path("admin/login/", admin_login),  # the console's throttled sign-in
    path("admin/", admin.site.urls),
    path("", include("tandem.chat.urls")),
    path("", include("tandem.api.urls")),
    path("", include("tandem.console.urls")),
]
