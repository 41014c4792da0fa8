"""Database blips are transient: close the broken connection and try again with backoff.

PostgreSQL restarts, failovers, idle timeouts and terminated backends surface in Django as
``OperationalError`` / ``InterfaceError`` on the next query. The pipeline's writes are
conditional on the claim, so repeating one is safe."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

logger = logging.getLogger(__name__)

DB_ERRORS = (OperationalError, InterfaceError)
T = TypeVar("T")


def reset_connection() -> None:
    """Drops this thread's connection (a new one opens on the next query)."""
    if connection.in_atomic_block:
        return  # the caller's transaction ends first; its error reaches the outermost caller
    try:
        connection.close()
    except DB_ERRORS:
        pass


def with_db_retry(fn: Callable[[], T], *, what: str) -> T:
    """Runs ``fn``; on a database error closes the connection and runs it again, up to
    ``PROVISIONING_DB_RETRIES`` times with backoff; then the last error propagates."""
    tries = settings.PROVISIONING_DB_RETRIES
    for attempt in range(1, tries + 1):
        try:
            return fn()
        except DB_ERRORS as exc:
            if attempt >= tries or connection.in_atomic_block:
                raise
            delay = min(5.0, 0.2 * 2 ** (attempt - 1))
            logger.warning("database error while %s (try %d of %d): %s; retrying in %.1f s",
                           what, attempt, tries, exc, delay)
            reset_connection()
            time.sleep(delay)
    raise AssertionError("unreachable")
