"""The signature header: what we sign verifies with the receiver's recipe; tampering does not."""

import time

from portal.webhooks.signing import signature_header, verify
from tests.webhooks.receiver import receiver_verifies

SECRET = "whsec_test"
BODY = b'{"id":"evt_1","type":"webhook.test"}'


def test_a_signed_body_verifies_with_the_documented_recipe():
    header = signature_header(SECRET, int(time.time()), BODY)
    assert header.startswith("t=") and ",v1=" in header
    assert receiver_verifies(SECRET, header, BODY)
    assert verify(SECRET, header, BODY, now=int(time.time()))


def test_another_body_secret_or_an_old_timestamp_fails():
    now = int(time.time())
    header = signature_header(SECRET, now, BODY)
    assert not receiver_verifies(SECRET, header, BODY + b" ")
    assert not receiver_verifies("whsec_other", header, BODY)
    old = signature_header(SECRET, now - 3600, BODY)
    assert not receiver_verifies(SECRET, old, BODY)
    assert not verify(SECRET, old, BODY, now=now)
    assert not verify(SECRET, "garbage", BODY, now=now)
    assert not verify(SECRET, "t=x,v1=00", BODY, now=now)
