from django.urls import path

from . import views

urlpatterns = [
    path("widget/config", views.widget_config, name="widget-config"),
    path("demo/<slug:slug>/", views.demo_page, name="demo"),
]
