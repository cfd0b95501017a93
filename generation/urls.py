from __future__ import annotations

from django.urls import path

from generation import views

# Not namespaced: the navigation bar looks up "ask".
urlpatterns = [
    path("ask/", views.ask, name="ask"),
    path("ask/stream", views.ask_stream, name="ask-stream"),
    path("ask/<int:query_id>/", views.ask_result, name="ask-result"),
    path("conversations/", views.conversation_list, name="conversations"),
    path("conversations/<int:conversation_id>/", views.conversation, name="conversation"),
    path("runs/", views.run_list, name="runs"),
    path("runs/<int:run_id>/", views.run_detail, name="run"),
    path("runs/<int:run_id>/status", views.run_status, name="run-status"),
    path("runs/<int:run_id>/download", views.run_download, name="run-download"),
]
