from django.urls import path

from annotation.api.views import adjudication, members, problems, queues, studies, tags, traces

urlpatterns = [
    path("studies/", studies.StudyList.as_view(), name="api-studies"),
    path("studies/<int:pk>/", studies.StudyDetail.as_view(), name="api-study"),
    path("studies/<int:pk>/imports/", studies.StudyImports.as_view(), name="api-study-imports"),
    path("studies/<int:pk>/traces/", traces.StudyTraces.as_view(), name="api-study-traces"),
    path("studies/<int:pk>/problems/", problems.StudyProblems.as_view(), name="api-study-problems"),
    path("studies/<int:pk>/members/", members.StudyMembers.as_view(), name="api-study-members"),
    path("studies/<int:pk>/queue/", queues.StudyQueue.as_view(), name="api-study-queue"),
    path("studies/<int:pk>/assignments/", queues.StudyAssignments.as_view(), name="api-study-assignments"),
    path("studies/<int:pk>/disagreements/", adjudication.StudyDisagreements.as_view(), name="api-study-disagreements"),
    path("imports/<int:pk>/", studies.ImportDetail.as_view(), name="api-import"),
    path("jobs/<int:pk>/", studies.JobDetail.as_view(), name="api-job"),
    path("problems/<int:pk>/", problems.ProblemDetail.as_view(), name="api-problem"),
    path("problems/<int:pk>/skeletons/", problems.ProblemSkeletons.as_view(), name="api-problem-skeletons"),
    path("skeletons/<int:pk>/", problems.SkeletonDetail.as_view(), name="api-skeleton"),
    path("traces/<int:pk>/", traces.TraceDetail.as_view(), name="api-trace"),
    path("traces/<int:pk>/labels/", traces.TraceLabels.as_view(), name="api-trace-labels"),
    path("traces/<int:pk>/tags/", tags.TraceTags.as_view(), name="api-trace-tags"),
    path("steps/<int:pk>/adjudication/", adjudication.StepAdjudication.as_view(), name="api-step-adjudication"),
]
