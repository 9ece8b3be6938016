from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from reasonaudit.views import favicon

urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    # search first: its studies/<id>/traces/ extends annotation's (same name, same parameters and more).
    path("api/v1/", include("search.api_urls")),
    path("api/v1/", include("annotation.api.urls")),
    path("api/v1/", include("scoring.api_urls")),
    path("api/v1/", include("agreement.api_urls")),
    path("api/v1/", include("judges.api_urls")),
    path("api/v1/", include("subjects.api_urls")),
    path("api/v1/", include("abstraction.api_urls")),
    path("api/v1/", include("faithfulness.api_urls")),
    path("api/v1/", include("fidelity.api_urls")),
    path("api/v1/", include("runs.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include("annotation.urls")),
    path("", include("scoring.urls")),
    path("", include("agreement.urls")),
    path("", include("judges.urls")),
    path("", include("subjects.urls")),
    path("", include("abstraction.urls")),
    path("", include("faithfulness.urls")),
    path("", include("anchors.urls")),
    path("", include("fidelity.urls")),
    path("", include("search.urls")),
    path("", include("runs.urls")),
]

# Every refusal (annotation.access.AccessDenied) is rendered here on the web:
# 404 for outsiders, 403 naming the missing role for members.
handler403 = "annotation.views.base.permission_denied"
# Every other 4xx is styled by annotation/errors.py (its middleware catches those no handler sees).
handler404 = "annotation.errors.page_not_found"
handler400 = "annotation.errors.bad_request"
