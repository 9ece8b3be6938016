from django.contrib.auth import views as auth_views
from django.urls import path

from annotation import views

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.studies, name="studies"),
    path("studies/<int:study_id>/", views.study, name="study"),
    path("studies/<int:study_id>/import/", views.study_import, name="study-import"),
    path("studies/<int:study_id>/traces/", views.trace_list, name="trace-list"),
    path("problems/<int:problem_id>/", views.problem, name="problem"),
    path("traces/<int:trace_id>/", views.trace, name="trace"),
    path("jobs/<int:job_id>/", views.job, name="job"),
]
