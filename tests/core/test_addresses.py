"""The portal's one rule for addresses it connects to for a customer or a reseller
(portal.core.addresses): https to public addresses only, an operator's allow-list for networks
that are private by design, checked where the URL is given and again on the address each
connection uses."""

import socket

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.core.addresses import UnsafeAddress, guarded_connection, url_problem
from portal.env import env_networks
from tests.conftest import LOOPBACK_NETWORKS
from tests.security.outbound import HOSTILE_URLS


@pytest.fixture(autouse=True)
def nothing_allowed(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = []


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_every_hostile_url_is_refused(url):
    assert url_problem(url)


@pytest.mark.parametrize("url", ["https://s3.example.com", "https://93.184.216.34:9000/bucket",
                                 "https://[2606:4700::1111]", "https://S3.Example.com./path"])
def test_https_to_a_public_address_or_name_is_fine(url):
    assert url_problem(url) == ""


def test_the_messages_say_what_is_wrong():
    assert url_problem("http://169.254.169.254/") == (
        "The portal connects to public addresses only: 169.254.169.254 is a link-local address "
        "(e.g. a cloud metadata service).")
    assert "::ffff:7f00:1 (127.0.0.1) is a loopback address" in url_problem("https://[::ffff:127.0.0.1]")
    assert "localhost resolves to" in url_problem("https://localhost:9000")
    assert url_problem("https://user:pw@s3.example.com") == "Leave credentials out of the URL."
    assert url_problem("http://s3.example.com").startswith("Use https://")
    assert url_problem("s3.example.com").startswith("Give a full URL")


def test_the_allow_list_admits_its_networks_only_and_plain_http_there(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["10.20.0.0/16"]
    assert url_problem("http://10.20.3.4:9000") == url_problem("https://10.20.3.4") == ""
    assert "private" in url_problem("https://10.21.0.1")
    assert "link-local" in url_problem("http://169.254.169.254/")
    assert "loopback" in url_problem("http://127.0.0.1:9000")
    assert url_problem("https://[::ffff:10.20.3.4]") == ""  # the same address, mapped
    assert url_problem("https://user:pw@10.20.3.4") == "Leave credentials out of the URL."


def test_the_setting_is_read_strictly(monkeypatch):
    monkeypatch.setenv("OUTBOUND_ALLOWED_NETWORKS", "10.20.0.0/16, fd12::/48,192.168.7.9")
    assert env_networks("OUTBOUND_ALLOWED_NETWORKS") == ["10.20.0.0/16", "fd12::/48", "192.168.7.9/32"]
    for bad in ("10.20.0.1/16", "intranet", "10.0.0.0/33"):
        monkeypatch.setenv("OUTBOUND_ALLOWED_NETWORKS", bad)
        with pytest.raises(ImproperlyConfigured, match="OUTBOUND_ALLOWED_NETWORKS"):
            env_networks("OUTBOUND_ALLOWED_NETWORKS")


def test_a_connection_goes_to_a_checked_address_only(settings, listener):
    port = listener.port
    with pytest.raises(UnsafeAddress, match="refused to connect to localhost"):
        guarded_connection("localhost", port, timeout=2)
    assert listener.connections() == 0
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS
    guarded_connection("localhost", port, timeout=2).close()
    assert listener.connections() == 1


def test_a_name_that_resolves_elsewhere_at_connect_time_is_refused(monkeypatch, listener):
    """DNS rebinding: public when the URL was checked, loopback when the connection is made."""
    real = socket.getaddrinfo
    answers = iter(["93.184.216.34", "127.0.0.1"])

    def rebinding(host, port, *args, **kwargs):
        if host != "s3.rebind.example":
            return real(host, port, *args, **kwargs)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port or 0))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    assert url_problem("https://s3.rebind.example") == ""
    with pytest.raises(UnsafeAddress, match="127.0.0.1 \\(a loopback address\\)"):
        guarded_connection("s3.rebind.example", listener.port, timeout=2)
    assert listener.connections() == 0
