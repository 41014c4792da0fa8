"""values() querysets whose SQL is compiled once per shape and run again with other values.

Django builds a queryset's SQL anew every time one is evaluated: for an API page of 22 columns
over two joins that took ~0.5 ms, more than PostgreSQL takes to run the prepared statement
(docs/operations.md, "API throughput"). Where the SQL depends only on a query's *shape* (its
root, the lookups it filters on, its ordering and slice) and not on the values it compares, the
ORM's SQL, parameter positions and row converters are kept per shape, and later queries of the
same shape bind their own values in those positions.

``CompiledQuerySet(Model).values(...)`` builds a root as usual; ``root.compiled(key)`` marks it
(``key`` names it; the root's own SQL and parameters join the key, so roots that differ never
share a shape). Of the operations
after it, ``filter(**lookups)``, ``order_by(*names)``, slices and ``get()`` are recorded and keep
the query compiled; any other operation (``exclude``, ``annotate``, a ``Q``…) makes an ordinary
queryset of it. A lookup value is bound only when it is a ``str``, an aware ``datetime`` or a
tuple, list or set of distinct ``str`` (``__in``): other values (``None``, ints, expressions)
change the SQL or are converted by the ORM, so such a query runs as an ordinary one.

A shape is compiled from its first query, and checked: the recorded operations replayed on the
root give the same SQL and parameters, and varying each value alone changes only its own
parameter, to exactly that value. A shape that fails the check, or that the ORM cannot compile
(an empty ``__in``), runs through the ORM every time: an answer never depends on this cache.
"""

from __future__ import annotations

import datetime
import threading
from collections import OrderedDict
from collections.abc import Hashable
from contextlib import suppress
from dataclasses import dataclass

from django.core.exceptions import EmptyResultSet, FullResultSet
from django.db import connections
from django.db.models.query import QuerySet, ValuesIterable

MAX_SHAPES = 4096  # per process, the least recently used forgotten first (an entry is its SQL)


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple  # the first query's; the bound values' positions are overwritten
    slots: tuple[tuple[int, int], ...]  # (position in params, index of the bound value)
    names: tuple[str, ...]  # the values() keys, in column order
    trim: int | None  # columns to keep when the ORM selects more (to order by); None: all
    converters: tuple  # (column, functions, expression): the ORM's from_db_value and backend's

    def run(self, alias: str, values: list) -> list[dict]:
        params = list(self.params)
        for position, index in self.slots:
            params[position] = values[index]
        connection = connections[alias]
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)
            rows = cursor.fetchall()
        if self.trim is not None:
            rows = [row[:self.trim] for row in rows]
        if self.converters:
            rows = [list(row) for row in rows]
            for column, functions, expression in self.converters:
                for row in rows:
                    value = row[column]
                    for convert in functions:
                        value = convert(value, expression, connection)
                    row[column] = value
        names = self.names
        return [dict(zip(names, row, strict=True)) for row in rows]


_UNCOMPILED = object()  # a shape the ORM runs every time
_lock = threading.Lock()
_shapes: OrderedDict[tuple, _Compiled | object] = OrderedDict()


class CompiledQuerySet(QuerySet):
    """A values() queryset that, from ``compiled(key)`` on, runs its shape's SQL (see the module)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._root: tuple | None = None  # ((key, root SQL, root parameters), the root queryset)
        self._ops: tuple | None = None  # recorded operations; None: an ordinary queryset

    def compiled(self, key: Hashable) -> CompiledQuerySet:
        """This queryset as the root of compiled queries; ``key`` names all its SQL depends on.
        The root's own SQL and parameters join the key, so two roots that differ (another
        tenant's organisation in its filter, say) never share a shape whatever the key says."""
        if self._iterable_class is not ValuesIterable:
            raise TypeError("compiled() takes a values() queryset")
        sql, params = self.query.get_compiler(self.db).as_sql()
        clone = self._chain()
        clone._root, clone._ops = ((key, sql, tuple(params)), self), ()
        hash(clone._root[0])  # a root whose parameters cannot be a key is a caller's error
        return clone

    def _clone(self):
        clone = super()._clone()
        clone._root = self._root  # _ops stays None: an operation not recorded below
        return clone

    def _recorded(self, clone: CompiledQuerySet, op: tuple | None) -> CompiledQuerySet:
        clone._ops = None if self._ops is None or op is None else (*self._ops, op)
        return clone

    def all(self):
        return self._recorded(super().all(), ())

    def filter(self, *args, **kwargs):
        lookups = None if args else _bindable(kwargs)
        if lookups is None:
            return self._recorded(super().filter(*args, **kwargs), None)
        return self._recorded(super().filter(**dict(lookups)), ("filter", lookups))

    def order_by(self, *field_names):
        names = field_names if all(type(n) is str for n in field_names) else None
        return self._recorded(super().order_by(*field_names), None if names is None else ("order_by", names))

    def __getitem__(self, k):
        out = super().__getitem__(k)
        if isinstance(out, CompiledQuerySet) and out is not self:
            out._ops = self._ops  # a slice sets the limits, which are read when the query runs
        return out

    def _fetch_all(self):
        if self._result_cache is None and self._ops is not None and not self._prefetch_related_lookups:
            self._result_cache = _run(self)
        super()._fetch_all()


def _bindable(kwargs: dict) -> tuple | None:
    """The lookups as (name, value) pairs, text as plain str (a TextChoices member is its value),
    a set as a sorted tuple; None when a value is not bound."""
    out = []
    for name, value in kwargs.items():
        if isinstance(value, (set, frozenset, list, tuple)):
            texts = tuple(str.__str__(v) for v in value if isinstance(v, str))
            if len(set(texts)) != len(value):  # not all text, or a repeat (the ORM drops repeats)
                return None
            value = tuple(sorted(texts)) if isinstance(value, (set, frozenset)) else texts
        elif isinstance(value, str):
            value = str.__str__(value)
        elif type(value) is not datetime.datetime or value.tzinfo is None:
            value = None
        if value is None or value == ():
            return None
        out.append((name, value))
    return tuple(out)


def _shape_and_values(qs: CompiledQuerySet) -> tuple[tuple, list]:
    shape, values = [], []
    for op in qs._ops:
        if op and op[0] == "filter":
            shape.append(("filter", tuple((name, len(v) if type(v) is tuple else type(v).__name__)
                                          for name, v in op[1])))
            for _, value in op[1]:
                values.extend(value if type(value) is tuple else (value,))
        else:
            shape.append(op)
    query = qs.query
    return (qs._root[0], qs.db, tuple(shape), query.low_mark, query.high_mark), values


def _run(qs: CompiledQuerySet) -> list[dict] | None:
    """The rows of a compiled query, or None to let the ORM run it."""
    key, values = _shape_and_values(qs)
    entry = _shapes.get(key)
    if entry is None:
        entry = _compile(qs, values)
        with _lock:
            _shapes[key] = entry
            while len(_shapes) > MAX_SHAPES:
                _shapes.popitem(last=False)
    else:
        with suppress(KeyError):  # forgotten meanwhile by another thread's insert
            _shapes.move_to_end(key)
    if entry is _UNCOMPILED:
        return None
    return entry.run(qs.db, values)


def _replay(qs: CompiledQuerySet, values: list) -> QuerySet:
    """The root with qs's recorded operations, filtering on ``values`` (flattened), and its limits."""
    out, it = QuerySet.all(qs._root[1]), iter(values)
    for op in qs._ops:
        if not op:
            continue
        if op[0] == "order_by":
            out = QuerySet.order_by(out, *op[1])
        else:
            lookups = {}
            for name, value in op[1]:
                lookups[name] = tuple(next(it) for _ in value) if type(value) is tuple else next(it)
            out = QuerySet.filter(out, **lookups)
    out.query.set_limits(qs.query.low_mark, qs.query.high_mark)
    return out


def _sql(qs: QuerySet) -> tuple:
    return qs.query.get_compiler(qs.db).as_sql()


def _varied(values: list, index: int) -> list:
    """values with the one at index changed: text to a text none of them is (the ORM drops
    repeats in an ``__in``), a time by a microsecond (back from the latest time there is)."""
    value = values[index]
    if type(value) is str:
        varied = value + "~"
        while varied in values:
            varied += "~"
    else:
        step = datetime.timedelta(microseconds=1)
        varied = value - step if value.replace(tzinfo=None) == datetime.datetime.max else value + step
    return [*values[:index], varied, *values[index + 1:]]


def _compile(qs: CompiledQuerySet, values: list) -> _Compiled | object:
    """The shape of qs compiled and checked (module docstring), or _UNCOMPILED."""
    compiler = qs.query.get_compiler(qs.db)
    try:
        sql, params = compiler.as_sql()
    except (EmptyResultSet, FullResultSet):
        return _UNCOMPILED
    try:
        if _sql(_replay(qs, values)) != (sql, params):
            return _UNCOMPILED  # something the recorded operations do not say shaped the query
        slots = []
        for index, value in enumerate(values):
            varied = _varied(values, index)
            other_sql, other = _sql(_replay(qs, varied))
            moved = [p for p, (a, b) in enumerate(zip(params, other, strict=True)) if a != b]
            if other_sql != sql or len(moved) != 1 or params[moved[0]] != value or other[moved[0]] != varied[
                    index]:
                return _UNCOMPILED  # the value shapes the SQL or the ORM converts it
            slots.append((moved[0], index))
    except Exception:  # a varied value the field refuses (a time given as text, say): the ORM runs it
        return _UNCOMPILED
    query = qs.query
    width = compiler.col_count
    fields = [expression for expression, _, _ in compiler.select[:width]]
    converters = tuple((column, tuple(functions), expression)
                       for column, (functions, expression) in compiler.get_converters(fields).items())
    names = tuple(query.selected or (*query.extra_select, *query.values_select, *query.annotation_select))
    if len(names) != width:
        return _UNCOMPILED
    return _Compiled(sql, tuple(params), tuple(slots), names, width if compiler.has_extra_select else None,
                     converters)


def forget_compiled() -> None:
    """Drop every compiled shape (tests)."""
    with _lock:
        _shapes.clear()
