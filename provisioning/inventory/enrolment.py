"""What a node's enrolment must say, checked before it is stored: an RFC 1123 hostname, a
management address the driver can dial (host[:port], IPv4 or [IPv6]:port), and what the node's
driver declares it reads (``OptionsSchema``): the pinned host key and, when the BMC is named, both
its address and user (docs/operations.md).
Each check returns the problem in words, or None."""

from __future__ import annotations

import ipaddress
import re

from portal.core.states import DomainError
from provisioning.drivers import DriverError, options_schema
from provisioning.drivers.ssh import _parse_pins
from provisioning.power.bmc import Bmc, bmc_shape_problem, stored_bmcs

LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def hostname_problem(hostname: str) -> str | None:
    """RFC 1123: dot-separated labels of letters, digits and '-', 1–63 characters each, not
    starting or ending with '-', at most 253 characters in all."""
    if not hostname or len(hostname) > 253:
        return "A hostname has 1 to 253 characters."
    bad = [label for label in hostname.rstrip(".").split(".") if not LABEL.fullmatch(label)]
    if bad:
        return (f"{bad[0]!r} is not a valid hostname label: use letters, digits and '-' (not at the "
                f"start or end), at most 63 characters between dots (RFC 1123).")
    return None


def address_problem(address: str) -> str | None:
    """host, host:port, an IPv4 address, a bare IPv6 address, or [IPv6]:port."""
    host, port = _split(address)
    if host is None:
        return (f"{address!r} is not host[:port]; write an IPv6 address with a port in brackets, "
                f"e.g. [fd00::7]:22.")
    if port is not None and not (port.isdigit() and 1 <= int(port) <= 65535):
        return f"Port {port!r} must be a number from 1 to 65535."
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if re.fullmatch(r"[\d.]+", host):
        return f"{host!r} is not a valid IPv4 address."
    if hostname_problem(host):
        return f"{host!r} is neither an IP address nor a valid host name (RFC 1123)."
    return None


def host_key_problem(host_key: str) -> str | None:
    """A pinned host key: a public key line (known_hosts line) or a SHA256: fingerprint."""
    if not host_key.strip():
        return ("An ssh node needs its pinned host key: the node's 'ssh-ed25519 AAAA…' line "
                "(ssh-keyscan -t ed25519 HOST) or its SHA256: fingerprint.")
    try:
        pins = _parse_pins(host_key)
    except DriverError as exc:
        return f"Cannot read this host key: {exc.message}."
    if not pins:
        return "Cannot read this host key: the key data is not valid base64."
    return None


def bmc_problem(bmc: Bmc | None) -> str | None:
    """The BMC (IPMI or Redfish) is optional; named, it needs both an address and a user. A
    Redfish address may be a URL (``https://10.0.0.5``)."""
    address, user = (bmc.address.strip(), bmc.user.strip()) if bmc is not None else ("", "")
    if not address and not user:
        return None
    if not (address and user):
        return "Give both the BMC address and the BMC user, or neither (no power control)."
    return address_problem(bmc.host_port)


class EnrolmentRefused(DomainError):
    """What is wrong with an enrolment; ``problems`` maps each field to its problem in words."""

    def __init__(self, problems: dict[str, str]):
        self.problems = problems
        super().__init__(" ".join(problems.values()))


def enrolment_problems(*, hostname: str, management_address: str, driver: str,
                       driver_options: dict | None) -> dict[str, str]:
    """Every check above for one node, by field (hostname, management_address, host_key,
    bmc_address): the enrolment page, the admin and ``services.node_enrol`` all ask this."""
    problems: dict[str, str] = {}
    if problem := hostname_problem((hostname or "").strip()):
        problems["hostname"] = problem
    if problem := address_problem((management_address or "").strip()):
        problems["management_address"] = problem
    schema = options_schema(driver)
    if wrong := schema.shape_problems(driver_options if driver_options is not None else {}):
        problems["driver_options"] = " ".join(wrong)
    options = driver_options if isinstance(driver_options, dict) else {}
    if schema.host_key and (problem := host_key_problem(schema.parse(options).host_key_text)):
        problems["host_key"] = problem
    if schema.bmc:
        for bmc in stored_bmcs(options):
            if problem := bmc_problem(bmc):
                problems["bmc_address"] = problem
        if problem := bmc_shape_problem(options):
            problems["bmc_address"] = problem
    return problems


def _split(address: str) -> tuple[str | None, str | None]:
    address = address.strip()
    if address.startswith("["):
        match = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\](?::(.*))?", address)
        return (match.group(1), match.group(2)) if match else (None, None)
    if address.count(":") > 1:  # a bare IPv6 address, no port
        return address, None
    host, _, port = address.partition(":")
    return (host or None), (port if _ else None)
