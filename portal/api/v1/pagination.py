from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination


class NewestFirstCursor(CursorPagination):
    """Stable pages while rows are added: `?cursor=` from `next`; `limit` from 1 to 200 (another
    value is a 400, never silently the default)."""

    ordering = ("-created_at", "-pk")
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200

    def get_page_size(self, request):
        values = request.query_params.getlist(self.page_size_query_param)
        if not values:
            return self.page_size
        if len(values) > 1 or not values[0].isdigit() or not 1 <= int(values[0]) <= self.max_page_size:
            raise ValidationError({self.page_size_query_param: [
                f"A whole number from 1 to {self.max_page_size}, given once."]})
        return int(values[0])

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_page_size}
        return parameters

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
