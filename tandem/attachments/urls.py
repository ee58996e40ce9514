from django.urls import path

from . import views

urlpatterns = [
    path("chat/attachments/", views.widget_upload, name="attachment-upload"),
    path("attachments/<str:token>/", views.attachment_serve, name="attachment"),
]
