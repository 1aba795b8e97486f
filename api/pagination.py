"""Page-number pagination: ``?page=N&page_size=M`` with at most 100 items per page."""

from rest_framework.pagination import PageNumberPagination

MAX_PAGE_SIZE = 100


class Pagination(PageNumberPagination):
    """50 items per page by default; ``page_size`` up to 100."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE
