from django.urls import path

from abstraction import api

urlpatterns = [
    path("studies/<int:pk>/abstraction/table/", api.AbstractionTable.as_view(), name="api-abstraction-table"),
    path("studies/<int:pk>/abstraction/items/", api.AbstractionItems.as_view(), name="api-abstraction-items"),
    path("studies/<int:pk>/abstraction/runs/", api.StudyAbstractionRuns.as_view(), name="api-study-abstraction-runs"),
]
