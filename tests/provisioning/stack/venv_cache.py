"""One venv per requirement set, built once per machine and linked into each test host's root:
the bootstrap reuses a venv whose marker matches, as it does on a re-deployed node. Building it
here (not inside a pipeline step) keeps a slow first pip install out of a step's lease."""

from __future__ import annotations

import fcntl
import subprocess
import tempfile
from pathlib import Path

from provisioning.stack.bootstrap import requirements_key

MARKER = ".trainyard-requirements"


def link_cached_venv(root: Path, packages, constraints=()) -> Path:
    """``constraints``: the pins a real node installs with (a test host has none)."""
    key = requirements_key(packages, constraints)
    cache = Path(tempfile.gettempdir()) / "trainyard-test-venvs" / key
    cache.parent.mkdir(parents=True, exist_ok=True)
    # Test processes running side by side (pytest -n) build a missing venv once, one at a time.
    with open(cache.parent / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cache / MARKER).exists() or (cache / MARKER).read_text().strip() != key:
            subprocess.run(["python3", "-m", "venv", str(cache)], check=True)
            pins = cache / "constraints.txt"
            pins.write_text("\n".join(constraints) + "\n")
            subprocess.run([str(cache / "bin" / "python"), "-m", "pip", "install", "--no-input",
                            "--disable-pip-version-check", "-q", "-c", str(pins), *packages],
                           check=True)
            (cache / MARKER).write_text(key + "\n")
    target = root / "opt" / "trainyard" / "venv"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.is_symlink():
        target.symlink_to(cache, target_is_directory=True)
    return cache


STOCK_PYTHON_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def link_cached_tools(root: Path) -> Path:
    """Trainyard's node tools (``/opt/trainyard/tools``: boto3 pinned), built once per machine by
    the real ``node_tools.sh`` with the machine's stock ``python3`` (no boto3 of its own), and
    linked under ``root``: the node tools step then finds them in place, as on a re-deployed node."""
    from provisioning.stack.scripts import node_tools_env, node_tools_script

    env = node_tools_env()
    cache = Path(tempfile.gettempdir()) / "trainyard-test-tools" / env["TRAINYARD_TOOLS_KEY"]
    built = cache / "opt" / "trainyard" / "tools"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache.parent / f"{cache.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (built / MARKER).exists():
            subprocess.run(["bash", "-c", node_tools_script()], check=True, capture_output=True,
                           env={**env, "PATH": STOCK_PYTHON_PATH, "TRAINYARD_ROOT": str(cache)})
    target = root / "opt" / "trainyard" / "tools"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.is_symlink() and not target.exists():
        target.symlink_to(built, target_is_directory=True)
    return built
