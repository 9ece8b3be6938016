from django.urls import path

from annotation.api import views

urlpatterns = [
    path("studies/", views.StudyList.as_view(), name="api-studies"),
    path("studies/<int:pk>/", views.StudyDetail.as_view(), name="api-study"),
    path("studies/<int:pk>/imports/", views.StudyImports.as_view(), name="api-study-imports"),
    path("studies/<int:pk>/traces/", views.StudyTraces.as_view(), name="api-study-traces"),
    path("imports/<int:pk>/", views.ImportDetail.as_view(), name="api-import"),
    path("jobs/<int:pk>/", views.JobDetail.as_view(), name="api-job"),
    path("traces/<int:pk>/", views.TraceDetail.as_view(), name="api-trace"),
]
