from __future__ import annotations

from django.urls import path

from specs import views

# Not namespaced: the navigation bar looks up "generate".
urlpatterns = [
    path("generate/", views.generate, name="generate"),
]
