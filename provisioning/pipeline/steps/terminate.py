"""The steps of a termination run, the hand-back (DESIGN.md, rule 11): end the customer's
access, keep the data (checkpoints copied to the order's bucket, kept until its date), revoke
the bucket keys, remove everything of the tenant, attest against the node's clean baseline (or,
where an imaging engine erased the node, on the engine's word that it is cleaned and available),
and only then back into stock."""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioning.drivers import login_user_for
from provisioning.inventory.baseline import node_inventory
from provisioning.inventory.handback import MAX_LISTED, attestation_findings, findings_summary
from provisioning.models import Node, NodeEvent, StepRun
from provisioning.pipeline.context import StepContext, StepFailed, StepResult
from provisioning.pipeline.steps.storage import storage_backend
from provisioning.stack.scripts import handback_env, revoke_access_script, sanitise_script
from provisioning.storage.backend import RetainResult


@dataclass(frozen=True)
class AccessEndedResult(StepResult):
    login_user: str = ""


@dataclass(frozen=True)
class RevokeKeysResult(StepResult):
    storage: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SanitiseResult(StepResult):
    wipe_method: str = ""
    devices: tuple[str, ...] = ()
    simulated: bool = False
    erased_by_engine: bool = False


@dataclass(frozen=True)
class AttestResult(StepResult):
    clean: bool = False
    checked: int = 0  # inventory entries looked at
    findings: tuple[str, ...] = ()
    simulated: bool = False
    by_engine: str = ""  # the imaging engine's word, where it erased the node


def _handback_env(node: Node) -> dict[str, str]:
    return handback_env(login_user=login_user_for(node), wipe_method=node.wipe_method,
                        devices=node.nvme_devices)


def revoke_access(ctx: StepContext) -> AccessEndedResult:
    ctx.run_script(revoke_access_script(), name="revoke_access", env=_handback_env(ctx.node))
    ctx.say("SSH access ended")
    return AccessEndedResult(login_user=login_user_for(ctx.node))


def retain_data(ctx: StepContext) -> RetainResult:
    if not ctx.order.has_object_storage:
        ctx.say("No bucket was ordered: data on the server's disks is erased with them")
        return RetainResult(policy="wipe", note="no bucket ordered")
    backend = storage_backend()
    if backend is None:
        raise StepFailed("a bucket was ordered but PROVISIONING_STORAGE_BACKEND is empty: the "
                         "checkpoints cannot be copied, so nothing is wiped. Set it and retry.")
    return backend.retain(ctx)


def revoke_keys(ctx: StepContext) -> RevokeKeysResult:
    backend = storage_backend()
    storage = backend.revoke(ctx) if backend is not None else {"revoked": 0}
    return RevokeKeysResult(storage=storage)


def sanitise(ctx: StepContext) -> SanitiseResult:
    node = ctx.node
    facts = {"wipe_method": node.wipe_method, "devices": tuple(node.nvme_devices),
             "simulated": bool(ctx.driver.simulated)}
    if ctx.driver.release(erase=True, on_line=ctx.log):
        ctx.log(f"{node.hostname}'s disks erased by its imaging engine")
        ctx.say("Disks erased")
        return SanitiseResult(**facts, erased_by_engine=True)
    ctx.run_script(sanitise_script(), name="sanitise", env=_handback_env(node))
    ctx.say("Disks erased")
    return SanitiseResult(**facts)


def erased_by_engine(ctx: StepContext) -> bool:
    """Whether this run's sanitise step left the wipe to the node's imaging engine."""
    result = (StepRun.objects.filter(run=ctx.run, node=ctx.node, step="sanitise")
              .values_list("result", flat=True).first())
    return bool((result or {}).get("erased_by_engine"))


def engine_available(ctx: StepContext) -> str:
    """The engine's word that the machine is cleaned and back in its pool; StepFailed otherwise
    (nothing of ours runs on an erased machine to check over SSH)."""
    check = ctx.driver.engine_check()
    if check is None or not check.available:
        text = check.text if check is not None else "the driver reports no engine"
        raise StepFailed(f"{ctx.node.hostname} was erased by its imaging engine, which does not "
                         f"report it cleaned and available: {text}; check the machine in the "
                         f"engine, then retry this step")
    return check.text


def attest(ctx: StepContext) -> AttestResult:
    node = Node.objects.get(pk=ctx.node.pk)
    if ctx.driver.simulated and not erased_by_engine(ctx):
        ctx.log(f"{node.hostname} is simulated: nothing on it to attest")
        ctx.say(f"Checked: nothing of your data remains on {node.hostname}")
        return AttestResult(clean=True, simulated=True)
    if erased_by_engine(ctx):
        # The engine's cleaning erased the disks and the next deploy installs a new system: its
        # record that the machine is cleaned and available is the attestation.
        said = engine_available(ctx)
        NodeEvent.objects.create(node=node, transition="attest", from_state=node.state,
                                 to_state=node.state, order=ctx.order,
                                 note=f"erased by its imaging engine; {said}")
        ctx.log(f"attestation: {said}")
        ctx.say(f"Checked: {node.hostname} was erased and reset by its imaging engine")
        return AttestResult(clean=True, by_engine=said)
    if node.baseline_at is None:
        raise StepFailed(f"{node.hostname} has no clean baseline to compare with (it entered stock "
                         f"before baselines were recorded): check it by hand, record one from "
                         f"the node's page ('Record clean baseline'), then retry this step")
    now = node_inventory(node=node, driver=ctx.driver)
    findings = attestation_findings(baseline=node.baseline, now=now)
    listed = tuple(findings[:MAX_LISTED])
    ctx.result.update(AttestResult(checked=len(now), findings=listed).to_dict())
    if findings:
        raise StepFailed(findings_summary(findings), result=ctx.result)
    NodeEvent.objects.create(node=node, transition="attest", from_state=node.state,
                             to_state=node.state, order=ctx.order,
                             note=f"{findings_summary([])} ({len(now)} entries checked)")
    ctx.log(f"attestation: nothing of the last tenant remains on {node.hostname}")
    ctx.say(f"Checked: nothing of your data remains on {node.hostname}")
    return AttestResult(clean=True, checked=len(now))


@dataclass(frozen=True)
class ReadyResult(StepResult):
    gpu_count: int = 0


def ready(ctx: StepContext) -> ReadyResult:
    if erased_by_engine(ctx):  # no system of ours on it until the next deploy installs one
        ctx.log(f"{engine_available(ctx)}; {ctx.node.hostname} goes back into stock (its GPUs are "
                f"checked by the next order's acceptance)")
        ctx.say(f"Server {ctx.node.hostname} is released")
        return ReadyResult()
    health = ctx.driver.health()
    ctx.log(f"{health.gpu_count} GPU(s) visible; {ctx.node.hostname} goes back into stock")
    ctx.say(f"Server {ctx.node.hostname} is released")
    return ReadyResult(gpu_count=health.gpu_count)
