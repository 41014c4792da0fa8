"""A small client of MAAS's REST API 2.0 (``/MAAS/api/2.0/``), the calls the maas driver makes.

Auth is OAuth 1.0a with the PLAINTEXT signature, from a MAAS API key
``consumer_key:token_key:token_secret`` (the consumer secret is empty), as MAAS's own CLI signs.
Operations are ``POST``/``GET`` on ``…/op-NAME`` (MAAS routes each ``op`` there as well as
``?op=NAME``); parameters go as form fields, repeated for lists (``tags``).

Errors become :class:`DriverError` with MAAS's own words (its error bodies are plain text):
401/403 and 404 are permanent; 409 (the machine is busy or not in a state for it, or nothing
matches an allocation yet), 5xx, timeouts and refused connections are transient; any other 4xx
(a bad parameter) is permanent. The API key never goes into a message or repr().
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import requests
from oauthlib.oauth1 import SIGNATURE_PLAINTEXT
from requests_oauthlib import OAuth1

from provisioning.drivers.base import DriverError

logger = logging.getLogger(__name__)

API_PREFIX = "/MAAS/api/2.0/"


@dataclass(frozen=True)
class MaasApiKey:
    consumer_key: str
    token_key: str
    token_secret: str = field(repr=False)

    @classmethod
    def parse(cls, text: str) -> MaasApiKey:
        parts = (text or "").strip().split(":")
        if len(parts) != 3 or not all(parts):
            raise DriverError("the MAAS API key is not 'consumer_key:token_key:token_secret' "
                              "(copy it from the MAAS user's API keys page)", permanent=True)
        return cls(*parts)

    def auth(self) -> OAuth1:
        return OAuth1(self.consumer_key, client_secret="", resource_owner_key=self.token_key,
                      resource_owner_secret=self.token_secret,
                      signature_method=SIGNATURE_PLAINTEXT)


class MaasApi:
    """One MAAS region. ``url`` is the region's address, e.g. ``http://maas:5240/MAAS`` (the API
    prefix is added); ``session`` is for tests and connection reuse."""

    def __init__(self, url: str, key: MaasApiKey, *, timeout_s: float = 30,
                 verify_tls: bool | str = True, session: requests.Session | None = None):
        base = (url or "").strip().rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise DriverError(f"MAAS_URL {url!r} is not an http(s) URL", permanent=True)
        if base.endswith("/MAAS"):
            base = base[: -len("/MAAS")]
        elif base.endswith("/MAAS/api/2.0"):
            base = base[: -len("/MAAS/api/2.0")]
        self.base = base
        self.key = key
        self.timeout_s = timeout_s
        self.verify_tls = verify_tls
        self.session = session or requests.Session()

    def __repr__(self) -> str:
        return f"<MaasApi {self.base}>"

    # --- machines ------------------------------------------------------------------------------
    def machines(self, *, hostname: str = "", tags: Sequence[str] = ()) -> list[dict]:
        """The machines the key's user can see, or those named ``hostname``, or carrying every one
        of ``tags``."""
        params = [("hostname", hostname)] if hostname else []
        params += [("tags", tag) for tag in tags]
        return self._call("GET", "machines/", params=params or None).get("items", [])

    def gpus(self, system_id: str) -> list[dict]:
        """The machine's GPUs as its commissioning found them (``nodes/{id}/devices/``)."""
        return self._call("GET", f"nodes/{system_id}/devices/",
                          params=[("hardware_type", "gpu")]).get("items", [])

    def machine(self, system_id: str) -> dict:
        return self._call("GET", f"machines/{system_id}/")

    def allocate(self, *, system_id: str = "", tags: Sequence[str] = (), comment: str = "") -> dict:
        """Allocates a Ready machine to the API key's user: by system id and/or tags (all must
        match). 409: none matches now (transient: machines come back from release)."""
        form: list[tuple[str, str]] = []
        if system_id:
            form.append(("system_id", system_id))
        form += [("tags", tag) for tag in tags]
        if comment:
            form.append(("comment", comment))
        return self._call("POST", "machines/op-allocate", data=form)

    def deploy(self, system_id: str, *, user_data_b64: str, distro_series: str,
               comment: str = "") -> dict:
        form = [("user_data", user_data_b64), ("distro_series", distro_series)]
        if comment:
            form.append(("comment", comment))
        return self._call("POST", f"machines/{system_id}/op-deploy", data=form)

    def release(self, system_id: str, *, erase: bool, secure_erase: bool = False,
                quick_erase: bool = False, comment: str = "") -> dict:
        form = [("erase", _flag(erase)), ("secure_erase", _flag(secure_erase)),
                ("quick_erase", _flag(quick_erase))]
        if comment:
            form.append(("comment", comment))
        return self._call("POST", f"machines/{system_id}/op-release", data=form)

    def set_owner_data(self, system_id: str, data: Mapping[str, str]) -> dict:
        """Key=value data on an allocated machine (MAAS clears it on release); "" removes a key."""
        return self._call("POST", f"machines/{system_id}/op-set_owner_data",
                          data=list(data.items()))

    def power_on(self, system_id: str, *, comment: str = "") -> dict:
        return self._call("POST", f"machines/{system_id}/op-power_on",
                          data=[("comment", comment)] if comment else [])

    def power_off(self, system_id: str, *, comment: str = "") -> dict:
        form = [("stop_mode", "hard")] + ([("comment", comment)] if comment else [])
        return self._call("POST", f"machines/{system_id}/op-power_off", data=form)

    def power_state(self, system_id: str) -> str:
        """``on``, ``off``, ``unknown`` or ``error``, asked of the BMC through MAAS (slow)."""
        return str(self._call("GET", f"machines/{system_id}/op-query_power_state").get("state"))

    # --- events --------------------------------------------------------------------------------
    def events(self, system_id: str, *, after: int | None = None, limit: int = 100) -> list[dict]:
        """The machine's events, oldest first; ``after`` an event id (MAAS answers newest first)."""
        params = [("id", system_id), ("level", "INFO"), ("limit", str(limit))]
        if after is not None:
            params.append(("after", str(after)))
        answer = self._call("GET", "events/op-query", params=params)
        return sorted(answer.get("events") or (), key=lambda e: e.get("id", 0))

    # --- plumbing ------------------------------------------------------------------------------
    def _call(self, method: str, path: str, *, data=None, params=None) -> dict:
        url = self.base + API_PREFIX + path
        what = f"MAAS {method} {path}"
        try:
            response = self.session.request(method, url, data=data, params=params,
                                            auth=self.key.auth(), timeout=self.timeout_s,
                                            verify=self.verify_tls,
                                            headers={"Accept": "application/json"})
        except requests.Timeout:
            raise DriverError(f"{what}: no answer within {self.timeout_s:g}s",
                              permanent=False) from None
        except requests.ConnectionError as exc:
            raise DriverError(f"{what}: cannot reach MAAS at {self.base}: {_reason(exc)}",
                              permanent=False) from None
        logger.info("%s → %s", what, response.status_code)
        if response.status_code >= 400:
            raise _error(what, response)
        if not response.content:
            return {}
        try:
            answer = response.json()
        except ValueError:
            raise DriverError(f"{what}: MAAS answered something that is not JSON: "
                              f"{response.text[:200]!r}", permanent=False) from None
        return answer if isinstance(answer, dict) else {"items": answer}


def _error(what: str, response: requests.Response) -> DriverError:
    status = response.status_code
    said = (response.text or response.reason or "").strip()[:500]
    if status in (401, 403):
        return DriverError(f"{what}: MAAS refused the API key (HTTP {status}: {said}); check "
                           "MAAS_API_KEY_FILE and the MAAS user's rights", permanent=True)
    if status == 404:
        return DriverError(f"{what}: MAAS has no such machine or operation (HTTP 404: {said}); "
                           "check the node's system_id", permanent=True)
    if status == 409 or status >= 500:
        return DriverError(f"{what}: MAAS cannot do it now (HTTP {status}: {said})",
                           permanent=False)
    return DriverError(f"{what}: MAAS refused the request (HTTP {status}: {said})", permanent=True)


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _reason(exc: Exception) -> str:
    text = str(exc)
    for marker in ("Connection refused", "Name or service not known", "No route to host",
                   "certificate verify failed", "Connection reset"):
        if marker in text:
            return marker
    return text[-200:]
