"""A node's BMC as its driver options store it, and the one rule of where each kind goes: a BMC of
kind ``k`` is the object ``driver_options[k]`` (``{"ipmi": {…}}`` or ``{"redfish": {…}}``), with
``address`` and ``user`` (and for Redfish ``system_id``); settings add the password under the same
key. Pure; the forms, the enrolment checks, the node page and power control read BMCs here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BmcKind:
    name: str  # in labels: "IPMI admin@10.0.0.5"
    choice: str  # in the forms' protocol choice
    url_address: bool = False  # its address may be a URL (https://10.0.0.5)
    system_id: bool = False  # one BMC may manage several systems: the node names its own


# Each kind by the driver_options key it is stored under, in the order power control tries them:
# a node naming both is powered through Redfish.
BMC_KINDS = {"redfish": BmcKind("Redfish", "Redfish", url_address=True, system_id=True),
             "ipmi": BmcKind("IPMI", "IPMI (ipmitool)")}
DEFAULT_BMC_KIND = "ipmi"
BMC_KIND_CHOICES = tuple(sorted(((key, kind.choice) for key, kind in BMC_KINDS.items()),
                                key=lambda choice: choice[0] != DEFAULT_BMC_KIND))


@dataclass(frozen=True)
class Bmc:
    """One stored BMC object. Empty ``address`` and ``user`` are not stored; ``system_id`` None
    is not stored (an empty one is: "the BMC's only system")."""

    kind: str  # a key of BMC_KINDS
    address: str = ""
    user: str = ""
    system_id: str | None = None
    # What only the admin sets (verify_tls, timeouts, IPMI's interface), kept as stored; merged
    # options hold the settings' password here, hence no repr.
    admin: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def entered(cls, kind: str, *, address: str, user: str, system_id: str = "",
                keep: Bmc | None = None) -> Bmc:
        """The BMC an operator enters in a form: a system id only where the kind has one; what
        only the admin sets is kept from ``keep`` when it is of the same kind."""
        kind = kind if kind in BMC_KINDS else DEFAULT_BMC_KIND
        return cls(kind=kind, address=address.strip(), user=user.strip(),
                   system_id=system_id.strip() if BMC_KINDS[kind].system_id else None,
                   admin=keep.admin if keep is not None and keep.kind == kind else {})

    @property
    def named(self) -> bool:
        """Settings give only passwords, so a BMC counts once the node names its address."""
        return bool(self.address.strip())

    @property
    def host_port(self) -> str:
        """The address as host[:port] (a Redfish URL's scheme and trailing slash dropped)."""
        address = self.address.strip()
        return re.sub(r"^https?://", "", address).rstrip("/") if BMC_KINDS[self.kind].url_address else address

    @property
    def label(self) -> str:
        """``"Redfish admin@https://10.0.0.5 (system 1)"`` or ``"IPMI admin@10.0.0.5"``."""
        system = f" (system {self.system_id})" if self.system_id else ""
        return f"{BMC_KINDS[self.kind].name} {self.user}@{self.address}{system}"

    def stored(self) -> dict[str, Any]:
        """The object kept under ``driver_options[kind]``."""
        own = {key: value for key, value in (("address", self.address), ("user", self.user)) if value}
        if self.system_id is not None:
            own["system_id"] = self.system_id
        return {**self.admin, **own}


def stored_bmcs(options: Mapping) -> tuple[Bmc, ...]:
    """Every BMC object ``options`` holds, in power order (a value that is not an object is none:
    ``bmc_shape_problem`` names it)."""
    return tuple(_bmc(kind, options[kind]) for kind in BMC_KINDS
                 if isinstance(options.get(kind), Mapping))


def parse_bmc(options: Mapping) -> Bmc | None:
    """The BMC power goes through: the first named one; else the first stored (not named yet)."""
    found = stored_bmcs(options)
    return next((b for b in found if b.named), found[0] if found else None)


def dump_bmc(bmc: Bmc | None, options: dict) -> None:
    """Stores ``bmc`` in ``options`` in place of every BMC there (a node names one)."""
    for kind in BMC_KINDS:
        options.pop(kind, None)
    if bmc is not None:
        options[bmc.kind] = bmc.stored()


def bmc_shape_problem(options: Mapping) -> str | None:
    """A BMC key that holds something other than an object, in words."""
    for kind in BMC_KINDS:
        value = options.get(kind)
        if value and not isinstance(value, Mapping):
            return f'driver_options.{kind} is {{"address": "host[:port]", "user": …}}.'
    return None


def _bmc(kind: str, stored: Mapping) -> Bmc:
    system_id = stored.get("system_id")
    return Bmc(kind=kind, address=_text(stored.get("address")), user=_text(stored.get("user")),
               system_id=None if system_id is None else str(system_id),
               admin={k: v for k, v in stored.items() if k not in ("address", "user", "system_id")})


def _text(value) -> str:
    return "" if value is None else str(value)
