from django.urls import path

from subjects import views

urlpatterns = [
    path("studies/<int:study_id>/subject-models/", views.subject_model_list, name="subject-model-list"),
    path("studies/<int:study_id>/subject-models/new/", views.subject_model_create, name="subject-model-create"),
    path("subject-models/<int:subject_id>/", views.subject_model_detail, name="subject-model"),
    path("subject-models/<int:subject_id>/probe/", views.subject_model_probe, name="subject-model-probe"),
    path("subject-models/<int:subject_id>/edit/", views.subject_model_edit, name="subject-model-edit"),
    path("subject-models/<int:subject_id>/generate/", views.generation_start, name="generation-start"),
    path("generation-runs/<int:run_id>/", views.generation_run, name="generation-run"),
    path("studies/<int:study_id>/prompt-templates/", views.prompt_template_list, name="prompt-template-list"),
    path("studies/<int:study_id>/prompt-templates/preview/", views.prompt_template_preview,
         name="prompt-template-preview"),
    path("prompt-templates/<int:template_id>/", views.prompt_template_detail, name="prompt-template"),
]
