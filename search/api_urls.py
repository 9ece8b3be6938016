from django.urls import path

from search import api

urlpatterns = [
    # Takes over annotation's route of the same name and path (included first in reasonaudit/urls.py):
    # the same list, serializer and filters, plus the text query and the structured filters.
    path("studies/<int:pk>/traces/", api.SearchTraces.as_view(), name="api-study-traces"),
    path("studies/<int:pk>/cohorts/", api.StudyCohorts.as_view(), name="api-study-cohorts"),
    path("cohorts/<int:pk>/", api.CohortDetail.as_view(), name="api-cohort"),
    path("cohorts/<int:pk>/compare/", api.CohortCompare.as_view(), name="api-cohort-compare"),
    path("cohorts/<int:pk>/assignments/", api.CohortAssign.as_view(), name="api-cohort-assignments"),
    path("cohorts/<int:pk>/judge-runs/", api.CohortJudgeRuns.as_view(), name="api-cohort-judge-runs"),
    path("studies/<int:pk>/scanners/", api.StudyScanners.as_view(), name="api-study-scanners"),
    path("scanners/<int:pk>/", api.ScannerDetail.as_view(), name="api-scanner"),
    path("scanners/<int:pk>/runs/", api.ScannerRuns.as_view(), name="api-scanner-runs"),
    path("scanners/<int:pk>/sample/", api.ScannerSample.as_view(), name="api-scanner-sample"),
    path("scanners/<int:pk>/labels/", api.ScannerLabels.as_view(), name="api-scanner-labels"),
]
