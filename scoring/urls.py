from django.urls import path

from scoring import views

urlpatterns = [
    path("studies/<int:study_id>/analytics/", views.leaderboard, name="scoring-leaderboard"),
    path("studies/<int:study_id>/analytics/hazard/", views.hazard, name="scoring-hazard"),
    path("studies/<int:study_id>/analytics/distributions/", views.distributions, name="scoring-distributions"),
    path("studies/<int:study_id>/analytics/lucky-guesses/", views.lucky_guesses, name="scoring-lucky"),
    path("studies/<int:study_id>/analytics/ablations/", views.ablations, name="scoring-ablations"),
    path("studies/<int:study_id>/analytics/export/", views.export, name="scoring-export"),
    path("studies/<int:study_id>/profiles/", views.profiles, name="scoring-profiles"),
    path("studies/<int:study_id>/profiles/recompute/", views.recompute, name="scoring-recompute"),
]
