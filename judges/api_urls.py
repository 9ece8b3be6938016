from django.urls import path

from judges import api

urlpatterns = [
    path("studies/<int:pk>/judges/", api.StudyJudges.as_view(), name="api-study-judges"),
    path("studies/<int:pk>/judge-runs/", api.StudyJudgeRuns.as_view(), name="api-study-judge-runs"),
    path("judges/<int:pk>/", api.JudgeDetail.as_view(), name="api-judge"),
    path("judge-runs/<int:pk>/", api.JudgeRunDetail.as_view(), name="api-judge-run"),
]
