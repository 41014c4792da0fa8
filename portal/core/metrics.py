"""The portal's own metrics (prometheus-client), read at /metrics by Prometheus: request latency
by view, pipeline steps by step, driver and outcome, webhook deliveries, provisioning failures,
and the Celery queues' depth (read from the broker at each scrape).

Under gunicorn (several processes) and Celery, set PROMETHEUS_MULTIPROC_DIR to a directory all of
them write (compose: a shared volume): each process writes its samples there and /metrics sums
them. Without it, each process counts for itself (``make run``: one process)."""

from __future__ import annotations

import logging
import os

import redis
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily

logger = logging.getLogger(__name__)
CONTENT_TYPE = CONTENT_TYPE_LATEST

REQUEST_SECONDS = Histogram(
    "trainyard_http_request_duration_seconds", "Time to answer a request, by view.",
    ["view", "method", "status"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
STEP_SECONDS = Histogram(
    "trainyard_pipeline_step_duration_seconds",
    "One execution of a pipeline step, by step, node driver and outcome "
    "(ok, transient, waiting, permanent, internal).",
    ["step", "driver", "outcome"], buckets=(0.1, 1, 5, 15, 60, 300, 900, 1800, 3600, 7200))
WEBHOOK_DELIVERIES = Counter(
    "trainyard_webhook_delivery_attempts_total",
    "Webhook delivery attempts by result (succeeded, retrying, failed: given up).", ["result"])
PROVISIONING_FAILURES = Counter(
    "trainyard_provisioning_failures_total", "Runs failed for good, by run kind and step.",
    ["kind", "step"])


def step_observe(*, step: str, driver: str, outcome: str, seconds: float) -> None:
    STEP_SECONDS.labels(step=step, driver=driver, outcome=outcome).observe(seconds)


class QueueDepthCollector:
    """``trainyard_celery_queue_length{queue}``: messages waiting in each Celery queue, read from
    the Redis broker (a list per queue) when Prometheus scrapes. Nothing without Redis."""

    def __init__(self, broker_url: str, queues: list[str]):
        self.broker_url, self.queues = broker_url, queues

    def collect(self):
        family = GaugeMetricFamily("trainyard_celery_queue_length",
                                   "Messages waiting in a Celery queue.", labels=["queue"])
        if self.broker_url.startswith(("redis://", "rediss://")):
            try:
                client = redis.Redis.from_url(self.broker_url, socket_timeout=2)
                for queue in self.queues:
                    family.add_metric([queue], client.llen(queue))
            except Exception:
                logger.warning("could not read the Celery queue depth", exc_info=True)
        yield family


def exposition(*, broker_url: str, queues: list[str]) -> bytes:
    """The text Prometheus reads: every process's samples (multiprocess mode) or this one's."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    extra = CollectorRegistry()
    extra.register(QueueDepthCollector(broker_url, queues))
    return generate_latest(registry) + generate_latest(extra)
