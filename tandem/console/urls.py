from django.urls import path

from . import views

urlpatterns = [path("console/", views.overview, name="console")]
