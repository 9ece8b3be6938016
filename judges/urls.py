from django.urls import path

from judges import views

urlpatterns = [
    path("studies/<int:study_id>/judges/", views.judge_list, name="judge-list"),
    path("studies/<int:study_id>/judges/new/", views.judge_create, name="judge-create"),
    path("judges/<int:judge_id>/", views.judge_detail, name="judge"),
    path("judges/<int:judge_id>/edit/", views.judge_edit, name="judge-edit"),
    path("judges/<int:judge_id>/prompt/", views.judge_prompt, name="judge-prompt"),
    path("judges/<int:judge_id>/run/", views.judge_run_start, name="judge-run-start"),
    path("judges/<int:judge_id>/disagreements/", views.judge_disagreements, name="judge-disagreements"),
    path("judge-runs/<int:run_id>/", views.judge_run, name="judge-run"),
]
