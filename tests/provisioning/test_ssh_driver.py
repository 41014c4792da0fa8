"""The ssh driver against a real OpenSSH sshd on loopback: pinning, streaming, health, power.

The test host is this machine, so a file the script writes is a file the test can read.
"""

import logging
import os
import re
import socket
import threading
from pathlib import Path

import pytest

from portal.catalog.models import ServerSKU
from provisioning.drivers import driver_for
from provisioning.drivers.base import DeployFacts, DriverError
from provisioning.drivers.ssh import RETRY_EXIT_STATUS, SshDriver, parse_nvidia_smi
from provisioning.models import Node
from tests.factories import H100_SKU
from tests.provisioning.sshd import free_port, generate_ed25519

# Recorded from `nvidia-smi --query-gpu=index,name,temperature.gpu,
# ecc.errors.uncorrected.volatile.total,memory.total --format=csv,noheader,nounits`
# on an 8× H100 SXM host (driver 550): one GPU with 2 uncorrected ECC errors.
H100_CSV = """\
0, NVIDIA H100 80GB HBM3, 34, 0, 81559
1, NVIDIA H100 80GB HBM3, 36, 0, 81559
2, NVIDIA H100 80GB HBM3, 33, 2, 81559
3, NVIDIA H100 80GB HBM3, 35, 0, 81559
4, NVIDIA H100 80GB HBM3, 37, 0, 81559
5, NVIDIA H100 80GB HBM3, 34, 0, 81559
6, NVIDIA H100 80GB HBM3, 38, 0, 81559
7, NVIDIA H100 80GB HBM3, 35, 0, 81559
"""


def fake_tool(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


# --- host key pinning ---------------------------------------------------------------------
@pytest.mark.parametrize("form", ["public_key", "fingerprint", "known_hosts_line", "list"])
def test_it_accepts_the_pinned_host_key_in_every_form(sshd_host, ssh_driver_for, form):
    pin = {
        "public_key": sshd_host.host_public_key,
        "fingerprint": sshd_host.host_fingerprint,
        "known_hosts_line": f"[127.0.0.1]:{sshd_host.port} {sshd_host.host_public_key}",
        "list": [generate_ed25519()[1], sshd_host.host_public_key],
    }[form]
    lines: list[str] = []
    assert ssh_driver_for(host_key=pin).run("echo pinned\n", name="x", on_line=lines.append).ok
    assert lines == ["pinned"]


def test_a_mismatched_host_key_sends_no_credentials(sshd_host, ssh_driver_for):
    before = len(sshd_host.log())
    with pytest.raises(DriverError) as info:
        ssh_driver_for(host_key=generate_ed25519()[1]).run("echo hi\n", name="x",
                                                           on_line=lambda line: None)
    assert info.value.permanent is True
    assert sshd_host.host_fingerprint in str(info.value)  # what the node presented
    new_log = sshd_host.log()[before:]
    assert "publickey" not in new_log  # we hung up before offering a key


def test_an_unreadable_pin_is_a_permanent_error(ssh_driver_for):
    with pytest.raises(DriverError) as info:
        ssh_driver_for(host_key="not a key")
    assert info.value.permanent is True


# --- running scripts ----------------------------------------------------------------------
def test_lines_arrive_while_the_script_is_still_running(ssh_driver_for, tmp_path):
    # The script waits for a file that only the callback creates: if lines were delivered
    # at the end, it would never finish and the run would time out.
    flag = tmp_path / "seen-ready"
    script = f"""echo ready
for i in $(seq 200); do [ -f {flag} ] && break; sleep 0.05; done
[ -f {flag} ] && echo "callback ran before the script ended" || exit 9
"""
    lines: list[str] = []

    def on_line(line: str) -> None:
        lines.append(line)
        if line == "ready":
            flag.touch()

    result = ssh_driver_for().run(script, name="stream", on_line=on_line, timeout_s=60)
    assert result.ok, result.output_tail
    assert lines == ["ready", "callback ran before the script ended"]


def test_stderr_is_streamed_in_order_with_stdout(ssh_driver_for):
    lines: list[str] = []
    ssh_driver_for().run("echo out\necho err >&2\necho out again\n", name="x", on_line=lines.append)
    assert lines == ["out", "err", "out again"]


def test_a_command_reading_stdin_cannot_eat_the_script(ssh_driver_for):
    lines: list[str] = []
    result = ssh_driver_for().run("cat\necho after cat\n", name="x", on_line=lines.append)
    assert result.ok
    assert lines == ["after cat"]


def test_env_values_are_quoted_and_the_script_file_is_removed(ssh_driver_for, tmp_path):
    lines: list[str] = []
    tricky = "it's $(not run); `nor this` \"quoted\""
    ssh_driver_for().run('echo "$TRICKY"\necho "$0" > ' + str(tmp_path / "path") + "\n",
                         name="x", on_line=lines.append, env={"TRICKY": tricky})
    assert lines == [tricky]
    staged = Path((tmp_path / "path").read_text().strip())
    assert staged.name.startswith("trainyard-")
    assert not staged.exists()


def test_an_invalid_env_name_is_refused(ssh_driver_for):
    with pytest.raises(DriverError) as info:
        ssh_driver_for().run("true\n", name="x", on_line=lambda line: None, env={"A B": "1"})
    assert info.value.permanent is True


def test_a_retry_exit_status_is_returned_for_the_pipeline_to_decide(ssh_driver_for):
    result = ssh_driver_for().run(f"echo apt lock held\nexit {RETRY_EXIT_STATUS}\n",
                                  name="configure", on_line=lambda line: None)
    assert result.exit_status == RETRY_EXIT_STATUS
    assert result.output_tail == ("apt lock held",)


def test_a_script_that_outlives_its_timeout_is_a_transient_error(ssh_driver_for):
    with pytest.raises(DriverError) as info:
        ssh_driver_for().run("echo started\nsleep 30\n", name="slow", on_line=lambda line: None,
                             timeout_s=1)
    assert info.value.permanent is False
    assert "did not finish within 1s" in str(info.value)


def test_the_output_tail_keeps_the_last_lines(ssh_driver_for):
    result = ssh_driver_for().run("seq 1 100\n", name="x", on_line=lambda line: None)
    assert result.output_tail == tuple(str(i) for i in range(81, 101))


# --- connecting ---------------------------------------------------------------------------
def test_a_refused_connection_is_transient(ssh_driver_for):
    with pytest.raises(DriverError) as info:
        ssh_driver_for(address=f"127.0.0.1:{free_port()}").health()
    assert info.value.permanent is False
    assert "cannot connect" in str(info.value)


def test_a_host_that_never_speaks_ssh_times_out_transiently(ssh_driver_for):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        with pytest.raises(DriverError) as info:
            ssh_driver_for(address=f"127.0.0.1:{port}", connect_timeout_s=0.5).health()
    assert info.value.permanent is False
    assert "handshake" in str(info.value)


def test_the_port_comes_from_the_address_or_the_options(sshd_host, ssh_driver_for):
    driver = ssh_driver_for(address=sshd_host.host, port=sshd_host.port)
    assert (driver.host, driver.port) == (sshd_host.host, sshd_host.port)
    assert driver.run("true\n", name="x", on_line=lambda line: None).ok


def test_a_missing_private_key_is_a_permanent_error(ssh_driver_for):
    with pytest.raises(DriverError) as info:
        ssh_driver_for(private_key=None).health()
    assert info.value.permanent is True
    assert "no SSH private key" in str(info.value)


def test_a_key_file_and_a_passphrase_work(sshd_host, ssh_driver_for, tmp_path):
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_ssh_private_key(sshd_host.client_key_pem.encode(), password=None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                  serialization.BestAvailableEncryption(b"s3cret"))
    key_file = tmp_path / "id_ed25519"
    key_file.write_bytes(encrypted)
    driver = ssh_driver_for(private_key=None, private_key_file=str(key_file),
                            private_key_passphrase="s3cret")
    assert driver.run("true\n", name="x", on_line=lambda line: None).ok
    with pytest.raises(DriverError) as info:
        ssh_driver_for(private_key=None, private_key_file=str(key_file),
                       private_key_passphrase="wrong").health()
    assert info.value.permanent is True


def test_the_private_key_is_never_logged(sshd_host, ssh_driver_for, caplog):
    secret_body = "".join(sshd_host.client_key_pem.splitlines()[1:-1])
    caplog.set_level(logging.DEBUG)
    driver = ssh_driver_for()
    driver.run("echo hi\n", name="x", on_line=lambda line: None)
    messages = [repr(driver)]
    for key_text in (sshd_host.client_key_pem.replace("A", "B", 5), "garbage"):
        with pytest.raises(DriverError) as info:
            ssh_driver_for(private_key=key_text).health()
        messages.append(str(info.value))
    messages += [record.getMessage() for record in caplog.records]
    for chunk in (secret_body[i:i + 24] for i in range(0, len(secret_body) - 24, 24)):
        assert not any(chunk in message for message in messages)


# --- health -------------------------------------------------------------------------------
def test_parse_nvidia_smi_reads_count_temperature_and_ecc():
    gpus = parse_nvidia_smi(H100_CSV)
    assert len(gpus) == 8
    assert gpus[2].ecc_errors == 2
    assert max(g.temperature_c for g in gpus) == 38
    assert gpus[0].memory_total_mib == 81559
    assert gpus[0].name == "NVIDIA H100 80GB HBM3"


def test_parse_nvidia_smi_treats_unsupported_fields_as_unknown():
    (gpu,) = parse_nvidia_smi("0, NVIDIA GeForce RTX 4090, [N/A], [N/A], 24564\n")
    assert gpu.ecc_errors == 0
    assert gpu.temperature_c != gpu.temperature_c  # NaN: unknown, not 0 °C


def test_health_reports_gpus_from_nvidia_smi_over_ssh(ssh_driver_for, tmp_path):
    (tmp_path / "out.csv").write_text(H100_CSV)
    smi = fake_tool(tmp_path, "nvidia-smi", f'cat {tmp_path / "out.csv"}\n')
    report = ssh_driver_for(nvidia_smi=str(smi)).health()
    assert report.gpu_count == 8
    assert report.max_temperature_c == 38
    assert report.ecc_errors == 2
    assert report.raw == H100_CSV.strip()


def test_a_host_without_nvidia_smi_reports_no_gpu_driver(ssh_driver_for):
    report = ssh_driver_for(nvidia_smi="/nonexistent/nvidia-smi").health()
    assert report.gpu_count == 0
    assert "no NVIDIA GPU driver" in report.raw


def test_a_failing_nvidia_smi_reports_no_gpus_with_its_words(ssh_driver_for, tmp_path):
    smi = fake_tool(tmp_path, "nvidia-smi", "echo \"NVIDIA-SMI has failed because it couldn't "
                                            "communicate with the NVIDIA driver.\"\nexit 9\n")
    report = ssh_driver_for(nvidia_smi=str(smi)).health()
    assert report.gpu_count == 0
    assert "exit 9" in report.raw and "couldn't communicate" in report.raw


# --- deploy_os on a pre-installed host ----------------------------------------------------
def _os_release() -> dict:
    pairs = (line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    return {k: v.strip('"') for k, v in pairs}


def test_deploy_os_checks_the_release_and_prerequisites(ssh_driver_for):
    release = _os_release()
    if "VERSION_ID" not in release or not Path("/usr/bin/dpkg-query").exists():
        pytest.skip("the test host is not a versioned Debian-family system")
    lines: list[str] = []
    image = f"{release['ID']}-{release['VERSION_ID']}"
    facts = ssh_driver_for(apt_packages=["bash", "coreutils"]).deploy_os(image=image, on_line=lines.append)
    assert facts == DeployFacts(image=image, installed=False, host_keys=())  # checked, not installed
    assert lines[0].startswith("os-release: ")
    assert lines[-1] == "prerequisites present: bash coreutils"


def test_deploy_os_says_it_does_not_install_an_image_variant(ssh_driver_for):
    release = _os_release()
    if "VERSION_ID" not in release or not Path("/usr/bin/dpkg-query").exists():
        pytest.skip("the test host is not a versioned Debian-family system")
    lines: list[str] = []
    ssh_driver_for(apt_packages=["bash"]).deploy_os(
        image=f"{release['ID']}-{release['VERSION_ID']}-cuda-12.8", on_line=lines.append)
    assert "image variant cuda-12.8: not installed by the ssh driver (pre-installed host)" in lines


def test_deploy_os_refuses_a_host_running_another_release(ssh_driver_for):
    lines: list[str] = []
    with pytest.raises(DriverError) as info:
        ssh_driver_for().deploy_os(image="plan9-4", on_line=lines.append)
    assert info.value.permanent is True
    assert "does not run plan9-4" in str(info.value)
    assert "does not reinstall" in str(info.value)


def test_deploy_os_refuses_an_unreadable_image_name(ssh_driver_for):
    with pytest.raises(DriverError) as info:
        ssh_driver_for().deploy_os(image="latest", on_line=lambda line: None)
    assert info.value.permanent is True


# --- power --------------------------------------------------------------------------------
def test_reboot_runs_the_reboot_command(ssh_driver_for, tmp_path):
    marker = tmp_path / "rebooted"
    ssh_driver_for(reboot_command=f"touch {marker}").power("reboot")
    assert marker.exists()


def test_a_failing_reboot_command_is_permanent(ssh_driver_for):
    with pytest.raises(DriverError) as info:
        ssh_driver_for(reboot_command="echo 'System has not been booted with systemd'; exit 1"
                       ).power("reboot")
    assert info.value.permanent is True
    assert "exited 1" in str(info.value)


def test_a_node_dropping_the_connection_while_rebooting_counts_as_acknowledged(
        sshd_host, ssh_driver_for):
    # Kills this session's own sshd child, as a real reboot tears the connection down.
    ssh_driver_for(reboot_command="kill -9 $PPID").power("reboot")


def test_power_on_without_a_bmc_means_the_node_answers_ssh(ssh_driver_for):
    ssh_driver_for().power("on")  # reachable: it is on


def test_power_on_of_an_unreachable_node_without_a_bmc_is_transient(ssh_driver_for):
    with pytest.raises(DriverError) as info:
        ssh_driver_for(address=f"127.0.0.1:{free_port()}").power("on")
    assert info.value.permanent is False
    assert "cannot power the node on" in str(info.value)


def test_with_ipmi_configured_power_uses_ipmitool_without_the_password_in_argv(
        ssh_driver_for, tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    fake_tool(tmp_path, "ipmitool", f'echo "$* | $IPMI_PASSWORD" >> {calls}\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    driver = ssh_driver_for(ipmi={"address": "10.1.0.7", "user": "ops", "password": "bmc-pass"})
    driver.power("reboot")
    driver.power("on")
    assert calls.read_text().splitlines() == [
        "-I lanplus -H 10.1.0.7 -U ops -E chassis power cycle | bmc-pass",
        "-I lanplus -H 10.1.0.7 -U ops -E chassis power on | bmc-pass",
    ]


def test_concurrent_runs_on_one_node_do_not_mix_output(ssh_driver_for):
    driver = ssh_driver_for()
    outputs: dict[int, list[str]] = {i: [] for i in range(4)}

    def work(i: int) -> None:
        driver.run(f"for n in 1 2 3 4 5; do echo {i}-$n; done\n", name=f"w{i}",
                   on_line=outputs[i].append)

    threads = [threading.Thread(target=work, args=(i,)) for i in outputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    # the runs' own lines only: the test host's login shell may print its own (a pyenv rehash
    # racing in root's ~/.bashrc on a CI runner), which is not one run's output in another's
    ours = {i: [line for line in lines if re.fullmatch(r"\d-\d", line)] for i, lines in outputs.items()}
    assert ours == {i: [f"{i}-{n}" for n in range(1, 6)] for i in outputs}


def test_it_is_what_settings_name_ssh():
    from provisioning.drivers import driver_class

    assert driver_class("ssh") is SshDriver


def test_the_bmc_password_comes_from_settings_under_the_nodes_ipmi_options(
        db, catalog, settings, tmp_path, monkeypatch, caplog):
    """A node's driver_options may not hold ipmi.password; settings do (from
    IPMI_PASSWORD_FILE), and the node's ipmi address and user are merged over them."""

    settings.NODE_DRIVER_OPTIONS = {"simulated": {}, "ssh": {"ipmi": {"password": "bmc-from-file"}}}
    node = Node.objects.create(
        hostname="gpu-bmc-01", sku=ServerSKU.objects.get(slug=H100_SKU), driver="ssh",
        management_address="10.1.0.7", driver_options={
            "host_key": generate_ed25519()[1], "ipmi": {"address": "10.9.0.7", "user": "ops"}})
    calls = tmp_path / "calls"
    fake_tool(tmp_path, "ipmitool", f'echo "$* | $IPMI_PASSWORD" >> {calls}\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with caplog.at_level(logging.DEBUG):
        driver_for(node).power("on")
    assert calls.read_text().splitlines() == [
        "-I lanplus -H 10.9.0.7 -U ops -E chassis power on | bmc-from-file"]
    assert "bmc-from-file" not in caplog.text
    assert settings.NODE_DRIVER_OPTIONS["ssh"] == {"ipmi": {"password": "bmc-from-file"}}  # untouched
