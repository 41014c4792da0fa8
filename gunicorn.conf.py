"""gunicorn reads this file from the working directory (the image's /app)."""

import os


def child_exit(server, worker):
    """A worker that exits leaves its live gauges behind in multiprocess mode: mark it dead."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess  # noqa: PLC0415 - only under gunicorn

        multiprocess.mark_process_dead(worker.pid)
