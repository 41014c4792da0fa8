"""Handover: the node is the customer's now. Records how the customer reaches it
(``HandoverResult``), which the server page shows as ``ssh -p PORT user@host``."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from provisioning.drivers import DriverError, driver_options, login_user_for, node_options, split_address
from provisioning.drivers.ssh import host_key_fingerprints
from provisioning.pipeline.context import StepContext, StepResult

SSH_PORT = 22


@dataclass(frozen=True)
class HandoverResult(StepResult):
    hostname: str = ""
    ssh_user: str = ""
    ssh_host: str = ""
    ssh_port: int = SSH_PORT
    address: str = ""  # the node's management address, as enrolled
    simulated: bool = False  # no real machine behind the node: there is nothing to log in to
    handed_over_at: str = ""
    # The node's pinned SSH host key ("ED25519 SHA256:…"): what the customer compares at the
    # first login, so it is never trust-on-first-use.
    host_key_fingerprints: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: dict | None) -> HandoverResult:
        """Reads this result and older rows, which recorded only ``hostname`` and ``address``."""
        result = super().from_dict(data)
        if result.ssh_host or not result.address or result.simulated:
            return result
        try:
            host, port = split_address(result.address, SSH_PORT)
        except (ValueError, DriverError):  # e.g. a simulated node's "sim://name"
            return cls(**{**result.__dict__, "simulated": True})
        return cls(**{**result.__dict__, "ssh_host": host, "ssh_port": port})

    @property
    def ssh_command(self) -> str:
        port = f"-p {self.ssh_port} " if self.ssh_port != SSH_PORT else ""
        user = f"{self.ssh_user}@" if self.ssh_user else ""
        return f"ssh {port}{user}{self.ssh_host}"


def handover(ctx: StepContext) -> HandoverResult:
    node = ctx.node
    options = driver_options(node)
    login_user = login_user_for(node)
    simulated = bool(ctx.driver.simulated)
    if simulated:
        host, port = node.hostname, SSH_PORT
    else:
        host, port = split_address(node.management_address, int(options.get("port", SSH_PORT)))
    ctx.log(f"{node.hostname} handed over to {ctx.order.organisation}")
    ctx.say(f"Server {node.hostname} is ready and handed over to you")
    return HandoverResult(hostname=node.hostname, ssh_user=login_user, ssh_host=host,
                          ssh_port=port, address=node.management_address, simulated=simulated,
                          handed_over_at=timezone.now().isoformat(),
                          host_key_fingerprints=() if simulated else host_key_fingerprints(
                              node_options(node).host_key_text))
