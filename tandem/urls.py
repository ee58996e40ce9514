from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("tandem.chat.urls")),
    path("", include("tandem.api.urls")),
    path("", include("tandem.console.urls")),
]
