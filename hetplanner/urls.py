"""URL routes: admin, the REST API under /api/, and the dashboard pages."""

from django.contrib import admin
from django.urls import include, path

from frontend.views import accounts
from ops.views import healthz

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("healthz/", healthz),
    # Before auth's own routes: the reset pages say where the mail goes (console, files).
    path("accounts/password_reset/", accounts.PasswordResetView.as_view(), name="password_reset"),
    path(
        "accounts/password_reset/done/",
        accounts.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("api.urls")),
    path("", include("frontend.urls")),
]

# JSON errors for API paths no route matches; HTML pages elsewhere
handler404 = "api.exceptions.not_found"
handler500 = "api.exceptions.server_error"
