"""The smaller promises of the hand-back: one source for node paths, test hosts that are safe
and honest (no power command, no package install, a health check that knows them), the pinned
host key shown to customers, checkpoints during the run for every preset's plan, and e-mails
with a reply path that reaches a person."""


import pytest
from django.core import mail

from portal.core import mail as portal_mail
from provisioning.monitoring import health
from provisioning.stack import paths
from provisioning.stack.bundle import render_stack
from provisioning.stack.inputs import checkpoint_interval
from provisioning.storage.node import retain_script
from tests.provisioning.stack.variants import node, order


# --- one source for node paths ----------------------------------------------------------------
def test_the_stack_and_the_termination_copy_the_same_checkpoint_directory():
    files = {f.name: f.content for f in render_stack(order=order("fsdp", storage=True), node=node(1),
                                                     nodes=[node(1)]).files}
    assert f'export TRAINYARD_CHECKPOINT_DIR="$TRAINYARD_ROOT{paths.CHECKPOINT_DIR}"' in files["env.sh"]
    assert f'src="$root{paths.CHECKPOINT_DIR}"' in files["sync-checkpoints"]
    assert f'src="$root"{paths.CHECKPOINT_DIR}' in retain_script(prefix="checkpoints/n")
    # Both copy with Trainyard's node tools, never the python3 on the PATH nor the training venv.
    assert f"$root{paths.TOOLS_PYTHON}" in files["sync-checkpoints"]
    assert f'py="$root"{paths.TOOLS_PYTHON}' in retain_script(prefix="checkpoints/n")
    titan = render_stack(order=order("torchtitan"), node=node(1), nodes=[node(1)]).files
    toml = next(f.content for f in titan if f.name == "torchtitan.toml")
    assert f'dump_folder = "{paths.DATA}"' in toml
    assert f'folder = "{paths.CHECKPOINT_DIR.removeprefix(paths.DATA + "/")}"' in toml


# --- checkpoints during the run -----------------------------------------------------------------
def test_the_interval_is_about_45_minutes_of_training_and_at_least_three_per_run():
    assert checkpoint_interval(step_seconds=10, train_steps=100_000) == 270  # 45 min of 10 s steps
    assert checkpoint_interval(step_seconds=200, train_steps=477) == 14  # ~45 min, not 500 steps
    assert checkpoint_interval(step_seconds=10, train_steps=600) == 200  # a 100-minute run: 3
    assert checkpoint_interval(step_seconds=0, train_steps=0) == 500  # nothing known
    assert checkpoint_interval(step_seconds=7200, train_steps=5) == 1  # at least every step


# --- test hosts are safe and honest ---------------------------------------------------------------
def test_reboot_and_power_off_of_a_declared_test_host_run_nothing(ssh_driver_for, tmp_path):
    marker = tmp_path / "rebooted"
    ssh_driver_for(reboot_command=f"touch {marker}", poweroff_command=f"touch {marker}",
                   test_host=True).power("reboot")
    ssh_driver_for(poweroff_command=f"touch {marker}", test_host=True).power("off")
    assert not marker.exists()
    ssh_driver_for(reboot_command=f"touch {marker}").power("reboot")  # the same host, not declared
    assert marker.exists()


def test_the_deploy_step_of_a_test_host_installs_no_package(ssh_driver_for):
    lines = []
    ssh_driver_for(test_host=True, apt_packages=["trainyard-surely-not-a-package"]).deploy_os(
        image=_os_image(), on_line=lines.append)
    assert "declared test host: missing prerequisites not installed: trainyard-surely-not-a-package" in lines
    assert not [line for line in lines if line.startswith("installing")]


def _os_image():
    from tests.provisioning.test_pipeline_ssh import _os_image as image
    return image()


@pytest.mark.django_db
def test_the_health_check_knows_a_test_host_has_no_gpus(catalog, sim_dir):
    from tests.factories import H100_SKU, make_node

    node = make_node(sku=H100_SKU, state_dir=sim_dir, gpu_count=0, test_host=True, state="active")
    check = health.node_health_check(node=node)
    assert check.ok and check.problems == [] and "declared test host" in check.raw
    other = make_node(sku=H100_SKU, state_dir=sim_dir, gpu_count=0, state="active")
    assert health.node_health_check(node=other).problems == ["0 of 8 GPUs visible"]


# --- e-mail ------------------------------------------------------------------------------------
def test_every_email_has_a_reply_path_to_a_person(settings):
    settings.DEFAULT_FROM_EMAIL = "Trainyard <noreply@gpu.example>"
    settings.SUPPORT_EMAIL = "support@gpu.example"
    assert portal_mail.send(subject="s", body="b", to=["a@example.com"]) == 1
    sent = mail.outbox[-1]
    assert sent.from_email == "Trainyard <noreply@gpu.example>"
    assert sent.reply_to == ["support@gpu.example"]
    assert portal_mail.send(subject="s", body="b", to=[]) == 0
