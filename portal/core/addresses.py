"""Where the portal and its workers may connect for a customer or a reseller: one rule for every
URL they give that we will connect to (webhook receivers, a custom S3 endpoint, anything added
later). No SSRF into our own network.

The rule: **public addresses only.** Loopback, private, link-local (169.254.169.254, the cloud
metadata service), shared (100.64/10), reserved, multicast and unspecified addresses are refused,
also inside IPv4-mapped, 6to4 and NAT64 IPv6 addresses; so is a URL with credentials in it, and
plain ``http://`` to anything but an allow-listed address. The operator allow-lists networks that
are private by design (an on-premises S3 endpoint) in ``OUTBOUND_ALLOWED_NETWORKS`` (CIDRs;
none by default): an address inside one is accepted, plain http too.

It is checked twice:
- ``url_problem`` where the URL is given, before anything is stored (a name that does not resolve
  now is accepted there);
- at every connection, on the addresses the connection actually uses: ``guarded_connection``
  resolves the name once, checks every address and connects to a checked one, so nothing
  resolves the name again (DNS rebinding). TLS still sends and verifies the name given (SNI and
  the certificate), and the Host header is the name. ``GuardedConnectionMixin`` puts this into
  any urllib3 connection class (requests' for webhooks here, botocore's for S3 in
  ``provisioning.storage.s3ops``)."""

from __future__ import annotations

import functools
import ipaddress
import socket
from urllib.parse import urlsplit

import requests
from django.conf import settings
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util.connection import create_connection
from urllib3.util.timeout import _DEFAULT_TIMEOUT

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class UnsafeAddress(OSError):
    """The address is not one we connect to for a customer or a reseller."""


@functools.lru_cache(maxsize=8)
def _networks(cidrs: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def allowed_networks() -> tuple[IPNetwork, ...]:
    """``settings.OUTBOUND_ALLOWED_NETWORKS`` (checked when the settings load)."""
    return _networks(tuple(settings.OUTBOUND_ALLOWED_NETWORKS))


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv4-mapped, 6to4 or NAT64 IPv6 address."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_allowed(ip: IPAddress) -> bool:
    """Inside a network the operator allow-listed (the IPv4 address inside an IPv6 one too)."""
    candidates = [ip, *filter(None, [_embedded_ipv4(ip)])]
    return any(c in net for c in candidates for net in allowed_networks() if c.version == net.version)


def address_problem(ip: IPAddress) -> str:
    """Why ``ip`` is refused, or "" when it is public or allow-listed."""
    if is_allowed(ip):
        return ""
    ip = _embedded_ipv4(ip) or ip
    kinds = ((ip.is_loopback, "a loopback address"),
             (ip.is_link_local, "a link-local address (e.g. a cloud metadata service)"),
             (ip.is_private, "a private address"), (ip.is_multicast, "a multicast address"),
             (ip.is_unspecified, "an unspecified address"), (ip.is_reserved, "a reserved address"))
    for test, words in kinds:
        if test:
            return words
    return "" if ip.is_global else "not a public address"


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _resolved(host: str) -> list[IPAddress]:
    """The addresses ``host`` resolves to now ([] when it does not resolve)."""
    ip = _literal(host)
    if ip is not None:
        return [ip]
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    return [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]


def _shown(ip: IPAddress) -> str:
    embedded = _embedded_ipv4(ip)
    return f"{ip} ({embedded})" if embedded is not None else str(ip)


def _hosts_problem(host: str, addresses: list[IPAddress]) -> str:
    if host.lower().rstrip(".") in LOOPBACK_NAMES and not addresses:
        return f"{host} is a loopback address"
    for address in addresses:
        problem = address_problem(address)
        if problem:
            shown = _shown(address)
            return f"{shown} is {problem}" if _literal(host) else f"{host} resolves to {shown}, {problem}"
    return ""


def url_problem(url: str) -> str:
    """Why the portal or its workers may not connect to ``url`` for a customer or a reseller
    ("" when they may): a sentence to show next to the field. A name that does not resolve now
    is accepted here; every connection checks again."""
    try:
        parts = urlsplit(url or "")
        host = (parts.hostname or "").lower()
        parts.port  # noqa: B018 - a port out of range raises ValueError
    except ValueError:
        return "Give a full URL, e.g. https://s3.example.com."
    if parts.scheme not in ("http", "https") or not host:
        return "Give a full URL that starts with https://, e.g. https://s3.example.com."
    if "@" in parts.netloc:
        return "Leave credentials out of the URL."
    addresses = _resolved(host)
    problem = _hosts_problem(host, addresses)
    if problem:
        return f"The portal connects to public addresses only: {problem}."
    if parts.scheme == "http" and not (addresses and all(map(is_allowed, addresses))):
        return "Use https:// (plain http:// only to an address the operator allow-listed)."
    return ""


def guarded_connection(host: str, port: int, timeout=_DEFAULT_TIMEOUT, source_address=None,
                       socket_options=None) -> socket.socket:
    """A connection to a checked address of ``host`` (urllib3's ``create_connection`` on the
    address itself, so nothing resolves the name again); UnsafeAddress when every address it
    resolves to is refused."""
    refused, error = [], None
    for *_, sockaddr in socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM):
        address = sockaddr[0].split("%")[0]
        problem = address_problem(ip := ipaddress.ip_address(address))
        if problem:
            refused.append(f"{_shown(ip)} ({problem})")
            continue
        try:
            return create_connection((sockaddr[0], port), timeout, source_address=source_address,
                                     socket_options=socket_options)
        except OSError as exc:
            error = exc
    if error is not None:
        raise error
    raise UnsafeAddress(f"refused to connect to {host}: it resolves only to {', '.join(refused)}")


class GuardedConnectionMixin:
    """Put first in the bases of a urllib3 ``HTTPConnection`` (or a subclass, e.g. botocore's):
    its socket goes to a checked address of the host (``guarded_connection``). The host name is
    kept for the Host header, SNI and certificate verification."""

    def _new_conn(self) -> socket.socket:
        """urllib3's own, connecting through ``guarded_connection``."""
        try:
            return guarded_connection(self._dns_host, self.port, self.timeout,
                                      self.source_address, self.socket_options)
        except UnsafeAddress as exc:
            raise NewConnectionError(self, str(exc)) from exc
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        except TimeoutError as exc:
            raise ConnectTimeoutError(self, f"Connection to {self.host} timed out. "
                                            f"(connect timeout={self.timeout})") from exc
        except OSError as exc:
            raise NewConnectionError(self, f"Failed to establish a new connection: {exc}") from exc


def unsafe_cause(exc: BaseException | None) -> UnsafeAddress | None:
    """The UnsafeAddress behind an HTTP library's connection error, if that is what it was."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, UnsafeAddress):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def guarded_pool_classes(http_pool=HTTPConnectionPool, https_pool=HTTPSConnectionPool) -> dict:
    """``{"http": …, "https": …}`` for a pool manager's ``pool_classes_by_scheme``: subclasses of
    the given urllib3 pools (urllib3's own, or a library's, e.g. botocore's) whose connections
    (their ``ConnectionCls`` with ``GuardedConnectionMixin`` first) go to checked addresses only."""
    pools = {}
    for scheme, pool in (("http", http_pool), ("https", https_pool)):
        connection = type(f"Guarded{pool.ConnectionCls.__name__}",
                          (GuardedConnectionMixin, pool.ConnectionCls), {})
        pools[scheme] = type(f"Guarded{pool.__name__}", (pool,), {"ConnectionCls": connection})
    return pools


GUARDED_POOLS = guarded_pool_classes()


class GuardedAdapter(requests.adapters.HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = GUARDED_POOLS


def guarded_session() -> requests.Session:
    """A requests session that connects only to checked addresses and ignores proxy variables
    (a proxy would connect on our behalf, unchecked)."""
    session = requests.Session()
    session.trust_env = False
    for prefix in ("http://", "https://"):
        session.mount(prefix, GuardedAdapter())
    return session
