from django.urls import path

from runs import views

urlpatterns = [
    path("studies/<int:study_id>/runs/", views.study_runs, name="study-runs"),
    path("studies/<int:study_id>/runs/<int:run_id>/cancel/", views.run_cancel, name="study-run-cancel"),
    path("studies/<int:study_id>/runs/<int:run_id>/retry/", views.run_retry, name="study-run-retry"),
]
