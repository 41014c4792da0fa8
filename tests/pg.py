"""PostgreSQL helpers for tests that race real transactions in threads."""

import time
from collections.abc import Callable

from django.db import connection


def wait_until_blocked(pid_of: Callable[[], int | None], what: str, timeout_s: float = 30) -> None:
    """Polls until backend ``pid_of()`` waits for a lock (a row or an index entry).

    No timing is asserted: the deadline only keeps a broken test from hanging."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pid = pid_of()
        if pid is not None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
                row = cursor.fetchone()
            if row and row[0] == "Lock":
                return
        time.sleep(0.02)
    raise AssertionError(f"{what} never waited for a lock")
