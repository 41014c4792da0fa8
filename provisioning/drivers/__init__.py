"""Node drivers, chosen by name through ``settings.NODE_DRIVERS`` (dotted paths, imported lazily)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from provisioning.drivers.base import (
    DeployFacts,
    DriverError,
    ExecutionStopped,
    Fence,
    GpuReading,
    HealthReport,
    NodeDriver,
    NodeTarget,
    OptionsSchema,
    RunResult,
    split_address,
)
from provisioning.drivers.options import NodeOptions

__all__ = ["DeployFacts", "DriverError", "ExecutionStopped", "Fence", "GpuReading", "HealthReport",
           "NodeDriver", "NodeOptions", "NodeTarget", "OptionsSchema", "RunResult",
           "driver_class", "driver_for", "driver_names", "driver_options", "is_test_host",
           "login_user_for", "node_options", "options_schema", "secret_option_paths",
           "simulated_driver_names", "split_address"]

# Option names that hold secrets. They come from settings (secret files), never from the
# plain-text ``Node.driver_options`` column.
SECRET_OPTION_KEYS = frozenset({"private_key", "private_key_passphrase", "passphrase", "password",
                                "secret_key", "api_key"})


def secret_option_paths(options, prefix: str = "") -> list[str]:
    """Where ``options`` (a node's driver_options) holds a secret, e.g. ``["ipmi.password"]``."""
    found = []
    for key, value in (options.items() if isinstance(options, dict) else ()):
        path = f"{prefix}{key}"
        if str(key).lower() in SECRET_OPTION_KEYS:
            found.append(path)
        elif isinstance(value, dict):
            found += secret_option_paths(value, prefix=f"{path}.")
    return found


def driver_names() -> list[str]:
    return list(settings.NODE_DRIVERS)


def simulated_driver_names() -> list[str]:
    """The configured drivers with no machine behind them (``simulated = True``)."""
    return [name for name in driver_names() if driver_class(name).simulated]


def driver_class(name: str) -> type[NodeDriver]:
    try:
        path = settings.NODE_DRIVERS[name]
    except KeyError:
        raise ImproperlyConfigured(
            f"unknown node driver {name!r}; NODE_DRIVERS has {', '.join(settings.NODE_DRIVERS)}"
        ) from None
    try:
        return import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"node driver {name!r} ({path}) cannot be imported: {exc}") from exc


def options_schema(name: str) -> OptionsSchema:
    """What driver ``name`` reads of a node (an unknown or empty name: nothing)."""
    if name not in settings.NODE_DRIVERS:
        return OptionsSchema()
    return driver_class(name).options_schema


def driver_options(node) -> dict:
    """A node's driver options: ``settings.NODE_DRIVER_OPTIONS[driver]`` overlaid by the node's."""
    options = dict(getattr(settings, "NODE_DRIVER_OPTIONS", {}).get(node.driver, {}))
    for key, value in (node.driver_options or {}).items():
        # One level deep, so a node's ipmi {address, user} keeps the settings' ipmi password.
        if isinstance(value, dict) and isinstance(options.get(key), dict):
            value = {**options[key], **value}
        options[key] = value
    return options


def node_options(node) -> NodeOptions:
    """What Trainyard reads of a node's driver options (the settings' overlaid by the node's)."""
    return options_schema(node.driver).parse(driver_options(node))


def is_test_host(node) -> bool:
    """A CPU test host is declared (driver option ``test_host: true``), never inferred: it has no
    GPUs by declaration, and power and re-install commands are never run on it."""
    return node_options(node).test_host is True


def login_user_for(node) -> str:
    """The account customers log in with (driver option ``login_user``, else the setting)."""
    return node_options(node).login_user or settings.PROVISIONING_LOGIN_USER


def driver_for(node, *, fence: Fence | None = None) -> NodeDriver:
    """A driver instance for a ``provisioning.Node``: settings options overlaid by the node's.
    The pipeline passes the claim's ``fence``; every operation then carries it."""
    options = driver_options(node)
    # How the node's data is erased: an imaging engine's release(erase=True) asks for it.
    options.setdefault("wipe_method", node.wipe_method)
    target = NodeTarget(
        hostname=node.hostname,
        address=node.management_address,
        gpu_count=node.sku.gpu_count,
        gpu_name=node.sku.gpu.name,
        options=options,
        fence=fence,
    )
    return driver_class(node.driver)(target)
