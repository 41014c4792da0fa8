"""The lease on a claimed step: a thread renews it while the step runs.

Renewal survives database blips (the connection is closed and the update tried again) for as
long as the lease itself lasts. When the lease cannot be kept, or the row says the claim is no
longer ours (taken over, or a later run asked this execution to stop), the lease is *lost*: it
sets the fence's cancel event, which the driver watches, so the command on the node stops."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from provisioning.drivers import Fence
from provisioning.models import StepRun
from provisioning.pipeline.dbretry import DB_ERRORS, reset_connection
from provisioning.states import StepStatus

logger = logging.getLogger(__name__)


class Lease(threading.Thread):
    """Renews the claim ``token`` on step ``step_run_id``; ``lost`` says why it was lost."""

    def __init__(self, step_run_id: int, token: str, fence: Fence):
        super().__init__(daemon=True, name=f"lease-{step_run_id}")
        self.step_run_id, self.token, self.fence = step_run_id, token, fence
        self.lease_s = settings.PROVISIONING_STEP_LEASE_S
        self.done = threading.Event()
        self.lost: str = ""  # "" while held; else why the execution had to stop
        self.stop_requested = False  # a later run needs the node (not a takeover)

    def run(self) -> None:
        renewed_at = time.monotonic()
        wait = self.lease_s / 3
        try:
            while not self.done.wait(wait):
                try:
                    renewed = StepRun.objects.filter(
                        pk=self.step_run_id, claimed_by=self.token, status=StepStatus.RUNNING,
                        stop_requested=False,
                    ).update(lease_expires_at=timezone.now() + timedelta(seconds=self.lease_s))
                except DB_ERRORS as exc:
                    reset_connection()
                    # Keep trying while the lease we hold still runs; give up before it lapses.
                    if time.monotonic() - renewed_at > self.lease_s * 0.8:
                        self._lose(f"lease renewal failed for {self.lease_s} s: {exc}")
                        return
                    logger.warning("lease renewal failed, retrying: %s",
                                   exc, extra={"step_run": self.step_run_id})
                    wait = min(1.0, self.lease_s / 10)
                    continue
                if not renewed:
                    self._lose(self._why_not_ours())
                    return
                renewed_at, wait = time.monotonic(), self.lease_s / 3
        finally:
            connection.close()

    def _why_not_ours(self) -> str:
        try:
            row = (StepRun.objects.filter(pk=self.step_run_id)
                   .values("claimed_by", "status", "stop_requested").first())
        except DB_ERRORS:
            return "the claim could not be renewed"
        if row and row["claimed_by"] == self.token and row["stop_requested"]:
            self.stop_requested = True
            return "a later run needs this node"
        return "another execution took the step over"

    def _lose(self, why: str) -> None:
        self.lost = why
        self.fence.cancel.set()  # the driver stops the command on the node
        logger.warning("claim lost: %s", why, extra={"step_run": self.step_run_id})

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=5)
