from rest_framework.pagination import CursorPagination


class NewestFirstCursor(CursorPagination):
    """Stable pages while rows are added: `?cursor=` from `next`; `limit` up to 200."""

    ordering = ("-created_at", "-pk")
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200
