from django.urls import path

from fidelity import api

urlpatterns = [
    path("studies/<int:pk>/fidelity-runs/", api.StudyFidelityRuns.as_view(), name="api-study-fidelity-runs"),
    path("fidelity-runs/<int:pk>/", api.FidelityRunDetail.as_view(), name="api-fidelity-run"),
    path("fidelity-runs/<int:pk>/items/", api.FidelityRunItems.as_view(), name="api-fidelity-run-items"),
]
