from __future__ import annotations

from django.urls import path

from generation.querylog import views

# Not namespaced: the navigation bar looks up "querylog".
urlpatterns = [
    path("query-log/", views.querylog_list, name="querylog"),
    path("query-log/export.csv", views.querylog_csv, name="querylog-csv"),
    path("query-log/<int:query_id>/", views.querylog_detail, name="querylog-detail"),
    path("query-log/<int:query_id>/feedback", views.querylog_feedback, name="querylog-feedback"),
    path("dashboard/", views.dashboard, name="dashboard"),
]
