"""The shape of ``Node.driver_options``: what Trainyard itself reads there (``NodeOptions``) and what
each driver declares it reads of a node (``OptionsSchema``). Everything else in the JSON is the
driver's own (an ssh port, a simulated node's delays) and passes ``parse``/``dump`` untouched.

A node's well-formed options read and written back (``schema.dump(schema.parse(stored), stored)``)
keep their keys, values and nesting, so existing nodes keep working. Options of the wrong shape (a
flag that is not true or false, a BMC that is not an object) are refused where a node is enrolled
or edited (``shape_problems``); ``parse`` reads such a value, stored before, as not stored. The
edit form writes again what it has fields for and refuses to save while another is of the wrong
shape; an engine driver refuses a machine id of the wrong shape (``machine_problem``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provisioning.power.bmc import Bmc, dump_bmc, parse_bmc

_HOST_KEY, _LOGIN_USER, _TEST_HOST, _FABRIC_ADDRESS = "host_key", "login_user", "test_host", "fabric_address"


@dataclass(frozen=True)
class NodeOptions:
    """What Trainyard reads of a node's driver options; None: not stored."""

    host_key: str | tuple[str, ...] | None = None  # pinned: key lines or SHA256: fingerprints
    login_user: str | None = None  # the account customers log in with (else the setting's)
    test_host: bool | None = None  # a declared CPU test host: no GPUs, power never switched
    bmc: Bmc | None = None
    engine_machine: str | None = None  # the node's machine in its imaging engine
    fabric_address: str | None = None  # older nodes keep it here, not in Node.fabric_address

    @property
    def host_key_text(self) -> str:
        """The pins as one text, a line each (what the forms show and check)."""
        if isinstance(self.host_key, tuple):
            return "\n".join(self.host_key)
        return self.host_key or ""


@dataclass(frozen=True)
class OptionsSchema:
    """What a driver reads of a node besides its address, declared by the driver: the enrol form
    and its checks, the node page and the stack inputs ask this, never the driver's name."""

    host_key: bool = False  # a pinned SSH host key, required at enrolment
    login_user: bool = False  # the account customers log in with (else the setting's)
    bmc: bool = False  # a BMC address and user for power control, optional
    fabric_from_management: bool = False  # no fabric of its own: the management host stands in
    engine: bool = False  # an imaging engine installs and erases the node: its state is shown
    # Where a node names its machine in the engine: ("ironic", "node") is options["ironic"]["node"].
    engine_machine: tuple[str, ...] = ()

    def parse(self, driver_options: Mapping[str, Any]) -> NodeOptions:
        """A node's options (stored, or merged over the settings') as typed values. A value of
        another shape (``shape_problems``: a flag that is not true or false, a login that is not
        text) reads as not stored, never as a guess."""
        options = driver_options if isinstance(driver_options, Mapping) else {}
        return NodeOptions(host_key=_host_key(options.get(_HOST_KEY)),
                           login_user=_text(options.get(_LOGIN_USER)),
                           test_host=_flag(options.get(_TEST_HOST)),
                           bmc=parse_bmc(options),
                           engine_machine=_machine_id(_read(options, self.engine_machine)),
                           fabric_address=_text(options.get(_FABRIC_ADDRESS)))

    def shape_problems(self, driver_options: Mapping[str, Any]) -> list[str]:
        """What ``parse`` would read as not stored although it is there: each key Trainyard reads
        that holds a value of another type, in words (``test_host: "yes"`` is not ``true``). A BMC's
        shape is the enrolment's BMC check (``power.bmc.bmc_shape_problem``)."""
        if not isinstance(driver_options, Mapping):
            return ["driver_options is an object of options, e.g. {\"test_host\": true}."]
        wrong = [f"driver_options.{key} is {kind}, not {_json_type(driver_options[key])}."
                 for key, kind, fits in _SHAPES
                 if driver_options.get(key) is not None and not fits(driver_options[key])]  # null: unset
        if problem := self.machine_problem(driver_options):
            wrong.append(problem)
        return wrong

    def machine_problem(self, driver_options: Mapping[str, Any]) -> str | None:
        """Where the node names its machine in the engine, something that is no machine id (an
        object on the path included): the engine driver refuses to act rather than take the
        machine of the node's hostname."""
        path, value = self.engine_machine, driver_options
        for depth, key in enumerate(path):
            if value is None:
                return None  # not stored
            if not isinstance(value, Mapping):
                where = ".".join(("driver_options", *path[:depth]))
                return f'{where} is an object holding "{key}", not {_json_type(value)}.'
            value = value.get(key)
        if path and value is not None and _machine_id(value) is None:
            where = ".".join(("driver_options", *path))
            return f"{where} is the engine's machine id (text), not {_json_type(value)}."
        return None

    def dump(self, options: NodeOptions, base: Mapping[str, Any]) -> dict[str, Any]:
        """``base`` (a node's stored options) with ``options`` in place of what ``parse`` reads;
        the driver's own keys stay as they are. ``base`` is not changed."""
        out = dict(base or {})
        host_key = list(options.host_key) if isinstance(options.host_key, tuple) else options.host_key
        for key, value in ((_HOST_KEY, host_key), (_LOGIN_USER, options.login_user),
                           (_TEST_HOST, options.test_host), (_FABRIC_ADDRESS, options.fabric_address)):
            _put(out, (key,), value)
        dump_bmc(options.bmc, out)
        if self.engine_machine:
            _put(out, self.engine_machine, options.engine_machine)
        return out


def _is_text(value) -> bool:
    return isinstance(value, str)


def _is_host_key(value) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))


# Each key Trainyard reads: what it holds, in words, and the test a stored value must pass.
_SHAPES = ((_HOST_KEY, "a key line or SHA256: fingerprint, or a list of them", _is_host_key),
           (_LOGIN_USER, "an account name (text)", _is_text),
           (_TEST_HOST, "true or false", lambda value: isinstance(value, bool)),
           (_FABRIC_ADDRESS, "an IP address (text)", _is_text))


def _json_type(value) -> str:
    """A JSON value's type in words, with the value where it is short (``the text "yes"``)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, str):
        return f"the text {json.dumps(value)}" if len(value) <= 40 else "a longer text"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    return "a list" if isinstance(value, list) else "an object"


def _read(options: Mapping, path: tuple[str, ...]):
    for key in path:
        if not isinstance(options, Mapping):
            return None
        options = options.get(key)
    return options if path else None


def _put(options: dict, path: tuple[str, ...], value) -> None:
    """Sets (None: removes) ``options[path[0]]…[path[-1]]``, copying each object on the way."""
    key, rest = path[0], path[1:]
    if not rest:
        if value is None:
            options.pop(key, None)
        else:
            options[key] = value
        return
    inner = options.get(key)
    if not isinstance(inner, Mapping):
        if value is None:
            return
        inner = {}
    options[key] = dict(inner)
    _put(options[key], rest, value)


def _host_key(value) -> str | tuple[str, ...] | None:
    if isinstance(value, (list, tuple)):
        return tuple(value) if all(isinstance(v, str) for v in value) else None
    return _text(value)


def _machine_id(value) -> str | None:
    """An engine's machine id: text, or a whole number the engine names machines by."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    return str(value)


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def _flag(value) -> bool | None:
    return value if isinstance(value, bool) else None
