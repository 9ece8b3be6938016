from django.urls import path

from fidelity import views

urlpatterns = [
    path("studies/<int:study_id>/fidelity/", views.fidelity_list, name="fidelity-list"),
    path("fidelity/runs/<int:run_id>/", views.fidelity_report, name="fidelity-report"),
    path("fidelity/runs/<int:run_id>/items/<int:problem_id>/", views.fidelity_item, name="fidelity-item"),
]
