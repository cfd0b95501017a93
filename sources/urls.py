from __future__ import annotations

from django.urls import path

from sources import views

app_name = "sources"
urlpatterns = [
    path("", views.source_list, name="list"),
    path("upload", views.source_upload_view, name="upload"),
    path("<int:source_id>/", views.source_detail, name="detail"),
    path("<int:source_id>/download", views.source_download, name="download"),
    path("<int:source_id>/original", views.source_original, name="original"),
    path("<int:source_id>/delete", views.source_delete_view, name="delete"),
]
