from django.urls import path

from faithfulness import views

urlpatterns = [
    path("studies/<int:study_id>/faithfulness/", views.overview, name="faithfulness"),
    path("studies/<int:study_id>/faithfulness/report/", views.report_download, name="faithfulness-report"),
    path("faithfulness/runs/<int:run_id>/", views.run_page, name="faithfulness-run"),
    path("faithfulness/interventions/<int:pk>/", views.intervention_page, name="faithfulness-intervention"),
]
