from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination


class NewestFirstCursor(CursorPagination):
    """Stable pages while rows are added: `?cursor=` from `next`; `limit` up to 200."""

    ordering = ("-created_at", "-pk")
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200

    def decode_cursor(self, request):
        """DRF's cursor with its position read as the aware time it names; a position that names
        none is DRF's 404 "Invalid cursor", as any other bad part of a cursor is (the ORM's parse
        would answer 400)."""
        cursor = super().decode_cursor(request)
        if cursor is None or cursor.position is None:
            return cursor
        try:
            at = parse_datetime(cursor.position)
        except ValueError:
            at = None
        if at is None or timezone.is_naive(at):
            raise NotFound(self.invalid_cursor_message)
        return cursor._replace(position=at)
