"""Typed readers for settings from the environment. Each fails loudly on a bad value."""

import ipaddress
import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str:
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise ImproperlyConfigured(f"{name} must be set")
        return default
    return value


def env_secret(name: str, default: str | None = None) -> str:
    """Reads NAME, or the file named by NAME_FILE (container secrets)."""
    value = env_file(f"{name}_FILE")
    if value is not None:
        return value
    return env_str(name, default)


def env_file(name: str) -> str | None:
    """The contents (stripped) of the file NAME points to, e.g. a mounted secret; None when NAME
    is unset or empty. The contents never go into an error message."""
    path = os.environ.get(name)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError as exc:
        raise ImproperlyConfigured(f"{name}={path!r} cannot be read: {exc}") from exc


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true/false, 1/0, yes/no)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    return _env_number(name, default, int, "an integer", minimum)


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    return _env_number(name, default, float, "a number", minimum)


def _env_number(name, default, parse, kind: str, minimum):
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = parse(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not {kind}") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str, default: list[str] | None = None) -> list[str]:
    """A comma-separated list of IP networks in CIDR notation (``10.20.0.0/16,fd12::/48``; a
    single address is its own /32 or /128), each written back in its normal form."""
    networks = []
    for item in env_list(name, default):
        try:
            networks.append(str(ipaddress.ip_network(item)))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {item!r} is not a network in CIDR notation, e.g. "
                                       f"10.20.0.0/16 ({exc})") from exc
    return networks
