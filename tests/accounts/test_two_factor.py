"""Two-factor sign-in, the services: enrolment, tokens and recovery codes (each works once),
throttling, turning it off, who must have it, an organisation's requirement, the support reset,
and the security e-mails."""

import re
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from portal.accounts import two_factor
from portal.accounts.models import Membership, User
from portal.accounts.tasks import security_notice_task
from portal.accounts.two_factor import LoginStep, TokenRefused
from tests.factories import UserFactory, member_of, staff, totp_token, two_factor_device

pytestmark = pytest.mark.django_db


@pytest.fixture
def notices(monkeypatch, mailoutbox, django_capture_on_commit_callbacks):
    """Security notices queued on commit run in this process, as the worker would run the task:
    ``with notices.sent() as subjects:`` collects the subjects of what the block sent."""
    monkeypatch.setattr(security_notice_task, "delay",
                        lambda user_id, event: security_notice_task(user_id, event))

    class Notices:
        @contextmanager
        def sent(self):
            subjects = []
            with django_capture_on_commit_callbacks(execute=True):
                yield subjects
            subjects.extend(m.subject for m in mailoutbox)
            mailoutbox.clear()
    return Notices()


def _unthrottle(user):
    """As if the wait after a wrong code had passed (django-otp: 1 s, doubling)."""
    for model in (TOTPDevice, StaticDevice):
        model.objects.filter(user=user).update(throttling_failure_count=0,
                                               throttling_failure_timestamp=None)


def _enrol(user) -> list[str]:
    device = two_factor.enrolment_device(user)
    return two_factor.enrolment_confirm(user=user, device=device, token=totp_token(device))


# --- enrolment ----------------------------------------------------------------------------------
def test_the_key_stays_the_same_until_confirmed_and_a_wrong_code_confirms_nothing():
    user = UserFactory()
    device = two_factor.enrolment_device(user)
    assert two_factor.enrolment_device(user).pk == device.pk  # a reload shows the same QR code
    assert re.fullmatch(r"([A-Z2-7]{4} )+[A-Z2-7]{1,4}", two_factor.manual_key(device))
    wrong = f"{(int(totp_token(device)) + 1) % 1_000_000:06d}"
    with pytest.raises(ValidationError, match="does not match"):
        two_factor.enrolment_confirm(user=user, device=device, token=wrong)
    device.refresh_from_db()
    assert not device.confirmed and two_factor.login_step(user) == LoginStep.DONE
    assert not StaticToken.objects.exists()


def test_the_qr_code_is_an_inline_svg_of_the_otpauth_link():
    device = two_factor.enrolment_device(UserFactory(username="dana"))
    svg = two_factor.qr_svg(device)
    assert svg.startswith("<svg ") and 'class="qr"' in svg and "<path" in svg
    assert "style=" not in svg and "<script" not in svg and "http" not in svg.split("xmlns")[0]
    assert device.config_url.startswith("otpauth://totp/Trainyard%3Adana?secret=")


def test_confirming_gives_ten_codes_stored_only_as_hashes_and_an_email(notices):
    user = UserFactory()
    with notices.sent() as subjects:
        codes = _enrol(user)
    assert subjects == ["[Trainyard] Two-factor sign-in is on"]
    assert len(codes) == 10 == len(set(codes))
    assert all(re.fullmatch(r"[a-z2-9]{5}-[a-z2-9]{5}", c) for c in codes)
    stored = set(StaticToken.objects.values_list("token", flat=True))
    assert len(stored) == 10 and not stored & {c.replace("-", "") for c in codes} and not stored & set(codes)
    assert TOTPDevice.objects.get(user=user).confirmed
    assert two_factor.login_step(user) == LoginStep.VERIFY


def test_a_new_app_replaces_the_old_one():
    user = UserFactory()
    _enrol(user)
    old = TOTPDevice.objects.get(user=user)
    _enrol(user)
    assert list(TOTPDevice.objects.filter(user=user).values_list("confirmed", flat=True)) == [True]
    assert not TOTPDevice.objects.filter(pk=old.pk).exists()


# --- tokens and recovery codes ------------------------------------------------------------------
def test_an_app_token_works_once():
    user = staff(User.StaffRole.APPROVER)
    device = two_factor_device(user)
    token = totp_token(device)
    assert two_factor.verify(user=user, token=token[:3] + " " + token[3:]).pk == device.pk
    with pytest.raises(TokenRefused, match="used already"):
        two_factor.verify(user=user, token=token)


def test_a_recovery_code_works_once_in_any_spelling(notices):
    user = UserFactory()
    codes = _enrol(user)
    with notices.sent() as subjects:
        device = two_factor.verify(user=user, token=codes[3].upper().replace("-", " "))
    assert subjects == ["[Trainyard] A recovery code was used"]
    assert isinstance(device, StaticDevice) and two_factor.recovery_codes_left(user) == 9
    with pytest.raises(TokenRefused):
        two_factor.verify(user=user, token=codes[3])
    assert two_factor.recovery_codes_left(user) == 9


def test_after_a_wrong_token_even_the_right_one_waits():
    user = UserFactory()
    _enrol(user)
    device = TOTPDevice.objects.get(user=user)
    right = totp_token(device)
    with pytest.raises(TokenRefused, match="not right"):
        two_factor.verify(user=user, token=f"{(int(right) + 1) % 1_000_000:06d}")
    with pytest.raises(TokenRefused, match="wait a few seconds"):
        two_factor.verify(user=user, token=right)
    TOTPDevice.objects.filter(pk=device.pk).update(
        throttling_failure_timestamp=timezone.now() - timedelta(seconds=5))
    assert two_factor.verify(user=user, token=right).pk == device.pk


def test_garbage_is_refused_with_what_to_type():
    user = UserFactory()
    _enrol(user)
    for token in ["", "12345", "abc", "x" * 30]:
        with pytest.raises(TokenRefused, match="6-digit code|not right"):
            two_factor.verify(user=user, token=token)


def test_new_codes_replace_the_old_ones(notices):
    user = UserFactory()
    old = _enrol(user)
    with notices.sent() as subjects:
        new = two_factor.recovery_codes_regenerate(user=user)
    assert subjects == ["[Trainyard] New recovery codes"]
    assert not set(old) & set(new) and two_factor.recovery_codes_left(user) == 10
    with pytest.raises(TokenRefused):
        two_factor.verify(user=user, token=old[0])
    _unthrottle(user)
    assert two_factor.verify(user=user, token=new[0])
    with pytest.raises(PermissionDenied):
        two_factor.recovery_codes_regenerate(user=UserFactory())


# --- turning it off, who must have it -----------------------------------------------------------
def test_turning_it_off_takes_a_current_token(notices):
    user = UserFactory()
    _enrol(user)
    with pytest.raises(ValidationError):
        two_factor.two_factor_disable(user=user, token="000000")
    assert TOTPDevice.objects.filter(user=user).exists()
    _unthrottle(user)
    with notices.sent() as subjects:
        two_factor.two_factor_disable(user=user, token=totp_token(TOTPDevice.objects.get(user=user)))
    assert subjects == ["[Trainyard] Two-factor sign-in is off"]
    assert not TOTPDevice.objects.filter(user=user).exists()
    assert not StaticDevice.objects.filter(user=user).exists()
    assert two_factor.login_step(user) == LoginStep.DONE


@pytest.mark.parametrize("who", ["approver", "operator", "superuser", "django staff"])
def test_staff_must_have_it_and_cannot_turn_it_off(who):
    user = (UserFactory(is_superuser=True) if who == "superuser" else UserFactory(is_staff=True)
            if who == "django staff" else UserFactory(staff_role=who))
    assert two_factor.login_step(user) == LoginStep.ENROL
    device = two_factor_device(user)
    assert two_factor.login_step(user) == LoginStep.VERIFY
    with pytest.raises(PermissionDenied, match="Staff accounts"):
        two_factor.two_factor_disable(user=user, token=totp_token(device))
    assert TOTPDevice.objects.filter(user=user).exists()


def test_an_organisation_requires_it_of_its_members_only(people):
    Membership.objects.filter(user=people.alice).update(role=Membership.Role.ADMIN)
    bob = member_of(people.acme, username="bob")
    with pytest.raises(ValidationError, match="your own account first"):
        two_factor.organisation_require_set(organisation=people.acme, required=True, by=people.alice)
    _enrol(people.alice)
    with pytest.raises(PermissionDenied):
        two_factor.organisation_require_set(organisation=people.acme, required=True, by=bob)
    with pytest.raises(PermissionDenied):  # an outsider, with a device or not
        two_factor.organisation_require_set(organisation=people.acme, required=True,
                                            by=people.charlie)
    two_factor.organisation_require_set(organisation=people.acme, required=True, by=people.alice)
    assert two_factor.login_step(bob) == LoginStep.ENROL
    assert two_factor.login_step(people.charlie) == LoginStep.DONE  # another organisation
    assert "Acme AI requires it" in two_factor.required_reason(bob)
    assert two_factor.members_without(people.acme) == {bob.pk}
    with pytest.raises(PermissionDenied, match="Acme AI"):
        two_factor.two_factor_disable(user=people.alice, token="123456")
    two_factor.organisation_require_set(organisation=people.acme, required=False, by=people.alice)
    assert two_factor.login_step(bob) == LoginStep.DONE


# --- support --------------------------------------------------------------------------------------
def test_the_reset_command_sends_staff_back_to_enrolment(notices):
    sam = staff(User.StaffRole.APPROVER, username="sam")
    with notices.sent() as subjects:
        call_command("two_factor_reset", "sam", "--by", "support-ticket-42")
    assert subjects == ["[Trainyard] Two-factor sign-in was reset"]
    assert not TOTPDevice.objects.filter(user=sam).exists()
    assert two_factor.login_step(sam) == LoginStep.ENROL
    with notices.sent() as subjects:
        call_command("two_factor_reset", "sam")  # again: nothing left to remove, nothing to say
    assert subjects == []


def test_the_reset_command_refuses_an_unknown_user():
    with pytest.raises(CommandError, match="No user 'nobody'"):
        call_command("two_factor_reset", "nobody")
