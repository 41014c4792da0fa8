"""The batch delete every retention task uses, and the window arithmetic."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.sessions.models import Session
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.core.retention import delete_in_batches, retention_cutoff

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def test_a_window_is_days_before_now_and_zero_keeps_everything():
    assert retention_cutoff(30, now=NOW) == NOW - timedelta(days=30)
    assert retention_cutoff(0, now=NOW) is None
    with pytest.raises(ValueError, match="0 \\(keep\\) or a number of days"):
        retention_cutoff(-1, now=NOW)


@pytest.mark.django_db
def test_it_deletes_in_batches_each_its_own_statement():
    expired = timezone.now() - timedelta(days=1)
    Session.objects.bulk_create(Session(session_key=f"k{i:03d}", session_data="x", expire_date=expired)
                                for i in range(7))
    Session.objects.create(session_key="live", session_data="x",
                           expire_date=timezone.now() + timedelta(days=1))
    with CaptureQueriesContext(connection) as queries:
        deleted = delete_in_batches(Session.objects.filter(expire_date__lt=timezone.now()), batch_size=3)
    assert deleted == {"sessions.Session": 7}
    assert list(Session.objects.values_list("session_key", flat=True)) == ["live"]
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("DELETE")]
    assert len(deletes) == 3  # 3 + 3 + 1
    assert delete_in_batches(Session.objects.filter(expire_date__lt=timezone.now()), batch_size=3) == {}


def test_a_batch_size_below_one_is_refused():
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        delete_in_batches(Session.objects.none(), batch_size=0)


def test_every_table_has_a_retention_rule_or_a_reason_to_be_kept():
    """docs/operations.md "Retention" names every model's table (catalog tables by their suffix)."""
    from django.apps import apps

    from tests.conftest import REPO_ROOT

    text = (REPO_ROOT / "docs" / "operations.md").read_text()
    section = text[text.index("## Retention"):]
    section = section[:section.index("\n## ", 1)]
    named = set(re.findall(r"`([a-z_]+)`", section))
    named |= {f"catalog_{suffix}" for suffix in named}
    tables = {model._meta.db_table for model in apps.get_models(include_auto_created=True)}
    assert tables - named == set()
