from django.urls import path

from scoring import agreement_views, calibration_views, views

urlpatterns = [
    path("studies/<int:study_id>/analytics/", views.leaderboard, name="scoring-leaderboard"),
    path("studies/<int:study_id>/analytics/hazard/", views.hazard, name="scoring-hazard"),
    path("studies/<int:study_id>/analytics/distributions/", views.distributions, name="scoring-distributions"),
    path("studies/<int:study_id>/analytics/lucky-guesses/", views.lucky_guesses, name="scoring-lucky"),
    path("studies/<int:study_id>/analytics/ablations/", views.ablations, name="scoring-ablations"),
    path("studies/<int:study_id>/analytics/export/", views.export, name="scoring-export"),
    path("studies/<int:study_id>/profiles/", views.profiles, name="scoring-profiles"),
    path("studies/<int:study_id>/profiles/recompute/", views.recompute, name="scoring-recompute"),
    # Agreement, calibration studies and export jobs (docs/agreement.md, docs/exports.md)
    path("studies/<int:study_id>/agreement/", agreement_views.agreement, name="scoring-agreement"),
    path("studies/<int:study_id>/agreement/annotators/", agreement_views.annotators, name="scoring-annotators"),
    path("studies/<int:study_id>/calibration/", calibration_views.calibrations, name="scoring-calibrations"),
    path("studies/<int:study_id>/calibration/<int:cal_id>/", calibration_views.calibration_detail,
         name="scoring-calibration"),
    path("studies/<int:study_id>/calibration/<int:cal_id>/queue/", calibration_views.calibration_queue,
         name="scoring-calibration-queue"),
    path("studies/<int:study_id>/exports/", agreement_views.export_create, name="scoring-export-create"),
    path("studies/<int:study_id>/exports/<int:job_id>/", agreement_views.export_job, name="scoring-export-job"),
    path("studies/<int:study_id>/exports/<int:job_id>/download/", agreement_views.export_download,
         name="scoring-export-download"),
]
