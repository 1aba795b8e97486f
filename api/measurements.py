"""REST API for measurement sets and calibrations: ``/api/measurements/`` and
``/api/calibrations/``.

Kept in its own module (serializers and views together) so the resource is one file to
read. Views stay thin: the writes are :mod:`simulations.measurements.services`, the reads
and visibility :mod:`simulations.measurements.selectors` (another user's private set or
fit answers 404). Bad rows answer 400 naming the line and column (``rows[i].column`` for
JSON rows) and store nothing.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from api.catalog import RuntimeProfileSerializer
from api.common import SLUG
from api.parsers import BoundedJSONParser, BoundedMultiPartParser
from api.throttles import UploadThrottle
from simulations.core.calibration.measurements import MAX_BYTES
from simulations.measurements import selectors, services
from simulations.measurements.models import Calibration, MeasurementSet
from simulations.ownership import Visibility

# --- serializers -----------------------------------------------------------------------------


class MeasurementSetSerializer(serializers.ModelSerializer):
    """A measurement set's metadata (``rows`` only on a single set)."""

    owner: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    device: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    model: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        source="llm", slug_field="slug", read_only=True
    )
    stack: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        source="runtime", slug_field="slug", read_only=True
    )

    class Meta:
        model = MeasurementSet
        fields: tuple[str, ...] = (
            "id",
            "slug",
            "name",
            "device",
            "model",
            "stack",
            "precision",
            "tensor_parallel",
            "format",
            "row_count",
            "source",
            "notes",
            "owner",
            "visibility",
            "created_at",
        )
        read_only_fields = fields


class MeasurementSetDetailSerializer(MeasurementSetSerializer):
    """A measurement set with its parsed rows."""

    class Meta(MeasurementSetSerializer.Meta):
        fields = (*MeasurementSetSerializer.Meta.fields, "rows")
        read_only_fields = fields


class MeasurementImportSerializer(serializers.Serializer):
    """A measurement set: a CSV ``file`` (multipart), its ``text``, or ``rows`` (JSON
    objects with the CSV's columns) — exactly one."""

    slug = serializers.CharField(max_length=64, validators=[SLUG])
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    stack = serializers.CharField(max_length=64, help_text="Runtime profile measured (slug).")
    device = serializers.CharField(
        max_length=64, required=False, help_text="Device measured (default: the rows' one)."
    )
    model = serializers.CharField(
        max_length=64, required=False, help_text="Model measured (default: the rows' one)."
    )
    source = serializers.CharField(max_length=2000, required=False, allow_blank=True)  # type: ignore[assignment]  # a field named like a Field attribute
    notes = serializers.CharField(max_length=5000, required=False, allow_blank=True)
    visibility = serializers.ChoiceField(
        choices=Visibility.choices,
        default=Visibility.PRIVATE,
        help_text="private (you only; the default), shared (every signed-in user) or public "
        "(staff only: part of the catalog).",
    )
    file = serializers.FileField(required=False, help_text="The CSV file (multipart upload).")
    text = serializers.CharField(
        required=False, max_length=MAX_BYTES, trim_whitespace=False, help_text="The CSV text."
    )
    rows = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="Rows as objects keyed by the CSV's columns.",
    )

    def validate_slug(self, value: str) -> str:
        if MeasurementSet.objects.filter(slug=value).exists():
            raise serializers.ValidationError(f"{value!r} already exists.")
        return value

    def validate_file(self, value: Any) -> Any:
        if value is not None and value.size > MAX_BYTES:
            raise serializers.ValidationError(f"At most {MAX_BYTES} bytes.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if sum(k in attrs for k in ("file", "text", "rows")) != 1:
            raise serializers.ValidationError(
                {"file": ["Send exactly one of a file, text or rows."]}
            )
        return attrs


class MeasurementImportJsonSerializer(MeasurementImportSerializer):
    """The JSON body of a measurement-set import: ``text`` or ``rows`` (a file needs a
    multipart upload)."""

    file = None  # type: ignore[assignment]


class CalibrationSerializer(serializers.ModelSerializer):
    """A fit: the calibration document (``report``) and the profile it was saved as."""

    measurement_set: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    stack: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        source="base_runtime", slug_field="slug", read_only=True
    )
    profile: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )

    class Meta:
        model = Calibration
        fields = (
            "id",
            "measurement_set",
            "stack",
            "mape",
            "holdout_mape",
            "report",
            "profile",
            "created_at",
        )
        read_only_fields = fields


class CalibrationRequestSerializer(serializers.Serializer):
    """What to fit: a visible ``measurement_set`` (slug), or a CSV ``file`` / ``text``
    (stored first as a private set named ``slug``); ``stack`` defaults to the set's."""

    measurement_set = serializers.CharField(max_length=64, required=False)
    stack = serializers.CharField(max_length=64, required=False)
    file = serializers.FileField(required=False)
    text = serializers.CharField(required=False, max_length=MAX_BYTES, trim_whitespace=False)
    slug = serializers.CharField(
        max_length=64, required=False, validators=[SLUG], help_text="Slug of an uploaded set."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = sum(k in attrs for k in ("measurement_set", "file", "text"))
        if given != 1:
            raise serializers.ValidationError(
                {"measurement_set": ["Name a measurement set, or upload a file or text (one)."]}
            )
        if "measurement_set" not in attrs:
            if "stack" not in attrs:
                raise serializers.ValidationError({"stack": ["Name the stack measured."]})
            if "slug" not in attrs:
                raise serializers.ValidationError({"slug": ["Name the uploaded set."]})
        return attrs


class CalibrationRequestJsonSerializer(CalibrationRequestSerializer):
    """The JSON body of a fit: a ``measurement_set`` or CSV ``text`` (a file needs a
    multipart upload)."""

    file = None  # type: ignore[assignment]


class CalibrationSaveSerializer(serializers.Serializer):
    """Save a fit as a runtime profile: private to you, or ``publish`` (staff only)."""

    slug = serializers.CharField(max_length=64, validators=[SLUG])
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    publish = serializers.BooleanField(default=False)


# --- views -----------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="List measurement sets you may see", tags=["calibration"]),
    retrieve=extend_schema(summary="A measurement set with its rows", tags=["calibration"]),
    destroy=extend_schema(
        summary="Delete a measurement set (owner or staff)", tags=["calibration"]
    ),
)
class MeasurementSetViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Measurement sets: your own, shared and public ones. Upload a CSV (multipart ``file``,
    JSON ``text``) or JSON ``rows``; bad rows answer 400 naming line and column."""

    lookup_field = "slug"
    lookup_value_regex = r"[a-z0-9][a-z0-9._-]*"
    parser_classes = [BoundedJSONParser, BoundedMultiPartParser]
    ordering_fields = ("slug", "name", "created_at", "row_count")

    def get_queryset(self) -> QuerySet[MeasurementSet]:
        rows = selectors.measurement_sets_visible_to(self.request.user)
        return rows.defer("rows") if self.action == "list" else rows

    def get_serializer_class(self) -> type[serializers.Serializer]:
        if self.action == "retrieve":
            return MeasurementSetDetailSerializer
        return MeasurementSetSerializer

    def get_throttles(self) -> list[Any]:
        if self.action == "create":
            return [*super().get_throttles(), UploadThrottle()]
        return super().get_throttles()

    def perform_destroy(self, instance: MeasurementSet) -> None:
        try:
            services.measurement_set_delete(measurement_set=instance, user=self.request.user)
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc

    @extend_schema(
        summary="Import a measurement set (CSV file, CSV text or JSON rows)",
        tags=["calibration"],
        request={
            "multipart/form-data": MeasurementImportSerializer,
            "application/json": MeasurementImportJsonSerializer,
        },
        responses={201: MeasurementSetSerializer},
    )
    def create(self, request: Request) -> Response:
        """Parse and store a set in one transaction (nothing stored on a bad row)."""
        data = MeasurementImportSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        json_rows = "rows" in v
        if json_rows:
            text: str | bytes = services.rows_to_csv(v["rows"])
        else:
            text = v["file"].read() if "file" in v else v["text"]
        row = _import(
            v,
            text=text,
            owner=request.user,
            json_rows=json_rows,
            field="file" if "file" in v else None,
        )
        return Response(MeasurementSetSerializer(row).data, status=status.HTTP_201_CREATED)


def _import(
    v: dict[str, Any], *, text: str | bytes, owner: Any, json_rows: bool, field: str | None
) -> MeasurementSet:
    """Store an uploaded set; the service's ``text`` errors are reported under the input
    they came from (``file`` for a multipart upload)."""
    from django.core.exceptions import ValidationError as DjangoValidationError

    try:
        return services.measurement_set_import(
            slug=v["slug"],
            name=v.get("name") or v["slug"],
            text=text,
            stack=v["stack"],
            device=v.get("device"),
            model=v.get("model"),
            owner=owner,
            visibility=v.get("visibility", Visibility.PRIVATE),
            source=v.get("source", ""),
            notes=v.get("notes", ""),
            json_rows=json_rows,
        )
    except DjangoValidationError as exc:
        errors = dict(exc.message_dict)
        if field and "text" in errors:
            errors[field] = errors.pop("text")
        raise serializers.ValidationError(errors) from exc


@extend_schema_view(
    list=extend_schema(summary="List your fits", tags=["calibration"]),
    retrieve=extend_schema(summary="A fit's calibration document", tags=["calibration"]),
)
class CalibrationViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Fits of a stack to a measurement set (run synchronously: the service bounds the set's
    size). ``POST .../{id}/save/`` stores the fit as a runtime profile, private to you or —
    staff only — published to the catalog."""

    serializer_class = CalibrationSerializer
    parser_classes = [BoundedJSONParser, BoundedMultiPartParser]
    ordering_fields = ("id", "created_at", "mape", "holdout_mape")

    def get_queryset(self) -> QuerySet[Calibration]:
        rows = selectors.calibrations_of(self.request.user)
        return rows.defer("report") if self.action == "list" else rows

    def get_throttles(self) -> list[Any]:
        if self.action in ("create", "save"):
            return [*super().get_throttles(), UploadThrottle()]
        return super().get_throttles()

    @extend_schema(
        summary="Fit a stack to a measurement set (or an uploaded CSV)",
        tags=["calibration"],
        request={
            "multipart/form-data": CalibrationRequestSerializer,
            "application/json": CalibrationRequestJsonSerializer,
        },
        responses={201: CalibrationSerializer},
    )
    def create(self, request: Request) -> Response:
        """Fit and store the report: 400 for bad rows or a refused fit (with the reason)."""
        data = CalibrationRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        if "measurement_set" in v:
            try:
                mset = selectors.measurement_set_get_for(request.user, v["measurement_set"])
            except MeasurementSet.DoesNotExist as exc:
                raise serializers.ValidationError(
                    {"measurement_set": [f"unknown measurement set {v['measurement_set']!r}"]}
                ) from exc
        else:
            text = v["file"].read() if "file" in v else v["text"]
            mset = _import(
                {**v, "name": v["slug"]},
                text=text,
                owner=request.user,
                json_rows=False,
                field="file" if "file" in v else None,
            )
        cal = services.calibration_run(
            owner=request.user, measurement_set=mset, stack=v.get("stack")
        )
        return Response(CalibrationSerializer(cal).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Save a fit as a runtime profile (private; publish: staff only)",
        tags=["calibration"],
        request=CalibrationSaveSerializer,
        responses={201: RuntimeProfileSerializer},
    )
    @action(detail=True, methods=["post"])
    def save(self, request: Request, pk: str | None = None) -> Response:
        """Store the fitted values as a new runtime profile."""
        try:
            cal = self.get_queryset().get(pk=str(pk))
        except (Calibration.DoesNotExist, ValueError) as exc:
            raise NotFound() from exc
        data = CalibrationSaveSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        try:
            profile = services.calibration_save_profile(
                calibration=cal,
                user=request.user,
                slug=v["slug"],
                name=v.get("name", ""),
                publish=v["publish"],
            )
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        return Response(RuntimeProfileSerializer(profile).data, status=status.HTTP_201_CREATED)
