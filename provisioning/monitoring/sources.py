"""Metrics sources: Prometheus (the store) and a simulated one for nodes with no machine behind
them (simulated driver) or a portal with no Prometheus configured (``make run``). Both answer
``series(...)`` with the same ``Series``; the simulated one's chart says "simulated"."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime

import requests

from provisioning.monitoring.queries import Metric, order_query
from provisioning.monitoring.series import Series


class SourceError(Exception):
    """The source could not answer (down, timed out, refused the query): the chart says so."""


@dataclass(frozen=True)
class NodeInfo:
    hostname: str
    gpus: int


class PrometheusSource:
    simulated = False

    def __init__(self, url: str, *, timeout_s: float):
        self.url, self.timeout_s = url.rstrip("/"), timeout_s

    def series(self, metric: Metric, *, order_reference: str, nodes: list[NodeInfo],
               start: datetime, end: datetime, step_s: int) -> list[Series]:
        query = order_query(metric, order_reference=order_reference, step_s=step_s)
        wanted = {n.hostname for n in nodes}
        try:
            response = requests.get(f"{self.url}/api/v1/query_range", timeout=self.timeout_s,
                                    params={"query": query, "start": start.timestamp(),
                                            "end": end.timestamp(), "step": step_s})
            body = response.json()
        except (requests.RequestException, ValueError) as exc:
            raise SourceError(f"Prometheus did not answer: {type(exc).__name__}") from exc
        if response.status_code != 200 or body.get("status") != "success":
            raise SourceError(f"Prometheus refused the query: {body.get('error', response.status_code)}")
        out = []
        for item in body["data"]["result"]:
            labels = item.get("metric", {})
            if labels.get("node") not in wanted:  # the order's label only; the node must be its too
                continue
            points = tuple((float(t), float(v)) for t, v in item.get("values", [])
                           if math.isfinite(float(v)))
            out.append(Series(node=labels["node"], gpu=labels.get("gpu", "?"), points=points))
        return sorted(out, key=lambda s: (s.node, _gpu_order(s.gpu)))


def _gpu_order(gpu: str) -> tuple[int, str]:
    return (int(gpu), "") if gpu.isdigit() else (1 << 30, gpu)


class SimulatedSource:
    """A believable training job: GPUs busy in the 90s with a dip at each half-hourly checkpoint,
    temperature and power following the load, memory nearly full, no XIDs. The same inputs give
    the same numbers (a hash, not a random generator), so a refresh does not redraw the past."""

    simulated = True

    def series(self, metric: Metric, *, order_reference: str, nodes: list[NodeInfo],
               start: datetime, end: datetime, step_s: int) -> list[Series]:
        t0 = -(-int(start.timestamp()) // step_s) * step_s  # the first step inside the window
        times = range(t0, int(end.timestamp()) + 1, step_s)
        return [Series(node=n.hostname, gpu=str(gpu),
                       points=tuple((float(t), simulated_value(metric.key, n.hostname, gpu, t,
                                                               step_s=step_s))
                                    for t in times))
                for n in nodes for gpu in range(n.gpus)]


def _noise(*parts) -> float:
    """A number in [0, 1) from ``parts``, the same every time."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def simulated_value(metric: str, node: str, gpu: int, t: int, *, step_s: int = 60) -> float:
    if step_s >= 1800:  # a point stands for a checkpoint and the training around it: their mean
        util = 86 + 6 * _noise(node, gpu, t // step_s)
    elif (t % 1800) < 90:  # 90 s of every half hour: writing a checkpoint
        util = 12 + 8 * _noise(node, gpu, t // 60)
    else:
        util = 91 + 7 * _noise(node, gpu, t // 60)
    if metric == "gpu_util":
        return round(util, 1)
    if metric == "tensor_active":
        return round(util * 0.62, 1)
    if metric == "fb_used":
        return round(71.0 + 2 * _noise(node, gpu), 1)
    if metric == "power":
        return round(120 + 5.6 * util + 15 * _noise(node, gpu, t // 60, "p"), 0)
    if metric == "temperature":
        return round(38 + 0.3 * util + 3 * _noise(node, gpu), 0)
    return 0.0  # xid: no faults in the simulation
