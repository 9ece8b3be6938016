from django.urls import path

from subjects import api

urlpatterns = [
    path("studies/<int:pk>/subject-models/", api.StudySubjectModels.as_view(), name="api-study-subject-models"),
    path("subject-models/<int:pk>/", api.SubjectModelDetail.as_view(), name="api-subject-model"),
    path("subject-models/<int:pk>/probe/", api.SubjectModelProbe.as_view(), name="api-subject-model-probe"),
    path("studies/<int:pk>/generation-runs/", api.StudyGenerationRuns.as_view(), name="api-study-generation-runs"),
    path("generation-runs/<int:pk>/", api.GenerationRunDetail.as_view(), name="api-generation-run"),
    path("studies/<int:pk>/prompt-templates/", api.StudyPromptTemplates.as_view(), name="api-study-prompt-templates"),
    path("studies/<int:pk>/prompt-templates/preview/", api.PromptTemplatePreview.as_view(),
         name="api-prompt-template-preview"),
    path("prompt-templates/<int:pk>/", api.PromptTemplateDetail.as_view(), name="api-prompt-template"),
]
