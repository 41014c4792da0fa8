"""`make run`: the web server and a Celery worker (and beat) together; Ctrl-C stops all."""

import os
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the web server, a Celery worker and beat for local development."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000")

    def handle(self, *args, addr, **options):
        python = sys.executable
        commands = {
            "worker": [python, "-m", "celery", "-A", "portal", "worker", "-l", "INFO",
                       "--concurrency", "2"],
            "beat": [python, "-m", "celery", "-A", "portal", "beat", "-l", "INFO",
                     "--schedule", str(settings.VAR_DIR / "celerybeat-schedule")],
            "web": [python, "manage.py", "runserver", addr, "--noreload"],
        }
        procs = {name: subprocess.Popen(cmd, env=os.environ.copy()) for name, cmd in commands.items()}
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
                        f"\nTrainyard is running at http://{addr}/  (Ctrl-C stops)\n"))
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


def _answers(addr: str) -> bool:
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False
