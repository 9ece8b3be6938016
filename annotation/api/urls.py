from django.urls import path

from annotation.api import tags, views

urlpatterns = [
    path("studies/", views.StudyList.as_view(), name="api-studies"),
    path("studies/<int:pk>/", views.StudyDetail.as_view(), name="api-study"),
    path("studies/<int:pk>/imports/", views.StudyImports.as_view(), name="api-study-imports"),
    path("studies/<int:pk>/traces/", views.StudyTraces.as_view(), name="api-study-traces"),
    path("studies/<int:pk>/problems/", views.StudyProblems.as_view(), name="api-study-problems"),
    path("studies/<int:pk>/members/", views.StudyMembers.as_view(), name="api-study-members"),
    path("studies/<int:pk>/queue/", views.StudyQueue.as_view(), name="api-study-queue"),
    path("studies/<int:pk>/assignments/", views.StudyAssignments.as_view(), name="api-study-assignments"),
    path("studies/<int:pk>/disagreements/", views.StudyDisagreements.as_view(), name="api-study-disagreements"),
    path("imports/<int:pk>/", views.ImportDetail.as_view(), name="api-import"),
    path("jobs/<int:pk>/", views.JobDetail.as_view(), name="api-job"),
    path("problems/<int:pk>/", views.ProblemDetail.as_view(), name="api-problem"),
    path("problems/<int:pk>/skeletons/", views.ProblemSkeletons.as_view(), name="api-problem-skeletons"),
    path("skeletons/<int:pk>/", views.SkeletonDetail.as_view(), name="api-skeleton"),
    path("traces/<int:pk>/", views.TraceDetail.as_view(), name="api-trace"),
    path("traces/<int:pk>/labels/", views.TraceLabels.as_view(), name="api-trace-labels"),
    path("traces/<int:pk>/tags/", tags.TraceTags.as_view(), name="api-trace-tags"),
    path("steps/<int:pk>/adjudication/", views.StepAdjudication.as_view(), name="api-step-adjudication"),
]
