"""API tokens: ``/api/auth/tokens/`` and the token exchange ``/api/auth/token/``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.exceptions import (
    ValidationError,
)
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api import fields as strict
from api import services as api_services
from api.filters import StrictQueryMixin
from api.models import ApiToken
from api.parsers import BoundedJSONParser
from api.throttles import (
    TokenExchangeThrottle,
    TokenThrottle,
)
from simulations.permissions import signed_in

# --- serializers -----------------------------------------------------------------------------


# --- tokens ----------------------------------------------------------------------------------


class ApiTokenSerializer(strict.ModelSerializer):
    """An API token (the key is only in the creation response)."""

    expires_in_days = strict.IntegerField(
        write_only=True, required=False, min_value=1, max_value=366
    )

    class Meta:
        model = ApiToken
        fields: tuple[str, ...] = (
            "id",
            "name",
            "key_hint",
            "created_at",
            "last_used_at",
            "expires_at",
            "expires_in_days",
        )
        read_only_fields: tuple[str, ...] = (
            "id",
            "key_hint",
            "created_at",
            "last_used_at",
            "expires_at",
        )


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    """The creation response: the token and, once only, its key."""

    key = strict.CharField(read_only=True, help_text="Shown once; store it now.")

    class Meta(ApiTokenSerializer.Meta):
        fields = (*ApiTokenSerializer.Meta.fields, "key")
        read_only_fields = (*ApiTokenSerializer.Meta.read_only_fields, "key")


class TokenExchangeSerializer(strict.Serializer):
    """A username and password exchanged for a new API token (automation)."""

    username = strict.CharField(max_length=150)
    password = strict.CharField(max_length=4096, trim_whitespace=False, write_only=True)
    name = strict.CharField(
        max_length=100, required=False, default="password exchange", help_text="Token name."
    )
    expires_in_days = strict.IntegerField(required=False, min_value=1, max_value=366)


# --- views -----------------------------------------------------------------------------------


# --- tokens ----------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="Your API tokens (without keys)", tags=["auth"]),
    retrieve=extend_schema(summary="One of your API tokens", tags=["auth"]),
    destroy=extend_schema(summary="Revoke an API token", tags=["auth"]),
)
class ApiTokenViewSet(
    StrictQueryMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """API tokens for automation (``Authorization: Token <key>``): create (the key is shown
    once), list, revoke."""

    serializer_class = ApiTokenSerializer
    ordering_fields = ("created_at", "name", "last_used_at")
    ordering = ("-created_at", "-id")
    filterset_fields: tuple[str, ...] = ()

    queryset = ApiToken.objects.none()

    def get_queryset(self) -> QuerySet[Any]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user
            return ApiToken.objects.none()
        return ApiToken.objects.filter(user=signed_in(self.request.user))

    def get_throttles(self) -> list[Any]:
        if self.action == "create":
            return [*super().get_throttles(), TokenThrottle()]
        return super().get_throttles()

    @extend_schema(
        summary="Create an API token (the key is in this response only)",
        tags=["auth"],
        responses={201: ApiTokenCreatedSerializer},
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Create a token named ``name``, optionally expiring after ``expires_in_days``."""
        data = self.get_serializer(data=request.data)
        data.is_valid(raise_exception=True)
        return _token_response(
            request.user, data.validated_data["name"], data.validated_data.get("expires_in_days")
        )


def _token_response(user: Any, name: str, expires_in_days: int | None) -> Response:
    try:
        token, key = api_services.api_token_create(
            user=user, name=name, expires_in_days=expires_in_days
        )
    except DjangoValidationError as exc:
        raise ValidationError(exc.message_dict) from exc
    token.key = key  # type: ignore[attr-defined]
    return Response(ApiTokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)


class TokenExchangeView(APIView):
    """Exchange a username and password for a new API token, for automation that cannot use
    the browser (``POST /api/auth/token/``). Open to anonymous callers; throttled by client
    address whatever the outcome; bad credentials are a 401 that does not say which was
    wrong."""

    authentication_classes: list[Any] = []  # credentials are in the body; no session/CSRF
    permission_classes = [permissions.AllowAny]
    throttle_classes = [TokenExchangeThrottle]
    parser_classes = [BoundedJSONParser]

    @extend_schema(
        summary="Exchange a username and password for an API token (the key is in this "
        "response only)",
        tags=["auth"],
        auth=[],
        request=TokenExchangeSerializer,
        responses={
            201: ApiTokenCreatedSerializer,
            400: OpenApiResponse(description="A field is missing or invalid (named)."),
            401: OpenApiResponse(description="Wrong username or password, or inactive user."),
            429: OpenApiResponse(description="Too many attempts; retry after Retry-After s."),
        },
    )
    def post(self, request: Request) -> Response:
        """Check the credentials and create a token named ``name`` (default "password
        exchange"), optionally expiring after ``expires_in_days``."""
        data = TokenExchangeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(
            request._request,
            username=data.validated_data["username"],
            password=data.validated_data["password"],
        )
        if user is None or not user.is_active:
            response = Response(
                {"detail": "Wrong username or password."}, status=status.HTTP_401_UNAUTHORIZED
            )
            response["WWW-Authenticate"] = "Token"
            return response
        return _token_response(
            user, data.validated_data["name"], data.validated_data.get("expires_in_days")
        )
