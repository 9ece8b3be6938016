from django.urls import path

from runs import api

urlpatterns = [
    path("studies/<int:pk>/runs/", api.StudyRuns.as_view(), name="api-study-runs"),
    path("runs/<int:pk>/", api.RunDetail.as_view(), name="api-run"),
    path("runs/<int:pk>/cancel/", api.RunCancel.as_view(), name="api-run-cancel"),
    path("runs/<int:pk>/retry/", api.RunRetry.as_view(), name="api-run-retry"),
]
