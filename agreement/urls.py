from django.urls import path

from agreement import calibration_views, views

# Names keep their ``scoring-`` prefix: templates, permission tests and
# bookmarks used them before agreement became an app of its own.
urlpatterns = [
    # Agreement, calibration studies and export jobs (docs/agreement.md, docs/exports.md)
    path("studies/<int:study_id>/agreement/", views.agreement, name="scoring-agreement"),
    path("studies/<int:study_id>/agreement/annotators/", views.annotators, name="scoring-annotators"),
    path("studies/<int:study_id>/calibration/", calibration_views.calibrations, name="scoring-calibrations"),
    path("studies/<int:study_id>/calibration/<int:cal_id>/", calibration_views.calibration_detail,
         name="scoring-calibration"),
    path("studies/<int:study_id>/calibration/<int:cal_id>/queue/", calibration_views.calibration_queue,
         name="scoring-calibration-queue"),
    path("studies/<int:study_id>/exports/", views.export_create, name="scoring-export-create"),
    path("studies/<int:study_id>/exports/<int:job_id>/", views.export_job, name="scoring-export-job"),
    path("studies/<int:study_id>/exports/<int:job_id>/download/", views.export_download,
         name="scoring-export-download"),
]
