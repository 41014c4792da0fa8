"""Keyset pagination for long lists, newest first: a page is read by an index range from the
last row shown (``older``) or the first (``newer``), so page 400 costs what page 1 costs, where
an offset would read and drop every row before it.

The cursor is ``<microseconds since the epoch>.<pk>`` of the row the page starts after; a
cursor that does not parse is the first page (a link typed by hand is not an error page)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import QuerySet

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class KeysetPage:
    rows: list
    older: str  # cursor of the next page of older rows; "" on the last page
    newer: str  # cursor of the page of newer rows; "" on the first page

    @property
    def has_other_pages(self) -> bool:
        return bool(self.older or self.newer)

    @property
    def is_first(self) -> bool:
        return not self.newer

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __bool__(self) -> bool:
        return bool(self.rows)


def cursor_for(at: datetime, pk: int) -> str:
    return f"{(at - EPOCH) // MICROSECOND}.{pk}"


def cursor_parse(cursor: str | None) -> tuple[datetime, int] | None:
    micros, _, pk = (cursor or "").partition(".")
    if not (micros.lstrip("-").isdigit() and pk.isdigit()) or len(micros) > 18 or len(pk) > 18:
        return None
    return EPOCH + int(micros) * MICROSECOND, int(pk)


def keyset_page(rows: QuerySet, *, field: str, size: int, older: str | None = None,
                newer: str | None = None) -> KeysetPage:
    """One page of ``rows`` newest first by (``field``, pk): the rows older than the cursor
    ``older``, or (when given instead) the rows newer than ``newer``. An index on
    (``field`` DESC, id DESC), after the list's equality filters, serves every page."""
    after = cursor_parse(older)
    before = None if after else cursor_parse(newer)
    if before is not None:
        at, pk = before
        # The page just above the cursor: read upwards, then show it newest first.
        found = list(rows.filter(**{f"{field}__gte": at}).exclude(**{field: at, "pk__lte": pk})
                     .order_by(field, "pk")[:size + 1])
        more_newer = len(found) > size
        page = list(reversed(found[:size]))
        return KeysetPage(rows=page, older=_cursor(page[-1], field) if page else "",
                          newer=_cursor(page[0], field) if page and more_newer else "")
    query = rows.order_by(f"-{field}", "-pk")
    if after is not None:
        at, pk = after
        query = query.filter(**{f"{field}__lte": at}).exclude(**{field: at, "pk__gte": pk})
    found = list(query[:size + 1])
    page = found[:size]
    return KeysetPage(rows=page, older=_cursor(page[-1], field) if len(found) > size else "",
                      newer=_cursor(page[0], field) if after is not None and page else "")


def _cursor(row, field: str) -> str:
    return cursor_for(getattr(row, field), row.pk)
