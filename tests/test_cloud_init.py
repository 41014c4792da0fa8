import pytest
import yaml

from provisioning.stack.cloud_init import render_user_data
from tests.provisioning.sshd import generate_ed25519

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHx trainyard@mgmt"


def test_user_data_creates_the_management_user_with_its_key_and_no_password_login():
    text = render_user_data(hostname="gpu-01", management_user="trainyard", management_keys=[KEY])
    assert text.startswith("#cloud-config\n")
    config = yaml.safe_load(text)
    assert config["hostname"] == "gpu-01"
    assert config["ssh_pwauth"] is False
    assert config["disable_root"] is True
    (user,) = config["users"]
    assert user["name"] == "trainyard"
    assert user["lock_passwd"] is True
    assert user["ssh_authorized_keys"] == [KEY]


@pytest.mark.parametrize("keys, message", [
    ([], "no management SSH public key"),
    (["  "], "no management SSH public key"),
    (["ssh-ed25519"], "not an OpenSSH public key line"),
    ([KEY + "\nssh-rsa AAAA x"], "not an OpenSSH public key line"),
])
def test_user_data_refuses_a_node_that_could_never_be_reached(keys, message):
    with pytest.raises(ValueError, match=message):
        render_user_data(hostname="gpu-01", management_user="root", management_keys=keys)


def test_a_host_key_made_by_the_caller_replaces_the_images_own():
    private, public = generate_ed25519()
    text = render_user_data(hostname="gpu-01", management_user="trainyard", management_keys=[KEY],
                            host_key=(private, public))
    config = yaml.safe_load(text)
    assert config["ssh_deletekeys"] is True and config["ssh_genkeytypes"] == []
    assert config["ssh_keys"] == {"ed25519_private": private, "ed25519_public": public}
    with pytest.raises(ValueError, match="host_key must be"):
        render_user_data(hostname="gpu-01", management_user="trainyard", management_keys=[KEY],
                         host_key=("not a key", public))
