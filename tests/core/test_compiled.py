"""A compiled values() query answers exactly what the ORM answers, with each query's own values;
it compiles once per shape; anything it cannot bind runs through the ORM."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.accounts.models import Organisation
from portal.core import compiled
from portal.core.compiled import CompiledQuerySet
from portal.orders.models import Order
from portal.orders.states import OrderState
from tests.factories import make_order

COLUMNS = ("reference", "organisation__slug", "state", "created_at", "price_hourly", "plan")


@pytest.fixture(autouse=True)
def no_shapes():
    compiled.forget_compiled()
    yield
    compiled.forget_compiled()


@pytest.fixture
def orders(catalog, people):
    made = [make_order(people.acme, state=state) for state in
            (OrderState.DRAFT, OrderState.ACTIVE, OrderState.ACTIVE, OrderState.REJECTED)]
    made.append(make_order(people.outsider_org, state=OrderState.ACTIVE))
    Order.objects.filter(pk=made[0].pk).update(created_at=timezone.now() - timedelta(days=3))
    return made


def _root(org):
    plain = Order.objects.values(*COLUMNS).filter(organisation=org)
    ours = CompiledQuerySet(Order).values(*COLUMNS).filter(organisation=org).compiled(("orders", org.pk))
    return ours, plain


def _compiles(monkeypatch) -> list:
    made = []
    compile_shape = compiled._compile
    monkeypatch.setattr(compiled, "_compile", lambda qs, values: made.append(qs) or compile_shape(qs, values))
    return made


def test_each_query_of_a_shape_binds_its_own_values_and_compiles_once(orders, people, monkeypatch):
    made = _compiles(monkeypatch)
    root, plain = _root(people.acme)
    answers = []
    for state in (OrderState.ACTIVE, OrderState.DRAFT, OrderState.REJECTED, "no-such-state"):
        ours = list(root.filter(state=state).order_by("-created_at", "-pk"))
        assert ours == list(plain.filter(state=state).order_by("-created_at", "-pk"))
        answers.append([o["reference"] for o in ours])
    assert answers == [[orders[2].reference, orders[1].reference], [orders[0].reference],
                       [orders[3].reference], []]
    assert len(made) == 1
    first = root.filter(state=OrderState.ACTIVE).order_by("-created_at", "-pk")[:1]
    assert [o["reference"] for o in first] == [orders[2].reference]
    assert len(made) == 2  # a slice: another shape


def test_in_lists_times_and_get_are_bound(orders, people, monkeypatch):
    made = _compiles(monkeypatch)
    root, plain = _root(people.acme)
    since = timezone.now() - timedelta(days=1)
    for states in ({OrderState.ACTIVE, OrderState.DRAFT}, [OrderState.REJECTED, OrderState.DRAFT]):
        ours = list(root.filter(state__in=states, created_at__lt=since + timedelta(days=5)).order_by("pk"))
        assert ours == list(plain.filter(state__in=states, created_at__lt=since + timedelta(days=5))
                            .order_by("pk"))
    assert [o["reference"] for o in root.filter(created_at__gte=since).order_by("pk")] == [
        o.reference for o in orders[1:4]]
    assert root.get(reference=orders[2].reference) == plain.get(reference=orders[2].reference)
    with pytest.raises(Order.DoesNotExist):
        root.get(reference=orders[4].reference)  # the outsider's: not in this root
    assert len(made) == 3  # the lists of two states, the time filter, the get


def test_a_compiled_query_is_one_query_with_the_ORMs_values(orders, people):
    root, plain = _root(people.acme)
    list(root.filter(state=OrderState.ACTIVE))
    with CaptureQueriesContext(connection) as queries:
        rows = list(root.filter(state=OrderState.DRAFT))
    assert len(queries) == 1 and rows == list(plain.filter(state=OrderState.DRAFT))
    assert rows[0]["plan"] == orders[0].plan and rows[0]["created_at"].tzinfo is not None


def test_what_it_cannot_bind_runs_through_the_orm_and_is_right(orders, people, monkeypatch):
    made = _compiles(monkeypatch)
    root, plain = _root(people.acme)
    assert list(root.exclude(state=OrderState.ACTIVE)) == list(plain.exclude(state=OrderState.ACTIVE))
    assert list(root.filter(node_count=1)) == list(plain.filter(node_count=1))  # an int
    assert list(root.filter(state__in=[])) == []
    assert list(root.filter(rejection_reason=None)) == list(plain.filter(rejection_reason=None))
    assert not made  # none of these is a compiled shape
    text = (timezone.now() - timedelta(days=1)).isoformat()  # a time as text: the ORM parses it
    assert list(root.filter(created_at__gte=text)) == list(plain.filter(created_at__gte=text))
    assert made and compiled._shapes and all(v is compiled._UNCOMPILED for v in compiled._shapes.values())
    assert list(root.filter(created_at__gte=text)) == list(plain.filter(created_at__gte=text))


def test_roots_of_other_keys_never_share_sql(orders, people):
    acme, _ = _root(people.acme)
    other, _ = _root(people.outsider_org)
    assert [o["organisation__slug"] for o in acme.filter(state=OrderState.ACTIVE)] == ["acme-ai"] * 2
    assert [o["organisation__slug"] for o in other.filter(state=OrderState.ACTIVE)] == ["other-lab"]


def test_only_a_values_query_can_be_a_root(db):
    with pytest.raises(TypeError, match="values"):
        CompiledQuerySet(Organisation).compiled("organisations")


def test_an_odd_first_value_does_not_keep_its_shape_on_the_orm(orders, people):
    """The check varies each value without overflowing a time or repeating a text of the list."""
    import datetime

    root, plain = _root(people.acme)
    latest = datetime.datetime.max.replace(tzinfo=datetime.UTC)
    assert len(list(root.filter(created_at__lt=latest))) == 4
    states = ["active", "active~"]
    assert list(root.filter(state__in=states)) == list(plain.filter(state__in=states))
    if connection.vendor == "postgresql":  # SQLite's backend turns a time into text: never compiled there
        assert all(isinstance(e, compiled._Compiled) for e in compiled._shapes.values())
    else:
        assert isinstance(list(compiled._shapes.values())[-1], compiled._Compiled)


def test_the_least_recently_used_shape_is_forgotten_first(orders, people, monkeypatch):
    monkeypatch.setattr(compiled, "MAX_SHAPES", 2)
    root, _ = _root(people.acme)
    list(root.filter(state="active"))
    list(root.filter(reference="O-X"))
    list(root.filter(state="draft"))  # used again: the newest
    list(root.filter(state="active", reference="O-X"))  # a third shape: the reference one goes
    kept = [dict(shape[2]).get("filter") for shape in compiled._shapes]
    assert kept == [(("state", "str"),), (("state", "str"), ("reference", "str"))]
