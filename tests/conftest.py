"""Shared fixtures. Real services: PostgreSQL, Redis, a Celery worker process, Chromium.

With CI=true a test whose service is missing fails; elsewhere it is skipped with the reason.
"""

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pytest

from portal.accounts.models import Membership, Organisation, User
from tests.factories import OrganisationFactory, member_of, staff, verified_login
from tests.tenancy_world import tenants

pytest_plugins = ["tests.provisioning.conftest_sshd", "tests.provisioning.storage.s3server",
                  "tests.security.outbound", "tests.engines.conftest_ironic"]

REPO_ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() == "true"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
# OUTBOUND_ALLOWED_NETWORKS for tests whose receivers or S3 servers listen on loopback.
LOOPBACK_NETWORKS = ["127.0.0.0/8", "::1/128"]


def missing_service(reason: str):
    """Fail under CI (a missing service is a broken CI), skip on a developer's machine."""
    if IN_CI:
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def _port_open(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1",
                                       parsed.port or default_port), timeout=1):
            return True
    except OSError:
        return False


# Acceptance on a CPU test host trains this many steps per phase (30 on a node): the loss of
# the smoke model falls ~90 % within 6, and each step is ~0.3 s of CPU per process here.
TEST_ACCEPTANCE_STEPS = 8


@pytest.fixture(autouse=True)
def fast_test_settings(settings):
    """PBKDF2 costs ~0.3 s per user created; tests don't need it to be slow. Nor acceptance."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.PROVISIONING_ACCEPTANCE_STEPS = TEST_ACCEPTANCE_STEPS


@pytest.fixture(autouse=True)
def catalog_cache_cleared():
    """Each process keeps the catalog in memory (portal.catalog.cache); a test's rolled-back
    rows must not outlive it there."""
    from portal.catalog.cache import catalog_cache_clear

    catalog_cache_clear()
    yield
    catalog_cache_clear()


@pytest.fixture
def require_postgres(settings):
    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        missing_service("this test needs PostgreSQL: set DATABASE_URL=postgres://…")


@pytest.fixture
def require_redis(settings):
    if not settings.REDIS_URL:
        missing_service("this test needs Redis: set REDIS_URL=redis://127.0.0.1:6379/0")
    if not _port_open(settings.REDIS_URL, 6379):
        missing_service(f"Redis at {settings.REDIS_URL} does not answer")


@pytest.fixture
def celery_worker_process(require_redis, transactional_db, settings, tmp_path):
    """A real `celery worker` process on its own queue, sharing the test database."""
    from django.db import connection

    from portal.celery import app

    queue = f"test-{uuid.uuid4().hex[:10]}"
    env = os.environ.copy()
    env.update(worker_env(connection.settings_dict, settings))
    env["CELERY_QUEUE"] = queue
    log = tmp_path / "worker.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "INFO",
         "--concurrency", "2", "-Q", f"{queue},{queue}.sweep", "-n", f"{queue}@%h", "--without-mingle",
         "--without-gossip"],
        cwd=REPO_ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
    )
    old_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
        wait_for_worker(app, f"{queue}@", proc, log)
        yield WorkerHandle(proc=proc, queue=queue, log=log, env=env)
    finally:
        app.conf.task_default_queue = old_queue
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


class WorkerHandle:
    def __init__(self, *, proc, queue, log, env):
        self.proc, self.queue, self.log, self.env = proc, queue, log, env

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def worker_env(db: dict, settings) -> dict:
    """DATABASE_URL of the *test* database, so the worker sees what the test committed."""
    if db["ENGINE"] == "django.db.backends.postgresql":
        user = db.get("USER") or "postgres"
        auth = f"{user}:{db['PASSWORD']}@" if db.get("PASSWORD") else f"{user}@"
        url = f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    else:
        url = f"sqlite:///{db['NAME']}"
    return {"DATABASE_URL": url, "REDIS_URL": settings.REDIS_URL,
            "PROVISIONING_ACCEPTANCE_STEPS": str(TEST_ACCEPTANCE_STEPS)}


def wait_for_worker(app, name_prefix: str, proc, log, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"celery worker exited early:\n{log.read_text()[-3000:]}")
        replies = app.control.ping(timeout=0.5)
        if any(name.startswith(name_prefix) for reply in replies for name in reply):
            return
    pytest.fail(f"celery worker did not answer within {timeout}s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def browser():
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        missing_service(f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs a loop
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        yield browser
        browser.close()


# How long a page may take to answer: generous, because the live server shares 2 cores with
# test processes that train models (the wizard's plans took over 15 s once under that load).
PAGE_TIMEOUT_MS = 45_000
# How long a page may wait for a whole pipeline to finish: its acceptance step trains for real
# (DDP, then FSDP2, on CPU) on those same 2 cores, which took over 60 s once under CI's load.
PIPELINE_TIMEOUT_MS = 240_000


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    yield page
    context.close()


@pytest.fixture
def emails_inline(monkeypatch):
    """Order e-mails queued on commit run in this process, as the worker would run the task
    (with ``django_capture_on_commit_callbacks(execute=True)``)."""
    from portal.orders.tasks import order_event_notify_task

    monkeypatch.setattr(order_event_notify_task, "delay", lambda event_id: order_event_notify_task(event_id))


@pytest.fixture
def login(client):
    """Signs ``user`` in, past the second factor where they need one."""
    def _login(user):
        return verified_login(client, user)

    return _login


@pytest.fixture
def catalog(db):
    from portal.catalog.services import catalog_seed

    catalog_seed()


# --- people: alice (customer), charlie (outsider), rita (reseller admin), sam, olga (staff) ---
@dataclass
class People:
    acme: Organisation  # alice's organisation
    alice: User  # customer member of acme
    outsider_org: Organisation
    charlie: User  # member of another customer
    reseller: Organisation
    rita: User  # reseller admin
    client_org: Organisation  # the reseller's customer
    sam: User  # staff approver
    olga: User  # operator


@pytest.fixture
def people(db) -> People:
    acme = OrganisationFactory(name="Acme AI", slug="acme-ai")
    outsider = OrganisationFactory(name="Other Lab", slug="other-lab")
    reseller = OrganisationFactory(name="GPU Resale", slug="gpu-resale",
                                   kind=Organisation.Kind.RESELLER)
    client = OrganisationFactory(name="Resale Client", slug="resale-client", parent=reseller)
    rita = member_of(reseller, username="rita")
    Membership.objects.filter(user=rita).update(role=Membership.Role.RESELLER_ADMIN)
    return People(
        acme=acme, alice=member_of(acme, username="alice"), outsider_org=outsider,
        charlie=member_of(outsider, username="charlie"), reseller=reseller, rita=rita,
        client_org=client, sam=staff(User.StaffRole.APPROVER, username="sam"),
        olga=staff(User.StaffRole.OPERATOR, username="olga"),
    )


@pytest.fixture
def sim_dir(tmp_path):
    """Where simulated nodes keep their journal (shared with worker processes)."""
    path = tmp_path / "simulated"
    path.mkdir()
    return path


@pytest.fixture
def tenancy_world(catalog, people, monkeypatch):
    """Organisation A (a reseller and its customer, one of every object) and two strangers B, for
    the tenancy walks (tests/tenancy_world.py)."""
    return tenants(people.olga, monkeypatch)


@pytest.fixture(params=["reseller", "no reseller"])
def stranger(request, tenancy_world):
    """B's side that walks A (its key, its admin): an unrelated reseller's, or an organisation's
    that is none."""
    return tenancy_world.b_reseller[0] if request.param == "reseller" else tenancy_world.b_plain
