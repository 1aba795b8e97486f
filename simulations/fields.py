"""Field helpers shared by the simulations app's models: bounds that keep NaN and Infinity out
(validators on the field, CheckConstraints in the database), slugs, and the catalog's limits.

PostgreSQL accepts NaN and Infinity in ``CHECK (x > 0)``, so every bound also has an upper
limit (``x <= 1e15``), which NaN and Infinity fail on PostgreSQL (NaN sorts above every
number there) and SQLite alike.
"""

from __future__ import annotations

import math
import re
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from simulations.core.spec import MAX_QUANTITY

#: Largest model dimension (layers, hidden size, vocabulary, ...) the core accepts.
MAX_MODEL_DIM = 10**7
#: Precisions (bits) a runtime profile may use for weights, activations and KV cache.
PRECISION_BITS = (2, 3, 4, 8, 16, 32)

slug_validator = RegexValidator(
    re.compile(r"^[a-z0-9][a-z0-9._-]*\Z"),
    "Use lowercase letters, digits, '.', '_' and '-', starting with a letter or digit.",
)


def validate_finite(value: float) -> None:
    """Reject NaN and ±Infinity."""
    if value is not None and not math.isfinite(value):
        raise ValidationError("Must be a finite number (NaN and Infinity are rejected).")


def validate_strictly_positive(value: float) -> None:
    """Reject zero and negative values."""
    if value is not None and value <= 0:
        raise ValidationError("Must be greater than zero.")


def positive_float(
    help_text: str, *, null: bool = True, allow_zero: bool = False, **kwargs: Any
) -> models.FloatField:
    """A float field for a physical quantity: finite, positive (or ≥ 0), at most 1e15."""
    validators = [validate_finite, MaxValueValidator(MAX_QUANTITY), *kwargs.pop("validators", ())]
    validators.append(MinValueValidator(0.0) if allow_zero else validate_strictly_positive)
    return models.FloatField(
        null=null, blank=null, validators=validators, help_text=help_text, **kwargs
    )


def positive_int(
    help_text: str, *, null: bool = True, maximum: int = MAX_MODEL_DIM, **kwargs: Any
) -> models.PositiveIntegerField:
    """An integer field in [1, maximum]."""
    return models.PositiveIntegerField(
        null=null,
        blank=null,
        validators=[MinValueValidator(1), MaxValueValidator(maximum)],
        help_text=help_text,
        **kwargs,
    )


def bounded(
    field: str,
    *,
    nullable: bool = True,
    allow_zero: bool = False,
    maximum: float = MAX_QUANTITY,
    minimum: float | None = None,
) -> models.CheckConstraint:
    """CHECK that ``field`` lies in (0, maximum] (or [0, maximum]); NULL passes if nullable.

    The upper bound is what keeps NaN and Infinity out on PostgreSQL.
    """
    if minimum is not None:
        rule = Q(**{f"{field}__gte": minimum, f"{field}__lte": maximum})
    elif allow_zero:
        rule = Q(**{f"{field}__gte": 0, f"{field}__lte": maximum})
    else:
        rule = Q(**{f"{field}__gt": 0, f"{field}__lte": maximum})
    if nullable:
        rule = Q(**{f"{field}__isnull": True}) | rule
    return models.CheckConstraint(condition=rule, name=f"%(app_label)s_%(class)s_{field}_range")
