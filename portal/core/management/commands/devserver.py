"""`make run`: the web server, a Celery worker, the sweeper's worker and beat together;
Ctrl-C stops all."""

import os
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from portal.celery import app
from provisioning.storage.embedded import start_embedded_s3


class Command(BaseCommand):
    help = "Run the web server, a Celery worker and beat for local development."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000")
        parser.add_argument("--no-s3", action="store_true",
                            help="do not start the embedded loopback S3 for the on-site provider")

    def handle(self, *args, addr, no_s3=False, **options):
        python = sys.executable
        env = os.environ.copy()
        # Links in e-mails (worker) and pages (web) point where this server listens, unless the
        # operator set SITE_URL (e.g. behind a proxy).
        env.setdefault("SITE_URL", dev_site_url(addr))
        s3 = None if no_s3 else self._start_s3(env)
        commands = {
            "worker": [python, "-m", "celery", "-A", "portal", "worker", "-l", "INFO",
                       "--concurrency", "2", "-Q", settings.CELERY_TASK_DEFAULT_QUEUE,
                       "-n", "worker@%h"],
            # The sweep has its own queue and worker, so a backlog of steps cannot starve it.
            "sweeper": [python, "-m", "celery", "-A", "portal", "worker", "-l", "INFO",
                        "--concurrency", "1", "-Q", settings.CELERY_SWEEP_QUEUE,
                        "-n", "sweeper@%h"],
            "beat": [python, "-m", "celery", "-A", "portal", "beat", "-l", "INFO",
                     "--schedule", str(settings.VAR_DIR / "celerybeat-schedule")],
            "web": [python, "manage.py", "runserver", addr, "--noreload"],
        }
        procs = {}
        for name, cmd in commands.items():
            procs[name] = subprocess.Popen(cmd, env=env)
            if name in WORKERS:
                # kombu's filesystem transport rewrites an exchange's file without a lock: two
                # workers binding their queues at once can leave it half written for the other
                # (JSONDecodeError in _queue_bind). One at a time: the next starts once this
                # one answers.
                _wait_for_worker(f"{name}@", procs[name], timeout=WORKER_START_S)
        stopping = False
        announced = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not stopping:
                exited = [name for name, p in procs.items() if p.poll() is not None]
                if exited:
                    self.stderr.write(f"{', '.join(exited)} exited; stopping the others.")
                    break
                if not announced and _answers(addr):
                    announced = True
                    self.stdout.write(self.style.SUCCESS(
                        f"\nTrainyard is running at http://{addr}/  (Ctrl-C stops; links in "
                        f"e-mails use {env['SITE_URL']})\n"))
                time.sleep(0.5)
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs.values():
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
            if s3 is not None:
                s3.stop()

    def _start_s3(self, env: dict):
        """The on-site provider (catalog slug "minio") served by a real S3+IAM server on loopback
        (moto), unless the environment already names its admin key (a real MinIO)."""
        if env.get("STORAGE_MINIO_ACCESS_KEY") or env.get("STORAGE_MINIO_ACCESS_KEY_FILE"):
            return None
        try:
            s3 = start_embedded_s3(enforce_auth=True)
        except (ImportError, OSError) as exc:
            self.stderr.write(f"embedded S3 not started ({exc}); orders with a bucket will fail "
                              f"their storage step until STORAGE_MINIO_* is set")
            return None
        env.update(embedded_s3_env(s3))
        self.stdout.write(f"Object storage (on-site provider): {s3.endpoint_url}  "
                          f"(embedded S3, loopback; buckets last while this runs)")
        return s3


def embedded_s3_env(s3) -> dict[str, str]:
    """STORAGE_MINIO_* for the web server and the worker: the on-site provider is ``s3``."""
    return {"STORAGE_MINIO_ADAPTER": "provisioning.storage.iam.IamProvider",
            "STORAGE_MINIO_ENDPOINT_URL": s3.endpoint_url,
            "STORAGE_MINIO_IAM_ENDPOINT_URL": s3.endpoint_url,
            "STORAGE_MINIO_PUBLIC_ENDPOINT_URL": s3.endpoint_url,
            "STORAGE_MINIO_ACCESS_KEY": s3.access_key, "STORAGE_MINIO_SECRET_KEY": s3.secret_key,
            "STORAGE_CREDENTIAL_PROPAGATION_S": env_or("STORAGE_CREDENTIAL_PROPAGATION_S", "5")}


def dev_site_url(addr: str) -> str:
    """The address `make run` serves, as a URL: "0.0.0.0:8123" → "http://localhost:8123"."""
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = "localhost"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def env_or(name: str, default: str) -> str:
    return os.environ.get(name) or default


WORKERS = ("worker", "sweeper")
WORKER_START_S = 60


def _wait_for_worker(prefix: str, proc: subprocess.Popen, *, timeout: float) -> None:
    """Until the worker named ``prefix…`` answers a ping, it exits, or ``timeout`` passes (then
    the rest starts anyway and the worker's own log says what is wrong)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if any(name.startswith(prefix) for reply in app.control.ping(timeout=0.5) for name in reply):
            return
        time.sleep(0.2)


def _answers(addr: str) -> bool:
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False
