from django.urls import path

from scoring import agreement_api, api

urlpatterns = [
    path("traces/<int:pk>/scores/", api.TraceScores.as_view(), name="api-trace-scores"),
    path("studies/<int:pk>/leaderboard/", api.StudyLeaderboard.as_view(), name="api-study-leaderboard"),
    path("studies/<int:pk>/hazard/", api.StudyHazard.as_view(), name="api-study-hazard"),
    path("studies/<int:pk>/lucky-guesses/", api.StudyLuckyGuesses.as_view(), name="api-study-lucky-guesses"),
    path("studies/<int:pk>/profiles/", api.StudyProfiles.as_view(), name="api-study-profiles"),
    path("studies/<int:pk>/profiles/<str:name>/", api.StudyProfile.as_view(), name="api-study-profile"),
    path("studies/<int:pk>/score/", api.StudyScore.as_view(), name="api-study-score"),
    # Agreement, calibration studies, export jobs (docs/agreement.md, docs/exports.md)
    path("studies/<int:pk>/agreement/", agreement_api.StudyAgreement.as_view(), name="api-study-agreement"),
    path("studies/<int:pk>/agreement/disagreements/", agreement_api.StudyDisagreements.as_view(),
         name="api-study-agreement-disagreements"),
    path("studies/<int:pk>/agreement/annotators/", agreement_api.StudyAnnotatorAgreement.as_view(),
         name="api-study-annotator-agreement"),
    path("studies/<int:pk>/calibrations/", agreement_api.StudyCalibrations.as_view(), name="api-study-calibrations"),
    path("calibrations/<int:pk>/", agreement_api.CalibrationDetail.as_view(), name="api-calibration"),
    path("calibrations/<int:pk>/tuning/", agreement_api.CalibrationTuning.as_view(), name="api-calibration-tuning"),
    path("calibrations/<int:pk>/queue/", agreement_api.CalibrationQueue.as_view(), name="api-calibration-queue"),
    path("studies/<int:pk>/exports/", agreement_api.StudyExports.as_view(), name="api-study-exports"),
    path("exports/<int:pk>/download/", agreement_api.ExportDownload.as_view(), name="api-export-download"),
]
