from django.urls import path

from scoring import api

urlpatterns = [
    path("traces/<int:pk>/scores/", api.TraceScores.as_view(), name="api-trace-scores"),
    path("studies/<int:pk>/leaderboard/", api.StudyLeaderboard.as_view(), name="api-study-leaderboard"),
    path("studies/<int:pk>/hazard/", api.StudyHazard.as_view(), name="api-study-hazard"),
    path("studies/<int:pk>/lucky-guesses/", api.StudyLuckyGuesses.as_view(), name="api-study-lucky-guesses"),
    path("studies/<int:pk>/profiles/", api.StudyProfiles.as_view(), name="api-study-profiles"),
    path("studies/<int:pk>/profiles/<str:name>/", api.StudyProfile.as_view(), name="api-study-profile"),
    path("studies/<int:pk>/score/", api.StudyScore.as_view(), name="api-study-score"),
]
