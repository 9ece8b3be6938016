from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("annotation.api.urls")),
    path("api/v1/", include("scoring.api_urls")),
    path("api/v1/", include("agreement.api_urls")),
    path("api/v1/", include("judges.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include("annotation.urls")),
    path("", include("scoring.urls")),
    path("", include("agreement.urls")),
    path("", include("judges.urls")),
]
