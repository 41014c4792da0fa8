"""The customer's own S3 endpoint reaches nothing internal from our workers (issue 28): the
endpoint goes through the portal's address rule before a client is built, and every connection
of that client goes only to a checked address (resolved once, checked, connected to), with TLS
still verifying the endpoint's own name. An operator's allow-list admits an on-premises endpoint
(the loopback S3 server here)."""

import datetime
import socket
import ssl

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pytest_httpserver import HTTPServer

from portal.orders.models import Order
from portal.orders.states import OrderState
from provisioning.drivers.base import DriverError
from provisioning.models import StepRun
from provisioning.storage.custom import CustomProvider
from provisioning.storage.errors import UnsafeEndpointError
from provisioning.storage.registry import CustomAccess
from provisioning.storage.s3ops import make_client
from provisioning.storage.services import storage_setup
from tests.conftest import LOOPBACK_NETWORKS
from tests.factories import L4_SKU, approved_order, drain, make_node
from tests.provisioning.storage.conftest import make_storage_order


@pytest.fixture(autouse=True)
def nothing_allowed(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = []


def _custom(endpoint: str, **kwargs) -> CustomProvider:
    from provisioning.storage.base import ProviderConfig

    return CustomProvider(ProviderConfig(
        slug="custom-s3", kind="custom", endpoint_url=endpoint, access_key="AKIACUSTOMER",
        secret_key="customer-secret", options={"bucket": "probe-bucket"}, **kwargs))


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "2130706433"])
def test_a_loopback_endpoint_is_refused_before_anything_connects(listener, host):
    with pytest.raises(DriverError) as caught:
        _custom(f"http://{host}:{listener.port}")
    assert caught.value.permanent and "public addresses only" in caught.value.message
    assert listener.connections() == 0


def test_a_name_rebound_to_loopback_after_the_check_reaches_nothing(monkeypatch, listener):
    """Public when the provider checked it, loopback when the client connects (DNS rebinding)."""
    real = socket.getaddrinfo
    answers = iter(["93.184.216.34"])

    def rebinding(host, port, *args, **kwargs):
        if host != "s3.rebind.example":
            return real(host, port, *args, **kwargs)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers, "127.0.0.1"), port or 0))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    provider = _custom(f"https://s3.rebind.example:{listener.port}")
    with pytest.raises(DriverError) as caught:
        provider.ensure_bucket("probe-bucket")
    assert caught.value.permanent, caught.value.message  # not retried: it will not get better
    assert "refused to connect to s3.rebind.example" in caught.value.message
    assert "127.0.0.1 (a loopback address)" in caught.value.message
    assert listener.connections() == 0


def test_an_order_stored_around_the_checks_fails_its_storage_step_and_connects_nowhere(
        catalog, people, sim_dir, listener):
    make_node(sku=L4_SKU, state_dir=sim_dir)
    order = approved_order(people, sku=L4_SKU, network="eth-1g", nvme="nvme-1tb-single",
                           storage="custom-s3")
    for field, value in (("storage_endpoint_url", f"http://127.0.0.1:{listener.port}"),
                         ("storage_bucket", "probe-bucket"), ("storage_access_key_id", "AKIAX"),
                         ("storage_secret_key", "secret")):
        setattr(order, field, value)
    order.save(update_fields=["storage_endpoint_url", "storage_bucket", "storage_access_key_id",
                              "storage_secret_key"])
    drain(order.runs.get().pk)
    step = StepRun.objects.get(run__order=order, step="storage")
    assert step.status == "failed" and "public addresses only" in step.error
    assert Order.objects.get(pk=order.pk).state == OrderState.PROVISION_FAILED
    assert listener.connections() == 0


def test_an_allow_listed_on_premises_endpoint_works_end_to_end(settings, embedded_s3, admin_s3, catalog):
    """The operator allow-listed the network (loopback here): set-up checks the bucket with the
    customer's keys and proves put/get/list/delete through the guarded client."""
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS
    from portal.catalog.models import StorageProvider

    admin_s3.create_bucket(Bucket="customer-own-bucket")
    order = make_storage_order(storage_provider=StorageProvider.objects.get(slug="custom-s3"))
    custom = CustomAccess(endpoint_url=embedded_s3.endpoint_url, bucket="customer-own-bucket",
                          access_key_id=embedded_s3.access_key,
                          secret_access_key=embedded_s3.secret_key)
    result = storage_setup(order=order, custom=custom)
    assert (result.bucket, result.access_key_id) == ("customer-own-bucket", embedded_s3.access_key)
    settings.OUTBOUND_ALLOWED_NETWORKS = []  # the same endpoint, no longer allowed
    with pytest.raises(DriverError, match="public addresses only"):
        storage_setup(order=order, custom=custom)


# --- TLS: the connection goes to the checked address, the certificate is checked for the name ---
def _certificate(tmp_path, name: str):
    """A CA and a server certificate for ``name`` (files: ca.pem, server.pem, server.key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "server.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return tmp_path / "ca.pem"


@pytest.fixture
def tls_s3(tmp_path, monkeypatch, settings):
    """An HTTPS server on loopback whose certificate names s3.customer.example, a name that
    resolves (here) to loopback, which the operator allow-listed."""
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS
    ca = _certificate(tmp_path, "s3.customer.example")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "server.pem", tmp_path / "server.key")
    real = socket.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        if host in ("s3.customer.example", "s3.other.example"):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port or 0))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    server = HTTPServer(host="127.0.0.1", port=0, ssl_context=context)
    server.start()
    server.expect_request("/customer-own-bucket", method="HEAD").respond_with_data("", status=200)
    server.ca = str(ca)
    yield server
    server.clear()
    server.stop()


def _head(endpoint: str, ca: str):
    return make_client("s3", endpoint_url=endpoint, region="us-east-1", access_key="AKIAX",
                       secret_key="secret", guarded=True, verify=ca, max_attempts=1
                       ).head_bucket(Bucket="customer-own-bucket")


def test_tls_verifies_the_endpoints_name_on_the_checked_address(tls_s3):
    answer = _head(f"https://s3.customer.example:{tls_s3.port}", tls_s3.ca)
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    [(request, _)] = tls_s3.log
    assert request.host == f"s3.customer.example:{tls_s3.port}"  # the Host header is the name


def test_a_certificate_for_another_name_is_refused(tls_s3):
    from botocore.exceptions import SSLError

    with pytest.raises(SSLError):
        _head(f"https://s3.other.example:{tls_s3.port}", tls_s3.ca)
    assert tls_s3.log == []


def test_a_guarded_client_refuses_loopback_when_not_allowed(tls_s3, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    with pytest.raises(UnsafeEndpointError, match="refused to connect to s3.customer.example"):
        _head(f"https://s3.customer.example:{tls_s3.port}", tls_s3.ca)
    assert tls_s3.log == []


def test_an_operator_endpoint_client_is_not_guarded(tls_s3, settings):
    """Operator-configured providers (settings, not customers) are trusted: no check."""
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    client = make_client("s3", endpoint_url=f"https://s3.customer.example:{tls_s3.port}",
                         region="us-east-1", access_key="AKIAX", secret_key="secret",
                         verify=tls_s3.ca)
    answer = client.head_bucket(Bucket="customer-own-bucket")
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
