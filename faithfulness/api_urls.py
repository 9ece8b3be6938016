from django.urls import path

from faithfulness import api

urlpatterns = [
    path("studies/<int:pk>/faithfulness-runs/", api.StudyRuns.as_view(), name="api-study-faithfulness-runs"),
    path("faithfulness-runs/<int:pk>/", api.RunDetail.as_view(), name="api-faithfulness-run"),
    path("faithfulness-runs/<int:pk>/interventions/", api.RunInterventions.as_view(),
         name="api-faithfulness-run-interventions"),
    path("studies/<int:pk>/evidence/", api.StudyEvidence.as_view(), name="api-study-evidence"),
]
