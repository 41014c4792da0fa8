"""SSH keys on servers. Adding or removing a key (``portal.accounts.services``) is followed by a
day-2 ``sync_keys`` run on every active server that carries it, queued after the commit, so the
request never waits on a node. Reads for the server page and the "active" e-mail: which keys are
installed (names and fingerprints, from the access step's result) and how to log in.

The keys of an order are its organisation's keys plus the personal keys of the organisation's
members (``portal.accounts.selectors.ssh_keys_for_servers_of``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.urls import reverse

from portal.accounts import services as accounts_services
from portal.accounts.models import Membership, Organisation, SSHKey
from portal.accounts.selectors import ssh_keys_for_servers_of
from portal.orders.models import Order
from portal.orders.states import OrderState
from provisioning.fulfilment.selectors import order_access
from provisioning.models import Node, ProvisioningRun, StepRun
from provisioning.pipeline.enqueue import enqueue_run_start
from provisioning.pipeline.runs import run_create
from provisioning.pipeline.steps.access import AccessResult
from provisioning.stack.paths import ENV_SH
from provisioning.states import NodeState, RunKind, StepStatus

ENV_FILE = ENV_SH


# --- writes -----------------------------------------------------------------------------------
def ssh_key_add(*, public_key: str, name: str = "", user=None,
                organisation: Organisation | None = None, by=None) -> SSHKey:
    """Adds the key (ValidationError by field when it is not one good, new key) and queues its
    installation on the active servers it opens."""
    with transaction.atomic():
        key = accounts_services.ssh_key_add(public_key=public_key, name=name, user=user,
                                            organisation=organisation, by=by)
        keys_sync(organisations=_organisations_reached_by(key), by=by)
    return key


def ssh_key_remove(*, ssh_key: SSHKey, by=None) -> None:
    """Removes the key and queues its removal from the active servers it opened."""
    with transaction.atomic():
        organisations = _organisations_reached_by(ssh_key)
        accounts_services.ssh_key_remove(ssh_key=ssh_key)
        keys_sync(organisations=organisations, by=by)


def _organisations_reached_by(key: SSHKey) -> list[int]:
    if key.organisation_id:
        return [key.organisation_id]
    return list(Membership.objects.filter(user_id=key.user_id).values_list("organisation_id",
                                                                           flat=True))


def keys_sync(*, organisations, by=None) -> list[ProvisioningRun]:
    """A ``sync_keys`` run for each active order of ``organisations`` (ids), started after the
    commit. Each run installs whatever the keys are when its step runs on a node, so a burst of
    changes ends with the last state; runs on one node never overlap (the engine waits)."""
    runs = []
    for order in Order.objects.filter(organisation_id__in=organisations, state=OrderState.ACTIVE):
        nodes = list(Node.objects.filter(order=order, state=NodeState.ACTIVE))
        if nodes:
            run = run_create(order=order, kind=RunKind.SYNC_KEYS, nodes=nodes, by=by)
            enqueue_run_start(run)
            runs.append(run)
    return runs


# --- reads ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OrderSshKeys:
    installed: AccessResult | None  # as the latest key installation on the order's nodes recorded
    current: tuple[SSHKey, ...]  # the keys that should be there now

    @property
    def in_sync(self) -> bool:
        installed = set(self.installed.fingerprints) if self.installed else set()
        return installed == {k.fingerprint for k in self.current}


def installed_keys(order) -> AccessResult | None:
    latest = (StepRun.objects.filter(run__order=order, step="access", status=StepStatus.SUCCEEDED,
                                      node__order=order)
              .order_by("-finished_at", "-pk").values_list("result", flat=True).first())
    return AccessResult.from_dict(latest) if latest is not None else None


def order_ssh_keys(order) -> OrderSshKeys:
    installed = installed_keys(order)
    current = {k.fingerprint: k for k in ssh_keys_for_servers_of(order.organisation)}
    return OrderSshKeys(installed=installed, current=tuple(current.values()))


def _url(name: str, *args) -> str:
    return settings.SITE_URL.rstrip("/") + reverse(name, args=args)


def active_email_lines(order) -> list[str]:
    """How to log in, for the e-mail that says the servers are ready: one ssh command per node
    (with its rank in a cluster), the installed keys, where to manage them, the env file."""
    access = order_access(order)
    keys = order_ssh_keys(order)
    lines = ["How to log in:"]
    for node in access.nodes:
        label = f"{node.hostname} (rank {node.rank})" if order.is_cluster else node.hostname
        how = "a simulated node, nothing to log in to" if node.simulated else node.ssh_command
        lines.append(f"  {label}: {how}")
        for fingerprint in node.host_key_fingerprints:
            lines.append(f"    host key {fingerprint} (compare it at your first login)")
    installed = keys.installed.keys if keys.installed else ()
    if installed:
        lines += ["", "SSH keys installed on the servers:"]
        lines += [f"  {k.name}: {k.fingerprint}" for k in installed]
    else:
        lines += ["", "No SSH key is installed yet, so nobody can log in: add one and it is "
                      "installed on your servers within a minute or two."]
    lines += ["", f"Manage your organisation's keys: "
                  f"{_url('accounts:organisation', order.organisation.slug)}#ssh-keys",
              f"Manage your personal keys: {_url('account:ssh-keys')}",
              "", f"The training environment (ranks, master address) is in {ENV_FILE}: "
                  f"source it before launching a job."]
    return lines
