from django.urls import path

from agreement import api

urlpatterns = [
    # Agreement, calibration studies, export jobs (docs/agreement.md, docs/exports.md)
    path("studies/<int:pk>/agreement/", api.StudyAgreement.as_view(), name="api-study-agreement"),
    path("studies/<int:pk>/agreement/disagreements/", api.StudyDisagreements.as_view(),
         name="api-study-agreement-disagreements"),
    path("studies/<int:pk>/agreement/annotators/", api.StudyAnnotatorAgreement.as_view(),
         name="api-study-annotator-agreement"),
    path("studies/<int:pk>/calibrations/", api.StudyCalibrations.as_view(), name="api-study-calibrations"),
    path("calibrations/<int:pk>/", api.CalibrationDetail.as_view(), name="api-calibration"),
    path("calibrations/<int:pk>/tuning/", api.CalibrationTuning.as_view(), name="api-calibration-tuning"),
    path("calibrations/<int:pk>/queue/", api.CalibrationQueue.as_view(), name="api-calibration-queue"),
    path("studies/<int:pk>/exports/", api.StudyExports.as_view(), name="api-study-exports"),
    path("exports/<int:pk>/download/", api.ExportDownload.as_view(), name="api-export-download"),
]
