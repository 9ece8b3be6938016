from django.urls import path

from abstraction import views

urlpatterns = [
    path("studies/<int:study_id>/abstraction/", views.table, name="abstraction-table"),
    path("studies/<int:study_id>/abstraction/items/", views.items, name="abstraction-items"),
    path("studies/<int:study_id>/abstraction/download/", views.download, name="abstraction-download"),
]
