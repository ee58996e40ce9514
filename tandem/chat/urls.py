from django.urls import path

from . import views

urlpatterns = [
    path("demo/<slug:slug>/", views.demo_page, name="demo"),
]
