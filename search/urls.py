from django.urls import path

from search import views

urlpatterns = [
    path("studies/<int:study_id>/search/", views.search_page, name="search"),
    path("studies/<int:study_id>/search/download/", views.download, name="search-download"),
    path("studies/<int:study_id>/cohorts/", views.cohort_list, name="search-cohorts"),
    path("cohorts/<int:pk>/", views.cohort_detail, name="search-cohort"),
    path("cohorts/<int:pk>/assign/", views.cohort_assign, name="search-cohort-assign"),
    path("cohorts/<int:pk>/judge/", views.cohort_judge, name="search-cohort-judge"),
    path("cohorts/<int:pk>/delete/", views.cohort_delete, name="search-cohort-delete"),
    path("cohorts/<int:pk>/compare/", views.cohort_compare, name="search-cohort-compare"),
    path("studies/<int:study_id>/scanners/", views.scanner_list, name="search-scanners"),
    path("scanners/<int:pk>/", views.scanner_detail, name="search-scanner"),
    path("scanners/<int:pk>/run/", views.scanner_run, name="search-scanner-run"),
    path("scanners/<int:pk>/sample/", views.scanner_sample, name="search-scanner-sample"),
    path("scanners/<int:pk>/label/", views.scanner_label, name="search-scanner-label"),
]
