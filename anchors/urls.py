from django.urls import path

from anchors import views

urlpatterns = [
    path("studies/<int:study_id>/step-importance/", views.study_page, name="anchors"),
    path("studies/<int:study_id>/step-importance/export/", views.export, name="anchors-export"),
    path("step-importance/runs/<int:run_id>/", views.run_page, name="anchors-run"),
    path("traces/<int:trace_id>/step-importance/", views.trace_panel, name="trace-importance"),
]
