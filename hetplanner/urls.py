"""URL routes: admin, the REST API under /api/, and the dashboard pages."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("api.urls")),
    path("", include("frontend.urls")),
]

# JSON errors for API paths no route matches; HTML pages elsewhere
handler404 = "api.exceptions.not_found"
handler500 = "api.exceptions.server_error"
