"""SSH public keys: what is accepted (each type, fingerprint as ssh-keygen prints it), what is
refused and with which message, and that a refused key stores nothing."""

import shutil
import subprocess

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError

from portal.accounts.models import SSHKey
from portal.accounts.services import ssh_key_add, ssh_key_remove
from portal.accounts.ssh_keys import MAX_INPUT_CHARS
from tests.accounts.ssh_keygen import new_public_key, private_key, private_text, public_line
from tests.factories import OrganisationFactory, UserFactory


def _ssh_keygen_fingerprint(line: str, tmp_path) -> str:
    if not shutil.which("ssh-keygen"):
        pytest.skip("ssh-keygen is not installed")
    path = tmp_path / "key.pub"
    path.write_text(line + "\n")
    return subprocess.run(["ssh-keygen", "-lf", str(path)], capture_output=True, text=True,
                          check=True).stdout.split()[1]


@pytest.mark.parametrize("kind, bits, label", [
    ("ssh-ed25519", 256, "Ed25519"),
    ("ecdsa-sha2-nistp256", 256, "ECDSA P-256"),
    ("ecdsa-sha2-nistp384", 384, "ECDSA P-384"),
    ("ecdsa-sha2-nistp521", 521, "ECDSA P-521"),
    ("ssh-rsa", 2048, "RSA 2048"),
    ("ssh-rsa", 3072, "RSA 3072"),
])
def test_each_accepted_type_is_stored_with_its_fingerprint(db, tmp_path, kind, bits, label):
    org = OrganisationFactory()
    line = new_public_key(kind, bits=bits) if kind == "ssh-rsa" else new_public_key(kind)
    key = ssh_key_add(public_key=f"  {line}\n", organisation=org)
    key.refresh_from_db()
    assert (key.key_type, key.bits, key.type_label) == (kind, bits, label)
    assert key.fingerprint == _ssh_keygen_fingerprint(line, tmp_path)
    assert key.public_key == " ".join(line.split()[:2])  # no comment, no surrounding space
    assert key.name == "alice@laptop"  # the comment, when no name is given


def test_a_given_name_wins_and_a_key_without_comment_gets_its_type(db):
    org = OrganisationFactory()
    named = ssh_key_add(public_key=new_public_key(), name="  CI   runner ", organisation=org)
    bare = ssh_key_add(public_key=new_public_key(comment=""), organisation=org)
    assert (named.name, bare.name) == ("CI runner", "Ed25519 key")


def _refused(text: str, message: str, **owner):
    owner = owner or {"organisation": OrganisationFactory()}
    before = SSHKey.objects.count()
    with pytest.raises(ValidationError) as info:
        ssh_key_add(public_key=text, **owner)
    errors = info.value.message_dict["public_key"]
    assert any(message in e for e in errors), errors
    assert SSHKey.objects.count() == before  # nothing stored
    return errors[0]


def test_an_rsa_key_below_2048_bits_is_refused_and_says_the_minimum(db):
    _refused(new_public_key("ssh-rsa", bits=1024),
             "This RSA key has 1024 bits; RSA keys need at least 2048.")


def test_a_private_key_is_refused_with_a_warning(db):
    message = _refused(private_text(private_key("ssh-ed25519")), "This is a private key")
    assert "treat this private key as exposed" in message


@pytest.mark.parametrize("text, message", [
    ("", "Paste a public key"),
    ("   \n ", "Paste a public key"),
    ("hello world", "This is not an OpenSSH public key"),
    ("ssh-ed25519", "The key data after ssh-ed25519 is missing"),
    ("ssh-ed25519 AAAA!!notbase64", "The key data is damaged or incomplete"),
])
def test_junk_is_refused_with_its_reason(db, text, message):
    _refused(text, message)


def test_a_truncated_key_is_refused(db):
    line = new_public_key(comment="")
    _refused(line[:-12], "The key data is damaged or incomplete (not a valid Ed25519 key)")


def test_a_key_under_another_type_name_is_refused(db):
    blob = new_public_key(comment="").split()[1]
    _refused(f"ecdsa-sha2-nistp256 {blob}", "The key data is damaged or incomplete")
    _refused(f"ssh-rsa {blob}", "The key data is damaged or incomplete")


def test_authorized_keys_options_before_the_key_are_refused(db):
    _refused(f'from="10.0.0.0/8",no-pty {new_public_key()}', "Remove what comes before the key type")
    _refused(f"command=\"/bin/true\" {new_public_key()}", "installs it without options")


def test_two_keys_or_a_wrapped_key_are_refused(db):
    _refused(f"{new_public_key()}\n{new_public_key()}", "Paste one key on one line")
    line = new_public_key(comment="")
    _refused(f"{line[:40]}\n{line[40:]}", "Paste one key on one line")


def test_two_keys_on_one_line_are_refused_not_stored_as_one(db):
    """Issue 28: the second key was taken for the first one's comment and stored as one key."""
    first, second = new_public_key(), new_public_key("ecdsa-sha2-nistp256")
    message = _refused(f"{first} {second}", "This line holds more than one key")
    assert "ecdsa-sha2-nistp256 follows the first key" in message and "one key per entry" in message
    _refused(f"{new_public_key(comment='')} {new_public_key(comment='')}", "more than one key")
    _refused(f"{first}\t{second}", "more than one key")
    blob = new_public_key(comment="").split()[1]  # a second key's data without its type
    _refused(f"{first} {blob}", "(key data follows the first key)")
    _refused(f"{first} ssh-ed25519-cert-v01@openssh.com AAAA", "more than one key")


@pytest.mark.parametrize("comment", ["alice@laptop", "Alice's laptop (work)", "ssh-laptop ci",
                                     "ecdsa key 2024", "deploy key: AAAAC3Nz"])
def test_a_comment_with_spaces_is_still_a_comment(db, comment):
    key = ssh_key_add(public_key=new_public_key(comment=comment), organisation=OrganisationFactory())
    assert key.name == comment


def test_an_ssh2_format_key_gets_the_conversion_command(db):
    _refused("---- BEGIN SSH2 PUBLIC KEY ----\nAAAAB3NzaC1yc2E\n---- END SSH2 PUBLIC KEY ----",
             "ssh-keygen -i -f key.pub")


def test_dsa_keys_are_refused(db):
    # OpenSSH dropped DSA; the type alone decides (the blob of a 1024-bit DSA key, shortened)
    _refused("ssh-dss AAAAB3NzaC1kc3MAAACBAP1/U4EddRIpUt9KnC7s5Of2EbdSPO9EAMMeP4C2USZp bob@old",
             "ssh-dss keys are not accepted")


def test_oversized_input_is_refused_before_parsing(db):
    _refused("ssh-rsa " + "A" * MAX_INPUT_CHARS, f"a public key line is at most {MAX_INPUT_CHARS:,}")


def test_the_same_key_twice_in_one_scope_is_refused_naming_the_first(db):
    org = OrganisationFactory()
    line = new_public_key()
    first = ssh_key_add(public_key=line, name="laptop", organisation=org)
    message = _refused(line.replace("alice@laptop", "other comment"), "already added as “laptop”",
                       organisation=org)
    assert first.fingerprint in message


def test_the_same_key_may_be_personal_and_the_organisations(db):
    org, alice, bob = OrganisationFactory(), UserFactory(), UserFactory()
    line = new_public_key()
    keys = [ssh_key_add(public_key=line, organisation=org), ssh_key_add(public_key=line, user=alice),
            ssh_key_add(public_key=line, user=bob)]
    assert len({k.fingerprint for k in keys}) == 1 and SSHKey.objects.count() == 3
    _refused(line, "already added", user=alice)


def test_a_key_belongs_to_exactly_one_owner(db):
    org, alice = OrganisationFactory(), UserFactory()
    with pytest.raises(ValueError):
        ssh_key_add(public_key=new_public_key(), organisation=org, user=alice)
    with pytest.raises(ValueError):
        ssh_key_add(public_key=new_public_key())
    with pytest.raises(IntegrityError):  # the database says so too
        SSHKey.objects.create(user=alice, organisation=org, name="x", public_key="x",
                              key_type="ssh-ed25519", bits=256, fingerprint="SHA256:x")


def test_removing_a_key_deletes_it(db):
    key = ssh_key_add(public_key=new_public_key(), user=UserFactory())
    ssh_key_remove(ssh_key=key)
    assert not SSHKey.objects.filter(pk=key.pk).exists()


def test_the_public_line_helper_matches_what_is_stored(db):
    key = private_key("ssh-ed25519")
    stored = ssh_key_add(public_key=public_line(key), organisation=OrganisationFactory())
    assert stored.public_key == public_line(key, comment="")
