"""`make run` starts every time: the portal on its embedded default (SQLite, kombu's filesystem
broker, a worker, the sweeper's worker, beat) started N times from a fresh var/ directory; each
start counts as good when /healthz answers "ok" with both workers within the time limit and no
process died. Prints one line per start and the count.

    python bench/make_run_starts.py            # 20 starts
    python bench/make_run_starts.py --starts 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_start(limit_s: float) -> tuple[bool, str, float]:
    var = tempfile.mkdtemp(prefix="trainyard-make-run-")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["TRAINYARD_VAR_DIR"] = var
    py = sys.executable
    for cmd in (["migrate", "--noinput", "-v0"], ["seed_catalog"], ["seed_demo"], ["seed_nodes"]):
        subprocess.run([py, "manage.py", *cmd], cwd=ROOT, env=env, check=True, capture_output=True)
    port = free_port()
    log = Path(var) / "devserver.log"
    started = time.monotonic()
    proc = subprocess.Popen([py, "manage.py", "devserver", "--addr", f"127.0.0.1:{port}"], cwd=ROOT,
                            env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    verdict, why = False, "no answer"
    try:
        while time.monotonic() - started < limit_s:
            if proc.poll() is not None:
                why = "make run stopped: " + log.read_text(errors="replace")[-300:].replace("\n", " ")
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=15) as r:
                    health = json.loads(r.read())
                if health.get("status") == "ok" and health.get("worker", "").startswith("ok (2)"):
                    verdict, why = True, "ok"
                    break
                why = json.dumps(health)
            except OSError:
                pass
            time.sleep(0.5)
        failed = [line for line in log.read_text(errors="replace").splitlines()
                  if "JSONDecodeError" in line or "exited; stopping" in line]
        if failed:
            verdict, why = False, failed[0][:200]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(var, ignore_errors=True)
    return verdict, why, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--limit-s", type=float, default=120)
    args = parser.parse_args()
    good = 0
    for i in range(1, args.starts + 1):
        ok, why, seconds = one_start(args.limit_s)
        good += ok
        print(f"start {i:2d}: {'ok  ' if ok else 'FAIL'} {seconds:5.1f} s  {why}", flush=True)
    print(f"{good} of {args.starts} starts came up; {args.starts - good} crashed or hung")
    return 0 if good == args.starts else 1


if __name__ == "__main__":
    sys.exit(main())
