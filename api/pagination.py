"""Page-number pagination: ``?page=N&page_size=M`` with at most 100 items per page.

Both parameters are validated (integers, once each, in range): a bad value is a 400 with
the parameter named, never silently replaced by the default.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination

MAX_PAGE_SIZE = 100
#: Highest page number accepted (beyond any real listing at 100 per page).
MAX_PAGE = 1_000_000


def _int_param(request: Any, name: str, minimum: int, maximum: int) -> int | None:
    values = request.query_params.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        raise ValidationError({name: ["Give this parameter once."]})
    text = values[0]
    if not text.isdigit() or not minimum <= int(text) <= maximum:
        raise ValidationError({name: [f"Must be an integer from {minimum} to {maximum}."]})
    return int(text)


class Pagination(PageNumberPagination):
    """50 items per page by default; ``page_size`` from 1 to 100."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def get_page_size(self, request: Any) -> int:
        size = _int_param(request, self.page_size_query_param, 1, MAX_PAGE_SIZE)
        return self.page_size if size is None else size

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> Any:
        _int_param(request, self.page_query_param, 1, MAX_PAGE)
        return super().paginate_queryset(queryset, request, view)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        params = super().get_schema_operation_parameters(view)
        for param in params:
            if param["name"] == self.page_size_query_param:
                param["schema"].update(minimum=1, maximum=MAX_PAGE_SIZE)
            elif param["name"] == self.page_query_param:
                param["schema"].update(minimum=1, maximum=MAX_PAGE)
        return params
