"""The attestation compares what a node holds with its clean baseline (provisioning.inventory.handback),
from the lines inventory.sh prints; the script itself runs for real on this machine."""

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from provisioning.inventory.handback import attestation_findings, findings_summary, parse_inventory
from provisioning.stack.scripts import inventory_script
from tests.conftest import missing_service

BASELINE = ["file /etc/trainyard/.keep", "user root", "user ubuntu", "listen tcp 0.0.0.0:22",
            "file /home/ubuntu/.bashrc"]


def test_a_node_like_its_baseline_is_clean():
    assert attestation_findings(baseline=BASELINE, now=list(reversed(BASELINE))) == []
    assert findings_summary([]) == "attestation: nothing of the last tenant remains"


def test_whatever_is_new_is_a_finding_in_words_an_operator_acts_on():
    now = [*BASELINE, "file /data/checkpoints/step-9/model.pt", "crontab ubuntu",
           "linger ubuntu", "user mallory", "listen tcp 0.0.0.0:8888"]
    assert attestation_findings(baseline=BASELINE, now=now) == [
        "crontab of ubuntu",
        "file left behind: /data/checkpoints/step-9/model.pt",
        "lingering user manager of ubuntu (systemd user units start at boot)",
        "listening socket not in the clean baseline: tcp 0.0.0.0:8888",
        "account mallory not in the clean baseline",
    ]


def test_a_process_of_the_customer_is_a_finding_even_if_the_baseline_had_one():
    findings = attestation_findings(baseline=[*BASELINE, "proc ubuntu sleep"],
                                    now=[*BASELINE, "proc ubuntu sleep"])
    assert findings == ["process of ubuntu still running: sleep"]


def test_something_gone_since_the_baseline_is_no_finding():
    """A clean node may hold less than its baseline (a file the OS rotated away)."""
    assert attestation_findings(baseline=BASELINE, now=BASELINE[:2]) == []


def test_only_inventory_lines_count_and_duplicates_once():
    lines = ["trainyard: a newer execution…", "file /data/x", "file /data/x", "", "bogus line",
             "proc ubuntu python train.py"]
    assert parse_inventory(lines) == ("file /data/x", "proc ubuntu python train.py")


def test_a_long_list_is_summarised_with_its_count():
    findings = [f"file left behind: /data/{i}" for i in range(25)]
    text = findings_summary(findings)
    assert text.startswith("attestation found 25 thing(s) of the last tenant:")
    assert "/data/19" in text and "/data/20" not in text and "… and 5 more" in text


# --- inventory.sh, for real -----------------------------------------------------------------
@pytest.fixture
def customer(tmp_path):
    """An unprivileged account whose home and processes the inventory lists."""
    if os.geteuid() != 0 or not shutil.which("useradd"):
        missing_service("this test creates an account: it needs root and useradd")
    name = f"ty{uuid.uuid4().hex[:8]}"
    home = Path("/srv") / f"inventory-{name}"
    subprocess.run(["useradd", "-m", "-d", str(home), "-s", "/bin/bash", name], check=True)
    try:
        yield name, home
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], check=False)
        subprocess.run(["userdel", "-r", name], check=False, capture_output=True)


def _inventory(root: Path, user: str, *, test_host: bool) -> tuple[str, ...]:
    done = subprocess.run(["bash", "-c", inventory_script()], capture_output=True, text=True,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TRAINYARD_ROOT": str(root),
                               "TRAINYARD_LOGIN_USER": user,
                               "TRAINYARD_TEST_HOST": "1" if test_host else "0"})
    assert done.returncode == 0, done.stdout + done.stderr
    return parse_inventory(done.stdout.splitlines())


def test_the_inventory_lists_the_tenants_files_processes_and_the_machines_accounts(tmp_path, customer):
    name, home = customer
    root = tmp_path / "root"
    (root / "data/checkpoints").mkdir(parents=True)
    (root / "etc/trainyard").mkdir(parents=True)
    baseline = _inventory(root, name, test_host=False)
    assert f"user {name}" in baseline and "user root" in baseline
    assert any(e.startswith("listen ") for e in baseline) or not shutil.which("ss")

    (root / "data/checkpoints/model.pt").write_bytes(b"w")
    (root / "etc/trainyard/s3-credentials").write_text("secret")
    (home / "notes.txt").write_text("mine")
    sleeper = subprocess.Popen(["su", "-s", "/bin/sh", name, "-c", "exec sleep 300"])
    try:
        for _ in range(50):
            if subprocess.run(["pgrep", "-u", name], capture_output=True).returncode == 0:
                break
            subprocess.run(["sleep", "0.1"])
        now = _inventory(root, name, test_host=True)
    finally:
        sleeper.kill()
    findings = attestation_findings(baseline=baseline, now=now)
    assert f"file left behind: {root}/data/checkpoints/model.pt" in findings
    assert f"file left behind: {root}/etc/trainyard/s3-credentials" in findings
    assert f"file left behind: {home}/notes.txt" in findings
    assert f"process of {name} still running: sleep" in findings
    # A declared test host shares the machine: its accounts and sockets are not listed.
    assert not [e for e in now if e.startswith(("user ", "listen "))]
