import socket

from celery import shared_task


@shared_task(name="core.health_ping", ignore_result=False)  # its caller reads the result
def health_ping() -> dict:
    """Proves a worker picks up tasks and can answer."""
    return {"status": "ok", "worker": socket.gethostname()}
