"""Where a webhook may be sent: public addresses only (no SSRF into our own network).

Private, loopback, link-local (169.254.169.254, the cloud metadata service), shared, reserved,
multicast and unspecified addresses are refused, also inside IPv4-mapped IPv6. Loopback is
allowed only where WEBHOOK_ALLOW_LOOPBACK is on (tests, development). The check runs when an
endpoint is saved and again at every delivery, on the addresses the connection actually uses
(``GuardedAdapter`` resolves, checks, then connects to a checked address), so a name that
resolves elsewhere later (DNS rebinding) is refused too."""

from __future__ import annotations

import ipaddress
import socket

import requests
from django.conf import settings
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util.connection import create_connection
from urllib3.util.timeout import _DEFAULT_TIMEOUT

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsafeAddress(OSError):
    """The receiver's address is not one we send to."""


def address_problem(ip: IPAddress, *, allow_loopback: bool) -> str:
    """Why ``ip`` is refused, or "" when it is a public address (or allowed loopback)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "" if allow_loopback else "a loopback address"
    kinds = ((ip.is_link_local, "a link-local address (e.g. a cloud metadata service)"),
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


def is_loopback_host(host: str) -> bool:
    ip = _literal(host)
    return host.lower() in LOOPBACK_NAMES if ip is None else ip.is_loopback


def host_problem(host: str, *, allow_loopback: bool, resolve: bool = True) -> str:
    """Why a receiver host is refused ("" when fine). A name that does not resolve now is
    accepted here; the delivery checks again."""
    if host.lower() in LOOPBACK_NAMES:
        return "" if allow_loopback else f"{host} is a loopback address"
    ip = _literal(host)
    if ip is not None:
        problem = address_problem(ip, allow_loopback=allow_loopback)
        return f"{ip} is {problem}" if problem else ""
    if not resolve:
        return ""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return ""
    for info in infos:
        problem = address_problem(ipaddress.ip_address(info[4][0]), allow_loopback=allow_loopback)
        if problem:
            return f"{host} resolves to {info[4][0]}, {problem}"
    return ""


def guarded_connection(host: str, port: int, timeout=_DEFAULT_TIMEOUT, source_address=None,
                       socket_options=None) -> socket.socket:
    """A connection to a checked address of ``host`` (urllib3's ``create_connection`` on the
    address itself, so nothing resolves the name again); UnsafeAddress when every address it
    resolves to is refused."""
    allow = settings.WEBHOOK_ALLOW_LOOPBACK
    refused, error = [], None
    for *_, sockaddr in socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM):
        problem = address_problem(ipaddress.ip_address(sockaddr[0]), allow_loopback=allow)
        if problem:
            refused.append(f"{sockaddr[0]} ({problem})")
            continue
        try:
            return create_connection((sockaddr[0], port), timeout, source_address=source_address,
                                     socket_options=socket_options)
        except OSError as exc:
            error = exc
    if error is not None:
        raise error
    raise UnsafeAddress(f"refused to send to {host}: it resolves only to {', '.join(refused)}")


class _GuardedHTTPConnection(HTTPConnection):
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


class _GuardedHTTPSConnection(HTTPSConnection):
    _new_conn = _GuardedHTTPConnection._new_conn


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class GuardedAdapter(requests.adapters.HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}


def guarded_session() -> requests.Session:
    """A session that connects only to checked addresses and ignores proxy variables (a proxy
    would connect on our behalf, unchecked)."""
    session = requests.Session()
    session.trust_env = False
    for prefix in ("http://", "https://"):
        session.mount(prefix, GuardedAdapter())
    return session
