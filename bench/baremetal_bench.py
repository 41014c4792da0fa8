"""Bare metal through Ironic: BENCH_NODES (50) fake-hardware nodes deployed and released by
BENCH_WORKERS (2) worker processes at once, through the Ironic driver, against a real standalone
Ironic (the tests' engine: tests/engines/ironic.py, its venv built once by
tests/engines/ironic_venv.sh).

    .venv/bin/python bench/baremetal_bench.py

Each worker takes nodes from a shared queue, as two Celery workers take deploy_os and sanitise
steps: ``deploy_os`` (available → deploying → active, with Trainyard's configdrive), then
``release(erase=True)`` (deleting → cleaning → available). Fake hardware sleeps
BENCH_DEPLOY_DELAY seconds in each deploy-interface call (Ironic's ``[fake] deploy_delay``) so
that the engine has time of its own; BENCH_POLL_S is the driver's poll interval.

The table shows the wall time of the whole run, per node: the driver's time, the engine's own
time (from the deploy request to the moment Ironic recorded ``active``, and from the undeploy
request to ``available``, by Ironic's ``provision_updated_at``), the driver's overhead on top of
that (polling latency, API round trips), and the engine API calls each node cost. Double
deploys are counted from the conductor's own log (the deploy step it executed per node); the
bench exits 1 if any node was deployed more than once or not at all.
Tests never assert on speed: this prints numbers for people.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from provisioning.drivers.base import Fence, NodeTarget  # noqa: E402
from provisioning.drivers.ironic import IronicDriver  # noqa: E402
from tests.engines.ironic import start_ironic  # noqa: E402
from tests.provisioning.sshd import generate_ed25519  # noqa: E402

NODES = int(os.environ.get("BENCH_NODES", "50"))
WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))
DEPLOY_DELAY = os.environ.get("BENCH_DEPLOY_DELAY", "1")
POLL_S = float(os.environ.get("BENCH_POLL_S", "0.5"))
IMAGE = "ubuntu-24.04"


class CountingDriver(IronicDriver):
    """The driver, counting its engine API calls."""

    calls = 0

    def _call(self, action):
        self.calls += 1
        return super()._call(action)


def _options(url: str, private_key: str, node: str) -> dict:
    return {"ironic": {"url": url, "auth": "noauth", "node": node, "timeout_s": 30},
            "images": {IMAGE: {"url": "http://images.invalid/u2404.qcow2",
                               "checksum": "sha256:" + "ef" * 32}},
            "poll_interval_s": POLL_S, "deploy_timeout_s": 600, "clean_timeout_s": 600,
            "private_key": private_key, "user": "trainyard"}


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _cycle(job: tuple[str, str, str, int]) -> dict:
    url, private_key, node, token = job
    out: dict = {"node": node}
    for phase, target, call in (
            ("deploy", "active", lambda d: d.deploy_os(image=IMAGE, on_line=lambda _: None)),
            ("release", "available", lambda d: d.release(erase=True, on_line=lambda _: None))):
        driver = CountingDriver(NodeTarget(hostname=f"bench-{node[:8]}", address="127.0.0.1",
                                           options=_options(url, private_key, node),
                                           fence=Fence(token)))
        started = time.time()
        call(driver)
        ended = time.time()
        reached = driver._call(lambda bm: bm.get(f"/nodes/{node}", microversion="1.115").json())
        assert reached["provision_state"] == target, (node, reached["provision_state"])
        out[f"{phase}_s"] = ended - started
        out[f"{phase}_engine_s"] = _stamp(reached["provision_updated_at"]) - started
        out[f"{phase}_calls"] = driver.calls - 1  # less the check above
        token += 1
    return out


def _enrol_all(admin_url: str, count: int) -> list[str]:
    import requests

    session = requests.Session()
    session.headers["X-OpenStack-Ironic-API-Version"] = "1.115"
    nodes = [session.post(f"{admin_url}/v1/nodes", timeout=30,
                          json={"name": f"bench-{i:03d}", "driver": "fake-hardware",
                                "resource_class": "bench"}).json()["uuid"] for i in range(count)]
    for verb, state in (("manage", "manageable"), ("provide", "available")):
        for uuid in nodes:
            session.put(f"{admin_url}/v1/nodes/{uuid}/states/provision", json={"target": verb},
                        timeout=30).raise_for_status()
        deadline = time.monotonic() + 600
        while True:
            states = {session.get(f"{admin_url}/v1/nodes/{u}", timeout=30).json()["provision_state"]
                      for u in nodes}
            if states == {state}:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"enrolment stuck: {states}")
            time.sleep(0.5)
    return nodes


def _deploys_per_node(log: Path, nodes: list[str]) -> dict[str, int]:
    counts = dict.fromkeys(nodes, 0)
    for line in log.read_text(errors="replace").splitlines():
        if "Executing" in line and "'step': 'deploy'" in line:
            for uuid in nodes:
                if uuid in line:
                    counts[uuid] += 1
    return counts


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="baremetal-bench-") as tmp:
        server = start_ironic(Path(tmp) / "ironic", deploy_delay=DEPLOY_DELAY)
        try:
            nodes = _enrol_all(server.url, NODES)
            private_key = generate_ed25519()[0]
            jobs = [(server.url, private_key, uuid, 1) for uuid in nodes]
            started = time.monotonic()
            with multiprocessing.get_context("spawn").Pool(WORKERS) as pool:
                results = pool.map(_cycle, jobs, chunksize=1)
            wall = time.monotonic() - started
            deploys = _deploys_per_node(server.root / "ironic.log", nodes)
        finally:
            server.stop()

    def med(key: str) -> float:
        return statistics.median(r[key] for r in results)

    double = sum(1 for n in deploys.values() if n > 1)
    missing = sum(1 for n in deploys.values() if n == 0)
    print(f"Ironic {NODES} fake-hardware nodes, {WORKERS} workers, fake deploy_delay "
          f"{DEPLOY_DELAY}s, poll every {POLL_S:g}s")
    print(f"{'':28}{'deploy_os':>12}{'release':>12}")
    rows = [
        ("driver time per node (s)", med("deploy_s"), med("release_s")),
        ("engine's own time (s)", med("deploy_engine_s"), med("release_engine_s")),
        ("overhead per node (s)", med("deploy_s") - med("deploy_engine_s"),
         med("release_s") - med("release_engine_s")),
        ("engine API calls per node", med("deploy_calls"), med("release_calls")),
    ]
    for label, deploy, release in rows:
        print(f"{label:28}{deploy:>12.2f}{release:>12.2f}")
    print(f"{'wall time, all nodes (s)':28}{wall:>12.1f}")
    print(f"{'nodes per minute':28}{NODES / wall * 60:>12.1f}")
    print(f"{'double deploys':28}{double:>12d}")
    print(f"{'nodes not deployed':28}{missing:>12d}")
    return 1 if double or missing else 0


if __name__ == "__main__":
    sys.exit(main())
