from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy
from django.utils.text import format_lazy

from annotation import one_time
from annotation.views import adjudication, lists, problems, queues, review, settings, studies

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # A new account's one-time link (annotation.members.do_create_account): the user sets their own password.
    path("set-password/<uidb64>/<token>/", auth_views.PasswordResetConfirmView.as_view(
        template_name="registration/password_set.html", success_url=format_lazy("{}?password-set=1", reverse_lazy("login")),
        post_reset_login=False), name="password-set"),
    # After a sign-in with a one-time password (annotation.one_time): the user chooses their own.
    path("password/choose/", one_time.choose_password, name=one_time.CHOOSE_URL_NAME),
    path("profile/", studies.profile, name="profile"),
    path("", studies.studies, name="studies"),
    path("studies/new/", studies.study_create, name="study-create"),
    path("invitations/<int:invitation_id>/", studies.invitation_respond, name="invitation-respond"),
    path("studies/<int:study_id>/", studies.study, name="study"),
    path("studies/<int:study_id>/members/", studies.study_members, name="study-members"),
    path("studies/<int:study_id>/settings/", settings.study_settings, name="study-settings"),
    path("studies/<int:study_id>/primary-judge/", settings.make_primary_judge, name="study-primary-judge"),
    path("studies/<int:study_id>/import/", studies.study_import, name="study-import"),
    path("studies/<int:study_id>/traces/", lists.trace_list, name="trace-list"),
    path("studies/<int:study_id>/problems/", lists.problem_list, name="problem-list"),
    path("studies/<int:study_id>/queue/", queues.queue, name="queue"),
    path("studies/<int:study_id>/queue/assign/", queues.queue_assign, name="queue-assign"),
    path("studies/<int:study_id>/adjudication/", adjudication.adjudication, name="adjudication"),
    path("problems/<int:problem_id>/", problems.problem, name="problem"),
    path("problems/<int:problem_id>/edit/", settings.problem_edit, name="problem-edit"),
    path("problems/<int:problem_id>/skeletons/", problems.skeleton_save, name="skeleton-save"),
    path("skeletons/<int:skeleton_id>/approve/", problems.skeleton_approve, name="skeleton-approve"),
    path("skeleton-check/", problems.skeleton_check, name="skeleton-check"),
    path("markdown-preview/", problems.markdown_preview, name="markdown-preview"),
    path("traces/<int:trace_id>/", review.trace, name="trace"),
    path("traces/<int:trace_id>/review/", review.trace_review, name="trace-review"),
    path("traces/<int:trace_id>/thought/", review.trace_thought, name="trace-thought"),
    path("steps/<int:step_id>/adjudicate/", adjudication.adjudicate, name="adjudicate"),
    path("jobs/<int:job_id>/", studies.job, name="job"),
]
