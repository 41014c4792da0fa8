"""Recorded MAAS exchanges, served from a real HTTP server on loopback (pytest-httpserver).

MAAS cannot run here (it ships as a snap), so the answers are replayed. Their shapes are MAAS's
own, read from its source at github.com/maas/maas commit de2288e04a9ad6fee7dd8954f6502d754f2ef280
(2024-06-10):

- ``src/maasserver/api/machines.py``: ``DISPLAYED_MACHINE_FIELDS`` (the machine JSON), the
  ``allocate``/``deploy``/``release`` operations and their form fields (``system_id``, ``tags``
  repeated; ``user_data`` base64, ``distro_series``; ``erase``, ``secure_erase``,
  ``quick_erase``), release answering 409 from a state that forbids it;
- ``src/maasserver/api/nodes.py``: ``set_owner_data`` (key=value form, "" removes),
  ``power_on``/``power_off`` (``stop_mode``), ``query_power_state`` → ``{"state": …}``;
- ``src/maasserver/api/events.py``: ``event_to_dict`` and ``query`` (``id``, ``level``,
  ``limit``, ``after``; newest first; ``count``/``events``/``next_uri``/``prev_uri``);
- ``src/maasserver/api/examples/machines.json`` and ``events.json``: recorded answers whose values
  (``status`` numbers beside ``status_name``, ``pool``/``zone``/``domain`` objects,
  ``resource_uri``) the machines below copy;
- ``src/maasserver/enum.py``: ``NODE_STATUS`` numbers and names;
- ``src/maasserver/api/support.py`` and ``urls_api.py``: ``…/op-NAME`` routes;
- ``src/maasserver/api/nodedevices.py``: ``NodeDevicesHandler`` (``nodes/{id}/devices/``, filtered
  by ``hardware_type=gpu``) and its ``fields``; ``src/metadataserver/enum.py``: ``HARDWARE_TYPE``
  (GPU = 5); ``machines/`` filtered by ``tags`` (``node_constraint_filter_forms.py``: every tag);
- ``src/maasserver/exceptions.py`` and ``api/auth.py``: errors as ``text/plain`` bodies
  (``NodeStateViolation``/``NodesNotAvailable`` 409, ``OAuthUnauthorized`` 401 "Authorization
  Error: Invalid API key.", 404 "No Machine matches the given query.").

``RecordedMaas`` replays one machine's life: each status the test lists for a deploy or release is
what the next ``GET machines/{id}/`` answers, and the events recorded for a status appear in the
events feed once the machine has reached it. It keeps every request for the test to check.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from werkzeug.wrappers import Request, Response

NODE_STATUS = {"New": 0, "Commissioning": 1, "Ready": 4, "Deployed": 6, "Broken": 8, "Deploying": 9,
               "Allocated": 10, "Failed deployment": 11, "Releasing": 12, "Releasing failed": 13,
               "Disk erasing": 14, "Failed disk erasing": 15}
NOT_FOUND = "No Machine matches the given query."
BAD_KEY = "Authorization Error: Invalid API key."


def machine_json(system_id: str, status_name: str, **fields) -> dict:
    """A machine as ``GET /MAAS/api/2.0/machines/{id}/`` answers (the fields Trainyard reads and
    their neighbours, values as in MAAS's examples/machines.json)."""
    machine = {
        "system_id": system_id, "hostname": "calm-cod", "fqdn": "calm-cod.sample",
        "description": "", "hardware_uuid": None, "owner": None, "owner_data": {}, "locked": False,
        "status": NODE_STATUS[status_name], "status_name": status_name,
        "status_message": "", "status_action": "", "error_description": "",
        "power_state": "off", "power_type": "ipmi", "osystem": "", "distro_series": "",
        "architecture": "amd64/generic", "cpu_count": 96, "memory": 2097152, "storage": 7681501.126,
        "ip_addresses": ["10.20.0.31"], "tag_names": ["h100", "nvme"], "netboot": True,
        "node_type": 0, "node_type_name": "Machine",
        "pool": {"name": "default", "description": "Default pool", "id": 0,
                 "resource_uri": "/MAAS/api/2.0/resourcepool/0/"},
        "zone": {"name": "default", "description": "", "id": 1,
                 "resource_uri": "/MAAS/api/2.0/zones/default/"},
        "domain": {"authoritative": True, "ttl": None, "is_default": True, "name": "maas",
                   "resource_record_count": 0, "id": 0, "resource_uri": "/MAAS/api/2.0/domains/0/"},
        "hardware_info": {"system_vendor": "Supermicro", "system_product": "SYS-821GE-TNHR",
                          "cpu_model": "Intel(R) Xeon(R) Platinum 8480+"},
        "resource_uri": f"/MAAS/api/2.0/machines/{system_id}/",
    }
    machine.update(fields)
    return machine


def gpu_json(device_id: int, system_id: str, product_name: str, pci_address: str) -> dict:
    """One GPU of ``nodes/{id}/devices/?hardware_type=gpu`` (``NodeDevicesHandler.fields``)."""
    return {"id": device_id, "bus": 1, "bus_name": "PCIE", "hardware_type": 5,
            "hardware_type_name": "GPU", "system_id": system_id, "numa_node": 0,
            "physical_blockdevice": None, "physical_interface": None, "vendor_id": "10de",
            "product_id": "2330", "vendor_name": "NVIDIA Corporation", "product_name": product_name,
            "commissioning_driver": "nvidia", "bus_number": 0, "device_number": 0,
            "pci_address": pci_address}


def event_json(event_id: int, system_id: str, kind: str, description: str = "",
               level: str = "INFO") -> dict:
    """One entry of ``events/op-query`` (``event_to_dict``)."""
    return {"username": "trainyard", "node": system_id, "hostname": "calm-cod", "id": event_id,
            "level": level, "created": "Fri, 04 Dec. 2026 23:40:00", "type": kind,
            "description": description}


@dataclass
class Seen:
    method: str
    path: str
    args: list[tuple[str, str]]
    form: list[tuple[str, str]]
    headers: dict[str, str]

    @property
    def op(self) -> str:
        match = re.search(r"/op-([^/]+)$", self.path)
        return match.group(1) if match else ""

    def field(self, name: str) -> list[str]:
        return [v for k, v in self.form if k == name]


@dataclass
class RecordedMaas:
    system_id: str = "4y3h7n"
    hostname: str = "gpu-maas-01"
    status: str = "Ready"
    owner_data: dict = field(default_factory=dict)
    power_state: str = "off"
    deploy_walk: list[str] = field(default_factory=lambda: ["Deploying", "Deploying", "Deployed"])
    release_walk: list[str] = field(default_factory=lambda: ["Disk erasing", "Ready"])
    events_at: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    # (method, op or "machine") → answers given before the replay's own: [(status, text)]
    errors: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    others: list[dict] = field(default_factory=list)  # more machines in ``machines/`` lists
    gpus: dict[str, list[dict]] = field(default_factory=dict)  # GPU devices by system id
    fields: dict = field(default_factory=dict)  # more of the machine's own JSON (memory, disks, …)
    seen: list[Seen] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    _walk: list[str] = field(default_factory=list)

    def serve(self, httpserver) -> str:
        self.events = [event_json(101, self.system_id, "Ready", "Commissioning complete")]
        httpserver.expect_request(re.compile(r"^/MAAS/api/2\.0/.*")).respond_with_handler(self.handle)
        return httpserver.url_for("/MAAS")

    def requests(self, op: str) -> list[Seen]:
        return [s for s in self.seen if s.op == op]

    # --- the replay --------------------------------------------------------------------------
    def handle(self, request: Request) -> Response:
        seen = Seen(request.method, request.path, list(request.args.items(multi=True)),
                    list(request.form.items(multi=True)), dict(request.headers))
        self.seen.append(seen)
        key = (request.method, seen.op or ("machine" if "/machines/" in request.path else ""))
        if self.errors.get(key):
            status, text = self.errors[key].pop(0)
            return Response(text, status=status, content_type="text/plain; charset=utf-8")
        path = request.path.removeprefix("/MAAS/api/2.0/")
        if path == "events/op-query":
            return self._events(request)
        if path == "machines/":
            wanted, tags = request.args.getlist("hostname"), request.args.getlist("tags")
            return _json([m for m in [self._machine(), *self.others]
                          if (not wanted or m["hostname"] in wanted)
                          and set(tags) <= set(m["tag_names"])])
        match = re.fullmatch(r"nodes/([^/]+)/devices/", path)
        if match:
            assert request.args.getlist("hardware_type") == ["gpu"]
            return _json(self.gpus.get(match.group(1), []))
        if path == "machines/op-allocate":
            if self.status != "Ready":
                return Response(f"No machine with system ID {self.system_id} available.",
                                status=409, content_type="text/plain; charset=utf-8")
            return self._move("Allocated")
        if not path.startswith(f"machines/{self.system_id}/"):
            return Response(NOT_FOUND, status=404, content_type="text/plain; charset=utf-8")
        op = seen.op
        if op == "":
            if self._walk:
                self._reach(self._walk.pop(0))
            return _json(self._machine())
        if op == "set_owner_data":
            for k, v in seen.form:
                if v == "":
                    self.owner_data.pop(k, None)
                else:
                    self.owner_data[k] = v
            return _json(self._machine())
        if op == "deploy":
            self._walk = list(self.deploy_walk)
            return self._move("Deploying")
        if op == "release":
            self.owner_data = {}
            self._walk = list(self.release_walk)
            return self._move("Releasing")
        if op == "power_on":
            self.power_state = "on"
            return _json(self._machine())
        if op == "power_off":
            self.power_state = "off"
            return _json(self._machine())
        if op == "query_power_state":
            return _json({"state": self.power_state})
        return Response(f"Unrecognised signature: method={request.method} op={op}",
                        status=400, content_type="text/plain; charset=utf-8")

    def _machine(self) -> dict:
        return machine_json(self.system_id, self.status, **{
            **self.fields, "owner_data": dict(self.owner_data), "hostname": self.hostname,
            "fqdn": f"{self.hostname}.maas", "power_state": self.power_state,
            "owner": "trainyard" if self.status != "Ready" else None})

    def _move(self, status: str) -> Response:
        self._reach(status)
        return _json(self._machine())

    def _reach(self, status: str) -> None:
        self.status = status
        for kind, description, level in self.events_at.pop(status, ()):
            self.events.append(event_json(self.events[-1]["id"] + 1, self.system_id, kind,
                                          description, level))

    def _events(self, request: Request) -> Response:
        limit = int(request.args.get("limit", 100))
        after = request.args.get("after")
        chosen = [e for e in self.events if request.args.get("id") in (None, e["node"])]
        if after is not None:
            chosen = [e for e in chosen if e["id"] > int(after)][:limit]
        else:
            chosen = chosen[-limit:]
        chosen = sorted(chosen, key=lambda e: e["id"], reverse=True)  # newest first, as MAAS
        return _json({"count": len(chosen), "events": chosen, "next_uri": "", "prev_uri": None})


def _json(body) -> Response:
    return Response(json.dumps(body), status=200, content_type="application/json")
