"""A node installed by OpenStack Ironic (standalone), through openstacksdk's ``baremetal`` proxy.

Ironic does the imaging and the wipe; everything after the install (configure, stack, access,
acceptance, handover, the hand-back checks) runs over SSH as for the ssh driver, which this
driver composes (``run``, ``health`` and the host key checks are the ssh driver's).

Options (``settings.NODE_DRIVER_OPTIONS["ironic"]`` overlaid by the node's ``driver_options``):

- ``ironic``: ``{"url", "auth": "noauth" | "http_basic", "username", "password", "node",
  "api_version", "timeout_s"}``. ``url`` is the API root (``http://ironic:6385``); ``password``
  comes from settings (``IRONIC_PASSWORD_FILE``), never from a node; ``node`` is the node's name
  or UUID in Ironic (default: the Trainyard hostname).
- ``images``: the OS images by Trainyard name, each ``{"url", "checksum", "checksum_algo":
  "sha256", "instance_info": {…}}`` (settings ``IRONIC_IMAGES``). An image without a checksum
  is refused: nothing is written to a disk unchecked.
- ``deploy_timeout_s`` (3600), ``clean_timeout_s`` (7200), ``poll_interval_s`` (10).
- The ssh driver's options for the installed system (``user``, ``private_key_file``, ``port``,
  ``host_key`` once pinned, …). ``user`` is also the management user cloud-init creates, with the
  public half of the ssh driver's private key.

The installed system's address is the node's management address (the operator gives the
machine a fixed address or DHCP reservation on the provisioning network).

Host keys, never trust on first use: for each deploy the driver makes a new ed25519 host key,
hands it to the node in the configdrive's cloud-init (which drops the image's keys and
generates none), and returns its public half in ``DeployFacts.host_keys`` for the pipeline to
pin before the first SSH connection. The public half is kept in ``node.extra`` so a retried
deploy_os that adopts the deploy already under way answers the same key; the private half
goes only into the configdrive (Ironic shows it as ``******`` and drops it at undeploy). A
declared CPU test host (``test_host: true``) is not really imaged nor erased (fake hardware
stands in for the machine, an sshd host for the installed system), so there its enrolled
``host_key`` stands, no new key is returned, and ``release`` answers False after Ironic's
cleaning so the pipeline's sanitise script cleans the stand-in host.

Fencing: ``node.extra["trainyard_fence"]`` holds the newest fencing token seen. An operation
with an older token is refused (``ExecutionStopped``); the token is checked again at each poll
and before a deploy or release reports success. Ironic's conductor locks the node while it
deploys or cleans, so a newer execution cannot record its token then: Ironic answers 409 and
the driver raises a transient error, the pipeline retries, and the newer execution records
its token once the lock is free. An older execution still polling may so see the deploy it
started finish first and report it (the pipeline discards the outcome of a lost claim). Either
way there is one deploy: Ironic's state machine refuses a second deploy of a node that is
deploying or active, and a newer execution adopts the deploy an older one started (same image,
recorded in ``node.extra["trainyard_deploy"]``) instead of issuing another. Release clears
that record.

Errors: ``deploy failed``, ``clean failed``, ``error``, maintenance, a missing node, refused
credentials and a request Ironic rejects (4xx) are permanent, with Ironic's own ``last_error``;
connection failures, timeouts, 5xx, a locked node (409) and a deadline passed while Ironic is
still working are transient.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import keystoneauth1.exceptions as ks_exceptions
import openstack
import openstack.exceptions as sdk_exceptions
import requests

from provisioning.drivers.base import (
    POWER_ACTIONS,
    DeployFacts,
    DriverError,
    EngineCheck,
    ExecutionStopped,
    HealthReport,
    LineCallback,
    NodeTarget,
    OptionsSchema,
    RunResult,
)
from provisioning.drivers.ssh import SshDriver
from provisioning.stack.cloud_init import new_host_key, render_user_data

logger = logging.getLogger(__name__)

FENCE_KEY = "trainyard_fence"
DEPLOY_KEY = "trainyard_deploy"
DEPLOYING = frozenset({"deploying", "wait call-back", "deploy wait"})
RELEASING = frozenset({"deleting", "cleaning", "clean wait"})
FAILED = frozenset({"deploy failed", "clean failed", "error", "inspect failed", "rescue failed"})
_POWER = {"on": ("power on", "power on"), "off": ("power off", "power off"),
          "reboot": ("rebooting", "power on")}


@dataclass(frozen=True)
class EngineState:
    """What Ironic says of the node, for the node page and the pipeline's logs."""

    node: str
    provision_state: str
    target_provision_state: str
    power_state: str
    maintenance: bool
    maintenance_reason: str
    last_error: str

    @property
    def text(self) -> str:
        target = f" → {self.target_provision_state}" if self.target_provision_state else ""
        extra = f", maintenance: {self.maintenance_reason or 'no reason'}" if self.maintenance else ""
        return f"ironic: {self.provision_state}{target} (power {self.power_state or '?'}{extra})"


def _state(node) -> EngineState:
    return EngineState(node=str(node.name or node.id), provision_state=node.provision_state or "",
                       target_provision_state=node.target_provision_state or "",
                       power_state=node.power_state or "", maintenance=bool(node.is_maintenance),
                       maintenance_reason=node.maintenance_reason or "",
                       last_error=node.last_error or "")


class IronicDriver:
    name = "ironic"
    simulated = False
    # The host key is pinned from the install (DeployFacts), not at enrolment.
    options_schema = OptionsSchema(login_user=True, engine=True, engine_machine=("ironic", "node"))

    def __init__(self, target: NodeTarget) -> None:
        self.target = target
        options = dict(target.options)
        stored = options.get("ironic")
        engine = dict(stored) if isinstance(stored, Mapping) else {}  # not an object: _call refuses
        self.url = str(engine.get("url") or "").rstrip("/")
        self.auth = str(engine.get("auth") or "noauth")
        self.username = str(engine.get("username") or "")
        self._password = engine.get("password")
        self.node_ident = self.options_schema.parse(options).engine_machine or target.hostname
        self.api_version = engine.get("api_version")
        self.request_timeout_s = float(engine.get("timeout_s", 30))
        self.images: Mapping[str, Any] = options.get("images") or {}
        self.deploy_timeout_s = float(options.get("deploy_timeout_s", 3600))
        self.clean_timeout_s = float(options.get("clean_timeout_s", 7200))
        self.poll_interval_s = float(options.get("poll_interval_s", 10))
        self.user = str(options.get("user") or "root")
        self.test_host = options.get("test_host") is True
        self._ssh_options = options
        self._ssh: SshDriver | None = None
        self._conn = None

    def __repr__(self) -> str:
        return f"<IronicDriver {self.node_ident} at {self.url} ({self.target.hostname})>"

    # --- the protocol ---------------------------------------------------------------------
    def deploy_os(self, *, image: str, on_line: LineCallback) -> DeployFacts:
        spec = self._image(image)
        node = self._fenced_node()
        deploy = dict((node.extra or {}).get(DEPLOY_KEY) or {})
        state = node.provision_state
        if node.is_maintenance:
            raise DriverError(f"{self._where()}: in maintenance in Ironic "
                              f"({node.maintenance_reason or 'no reason given'}); an operator "
                              "must clear it before it is deployed", permanent=True)
        if state in DEPLOYING or state == "active":
            if deploy.get("image") != image:
                raise DriverError(
                    f"{self._where()}: Ironic has it {state} with "
                    f"{deploy.get('image') or 'an image Trainyard did not deploy'}, not {image}; "
                    "release it (undeploy) before deploying again", permanent=True)
            on_line(f"ironic: a deploy of {image} is already {state} (fence "
                    f"{deploy.get('fence')}); following it instead of starting another")
            host_public = deploy.get("host_key", "")
        elif state == "available" or (state == "deploy failed" and self._newer_claim(deploy)):
            host_public = self._start_deploy(node, image, spec, on_line)
        elif state in FAILED:
            raise self._failed(node, "deploy")
        elif state in RELEASING:
            raise DriverError(f"{self._where()}: still {state} in Ironic; deploy later",
                              permanent=False)
        else:
            raise DriverError(f"{self._where()}: {state} in Ironic, not available: "
                              "provide it (manage, then provide) first", permanent=True)
        self._wait(until="active", failures={"deploy failed", "error"}, what="deploy",
                   timeout_s=self.deploy_timeout_s, on_line=on_line)
        on_line(f"ironic: {self.node_ident} is active with {image}")
        keys = () if self.test_host or not host_public else (host_public,)
        return DeployFacts(image=image, installed=True, host_keys=keys)

    def release(self, *, erase: bool, on_line: LineCallback) -> bool:
        """Undeploys the node (``deleted``); Ironic's automated cleaning is the wipe. Returns
        when the node is ``available`` again."""
        node = self._fenced_node()
        if erase and node.is_automated_clean_enabled is False:
            raise DriverError(f"{self._where()}: automated cleaning is disabled for this node in "
                              "Ironic, so an undeploy would not wipe it; enable it "
                              "(baremetal node set --automated-clean)", permanent=True)
        state = node.provision_state
        if state in FAILED and state != "deploy failed":
            raise self._failed(node, "clean" if state == "clean failed" else "release")
        if state in DEPLOYING:
            raise DriverError(f"{self._where()}: still {state} in Ironic; it is undeployed once "
                              "the deploy ends (retried)", permanent=False)
        if state in ("active", "deploy failed"):
            on_line(f"ironic: undeploying {self.node_ident} ({state}); cleaning follows")
            self._call(lambda bm: bm.set_node_provision_state(node, "deleted"))
        elif state not in RELEASING and state != "available":
            raise DriverError(f"{self._where()}: {state} in Ironic; cannot release it from there",
                              permanent=True)
        done = self._wait(until="available", failures={"clean failed", "error"},
                          what="clean", timeout_s=self.clean_timeout_s, on_line=on_line)
        if (done.extra or {}).get(DEPLOY_KEY):
            self._call(lambda bm: bm.patch_node(done, [{"op": "remove",
                                                        "path": f"/extra/{DEPLOY_KEY}"}]))
        on_line(f"ironic: {self.node_ident} is cleaned and available")
        if self.test_host:
            on_line("declared test host: fake hardware erased nothing on the stand-in host; "
                    "the sanitise script cleans it")
            return False
        return erase  # cleaned either way; an erase not asked for is not claimed

    def run(self, script: str, *, name: str, on_line: LineCallback,
            env: Mapping[str, str] | None = None, timeout_s: float = 1800) -> RunResult:
        return self.ssh.run(script, name=name, on_line=on_line, env=env, timeout_s=timeout_s)

    def health(self) -> HealthReport:
        return self.ssh.health()

    def power(self, action: str) -> None:
        if action not in POWER_ACTIONS:
            raise DriverError(f"unknown power action {action!r}; use on, off or reboot",
                              permanent=True)
        node = self._fenced_node()
        target, expected = _POWER[action]
        if action == "on" and (node.power_state == expected or node.provision_state in DEPLOYING
                               or node.provision_state in RELEASING):
            return  # on already, or Ironic drives the power itself while it deploys or cleans
        self._call(lambda bm: bm.set_node_power_state(node, target))
        deadline = time.monotonic() + max(self.request_timeout_s, 60)
        while time.monotonic() < deadline:
            current = self._call(lambda bm: bm.get_node(node.id))
            if current.power_state == expected and not current.target_power_state:
                return
            if current.last_error and current.target_power_state is None \
                    and current.power_state != expected:
                raise DriverError(f"{self._where()}: power {action} failed in Ironic: "
                                  f"{current.last_error}", permanent=False)
            time.sleep(min(self.poll_interval_s, 1.0))
        raise DriverError(f"{self._where()}: Ironic did not report power {action} in time",
                          permanent=False)

    # --- more than the protocol -------------------------------------------------------------
    def engine_state(self) -> EngineState:
        return _state(self._call(lambda bm: bm.get_node(self.node_ident)))

    def engine_check(self) -> EngineCheck | None:
        """Ironic's word: ``available`` (cleaned) and not in maintenance. A declared test host is
        a stand-in sshd host, checked over SSH like one."""
        if self.test_host:
            return None
        state = self.engine_state()
        return EngineCheck(available=state.provision_state == "available" and not state.maintenance,
                           text=state.text)

    @property
    def ssh(self) -> SshDriver:
        if self._ssh is None:
            self._ssh = SshDriver(self.target)
        return self._ssh

    # --- deploy -----------------------------------------------------------------------------
    def _image(self, image: str) -> dict:
        spec = self.images.get(image)
        if not isinstance(spec, Mapping):
            known = ", ".join(sorted(self.images)) or "none"
            raise DriverError(f"no Ironic image for {image!r} (IRONIC_IMAGES has: {known})",
                              permanent=True)
        url, checksum = str(spec.get("url") or ""), str(spec.get("checksum") or "")
        if not url.startswith(("http://", "https://", "file://")):
            raise DriverError(f"Ironic image {image!r}: url must be http(s):// or file://",
                              permanent=True)
        if not checksum:
            raise DriverError(f"Ironic image {image!r} has no checksum: refusing to write an "
                              "unchecked image to a disk", permanent=True)
        return dict(spec)

    def _start_deploy(self, node, image: str, spec: Mapping, on_line: LineCallback) -> str:
        private, public = new_host_key()
        try:
            user_data = render_user_data(hostname=self.target.hostname, management_user=self.user,
                                         management_keys=[self.ssh.management_public_key()],
                                         host_key=(private, public))
        except ValueError as exc:
            raise DriverError(f"{self._where()}: cannot build the cloud-init: {exc}",
                              permanent=True) from None
        algo = str(spec.get("checksum_algo") or "sha256")
        checksum = str(spec["checksum"]).removeprefix(f"{algo}:")
        instance_info = {**dict(spec.get("instance_info") or {}), "image_source": spec["url"],
                         "image_checksum": checksum, "image_os_hash_algo": algo,
                         "image_os_hash_value": checksum}
        token = self.target.fence.token if self.target.fence else None
        record = {"image": image, "fence": token, "host_key": public}
        self._call(lambda bm: bm.patch_node(node, [
            {"op": "add", "path": "/instance_info", "value": instance_info},
            {"op": "add", "path": f"/extra/{DEPLOY_KEY}", "value": record}]))
        on_line(f"ironic: deploying {image} to {self.node_ident} ({spec['url']})")
        config_drive = {"user_data": user_data,
                        "meta_data": {"hostname": self.target.hostname, "name": self.target.hostname}}
        self._call(lambda bm: bm.set_node_provision_state(node, "active",
                                                          config_drive=config_drive))
        return public

    def _newer_claim(self, deploy: Mapping) -> bool:
        """A failed deploy may be tried again by a newer claim (a staff retry), not by the same."""
        fence = self.target.fence
        return fence is None or deploy.get("fence") is None or int(deploy["fence"]) < fence.token

    # --- fencing, polling -------------------------------------------------------------------
    def _fenced_node(self):
        """The node, with our fencing token recorded on it (an older one is refused)."""
        node = self._call(lambda bm: bm.get_node(self.node_ident))
        fence = self.target.fence
        if fence is None:
            return node
        self._check_cancel()
        seen = (node.extra or {}).get(FENCE_KEY)
        if seen is not None and int(seen) > fence.token:
            raise ExecutionStopped(f"{self._where()}: a newer execution holds this node in Ironic "
                                   f"(fence {seen}, ours {fence.token}); stopping")
        if seen is None or int(seen) < fence.token:
            self._call(lambda bm: bm.patch_node(node, [
                {"op": "add", "path": f"/extra/{FENCE_KEY}", "value": fence.token}]))
            node = self._call(lambda bm: bm.get_node(node.id))
            self._check_fence(node)
        return node

    def _check_fence(self, node) -> None:
        fence = self.target.fence
        if fence is None:
            return
        seen = (node.extra or {}).get(FENCE_KEY)
        if seen is not None and int(seen) > fence.token:
            raise ExecutionStopped(f"{self._where()}: a newer execution took this node in Ironic "
                                   f"(fence {seen}, ours {fence.token}); stopping")

    def _check_cancel(self) -> None:
        fence = self.target.fence
        if fence is not None and fence.cancelled:
            raise ExecutionStopped(f"{self._where()}: cancelled (the claim was lost); Ironic's "
                                   "operation goes on and the next claim follows it")

    def _wait(self, *, until: str, failures: set[str], what: str, timeout_s: float,
              on_line: LineCallback):
        deadline = time.monotonic() + timeout_s
        started = time.monotonic()
        last_text, last_line_at = "", 0.0
        while True:
            self._check_cancel()
            node = self._call(lambda bm: bm.get_node(self.node_ident))
            self._check_fence(node)
            state = _state(node)
            now = time.monotonic()
            if state.text != last_text or now - last_line_at >= 60:
                on_line(state.text if state.text != last_text
                        else f"{state.text}, {now - started:.0f}s")
                last_text, last_line_at = state.text, now
            if node.provision_state == until and not node.target_provision_state:
                return node
            if node.provision_state in failures:
                raise self._failed(node, what)
            if now >= deadline:
                raise DriverError(f"{self._where()}: Ironic's {what} did not finish within "
                                  f"{timeout_s:g}s (now {node.provision_state}); it goes on, "
                                  "a retry follows it", permanent=False)
            time.sleep(min(self.poll_interval_s, max(0.0, deadline - now)))

    def _failed(self, node, what: str) -> DriverError:
        reason = node.last_error or "Ironic gave no reason"
        hint = {"clean": "the node is in maintenance in Ironic until an operator fixes it and "
                         "runs manage then provide",
                "deploy": "check the image and the node in Ironic; a retry redeploys"}.get(what, "")
        return DriverError(f"{self._where()}: Ironic's {what} failed ({node.provision_state}): "
                           f"{reason}" + (f"; {hint}" if hint else ""), permanent=True)

    def _where(self) -> str:
        return f"{self.target.hostname} (Ironic node {self.node_ident})"

    # --- the API ----------------------------------------------------------------------------
    def _connection(self):
        if self._conn is not None:
            return self._conn
        if not self.url:
            raise DriverError("the Ironic API URL is not set (IRONIC_URL)", permanent=True)
        if self.auth == "http_basic":
            if not (self.username and self._password):
                raise DriverError("Ironic http_basic needs IRONIC_USER and IRONIC_PASSWORD_FILE",
                                  permanent=True)
            auth = {"endpoint": self.url, "username": self.username, "password": self._password}
        elif self.auth == "noauth":
            auth = {"endpoint": self.url}
        else:
            raise DriverError(f"unknown Ironic auth {self.auth!r}: use noauth or http_basic",
                              permanent=True)
        kwargs = {"baremetal_api_version": str(self.api_version)} if self.api_version else {}
        self._conn = openstack.connect(
            auth_type="http_basic" if self.auth == "http_basic" else "none", auth=auth,
            baremetal_endpoint_override=f"{self.url}/v1", api_timeout=self.request_timeout_s,
            # A locked node (409) or a refused connection is the pipeline's to retry, with its
            # backoff and its claim checks, not the HTTP client's in a loop of its own.
            baremetal_status_code_retries=0, baremetal_connect_retries=0,
            load_yaml_config=False, load_envvars=False, app_name="trainyard", **kwargs)
        return self._conn

    def _call(self, action: Callable[[Any], Any]):
        """One API call with errors mapped: what may pass is transient, the rest permanent. A
        stored node id that is no id is refused before any call (never the node of the hostname)."""
        if problem := self.options_schema.machine_problem(self.target.options):
            raise DriverError(f"{self.target.hostname}: {problem}", permanent=True)
        try:
            return action(self._connection().baremetal)
        except sdk_exceptions.NotFoundException:
            raise DriverError(f"{self._where()}: no such node in Ironic at {self.url}",
                              permanent=True) from None
        except sdk_exceptions.HttpException as exc:
            status = exc.status_code or 0
            detail = _detail(exc)
            if status in (401, 403):
                raise DriverError(f"Ironic at {self.url} refused our credentials ({status}): "
                                  "check IRONIC_AUTH, IRONIC_USER and IRONIC_PASSWORD_FILE",
                                  permanent=True) from None
            if status == 409:
                raise DriverError(f"{self._where()}: Ironic is busy with the node (409): {detail}",
                                  permanent=False) from None
            if status >= 500 or status == 0:
                raise DriverError(f"{self._where()}: Ironic answered {status or 'an error'}: "
                                  f"{detail}", permanent=False) from None
            raise DriverError(f"{self._where()}: Ironic refused the request ({status}): {detail}",
                              permanent=True) from None
        except (ks_exceptions.ConnectFailure, ks_exceptions.ConnectionError,
                ks_exceptions.RetriableConnectionFailure, ks_exceptions.DiscoveryFailure,
                sdk_exceptions.SDKException, requests.RequestException, OSError) as exc:
            raise DriverError(f"{self._where()}: cannot reach Ironic at {self.url}: "
                              f"{type(exc).__name__}: {str(exc)[:300]}", permanent=False) from None


@dataclass(frozen=True)
class EngineNode:
    """One node as Ironic lists it, for the inventory import."""

    uuid: str
    name: str
    resource_class: str
    provision_state: str
    maintenance: bool
    properties: Mapping[str, Any]
    extra: Mapping[str, Any]


def list_nodes(options: Mapping[str, Any], *, resource_class: str) -> list[EngineNode]:
    """The nodes of one resource class in the Ironic of ``options`` (settings'
    ``NODE_DRIVER_OPTIONS["ironic"]``), by name. Errors as the driver's (DriverError)."""
    lister = IronicDriver(NodeTarget(hostname="(inventory import)", address="", options=options))
    found = lister._call(lambda bm: list(bm.nodes(details=True, resource_class=resource_class)))
    return sorted((EngineNode(uuid=n.id, name=n.name or "", resource_class=n.resource_class or "",
                              provision_state=n.provision_state or "",
                              maintenance=bool(n.is_maintenance),
                              properties=dict(n.properties or {}), extra=dict(n.extra or {}))
                   for n in found), key=lambda n: (n.name, n.uuid))


def _detail(exc: sdk_exceptions.HttpException) -> str:
    """Ironic's own message (``faultstring`` in its error body), else the SDK's text."""
    text = exc.details or str(exc)
    return " ".join(str(text).split())[:500]
