"""Training stack: discover the node's fabric (``stack.discover``), render every file of the
node from the order, plan and cluster (the renderer named in
``settings.PROVISIONING_STACK_RENDERER``: ``(*, order, node, nodes, facts) -> RenderedStack``),
and run its ``bootstrap.sh``. The result records each rendered file's name, path and SHA-256 and
the facts the files were rendered with, so the server page renders the same bytes on demand."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.utils.module_loading import import_string

from provisioning.models import Node
from provisioning.monitoring.targets import has_exporters
from provisioning.pipeline.context import StepContext, StepFailed, StepResult
from provisioning.stack.discover import discover_env, discover_script, parse_facts
from provisioning.stack.exporters import exporters_env, exporters_script
from provisioning.stack.inputs import NodeFacts, stack_inputs


@dataclass(frozen=True)
class StackFile(StepResult):
    name: str = ""
    path: str = ""
    sha256: str = ""


@dataclass(frozen=True)
class StackResult(StepResult):
    strategy: str = ""
    tracker: str = ""
    renderer: str = ""
    facts: dict = field(default_factory=dict)  # NodeFacts.to_dict()
    files: tuple[StackFile, ...] = ()
    cluster: tuple[str, ...] = ()  # hostnames of every node the files were rendered for, by rank

    @classmethod
    def from_dict(cls, data: dict | None) -> StackResult:
        data = data if isinstance(data, dict) else {}
        result = super().from_dict(data)
        return cls(**{**result.__dict__,
                      "files": tuple(StackFile.from_dict(f) for f in data.get("files") or ())})

    @property
    def node_facts(self) -> NodeFacts:
        return NodeFacts.from_dict(self.facts)


def renderer():
    return import_string(settings.PROVISIONING_STACK_RENDERER)


def order_cluster(ctx: StepContext) -> list[Node]:
    """Every node of the order's cluster, by hostname (rank = index): the run's nodes, and the
    order's nodes a day-2 run does not touch (a re-deploy runs on the active nodes only, but each
    node's env.sh must still name the whole cluster: its NNODES, ranks and master)."""
    ids = {n.pk for n in ctx.cluster} | set(
        Node.objects.filter(order=ctx.order).values_list("pk", flat=True))
    return list(Node.objects.filter(pk__in=ids).order_by("hostname"))


def discover(ctx: StepContext, nodes: list[Node]) -> NodeFacts:
    try:
        inputs = stack_inputs(order=ctx.order, node=ctx.node, nodes=nodes)
    except ValueError as exc:
        raise StepFailed(str(exc)) from None
    if not inputs.cluster:
        return NodeFacts()  # one node: NCCL stays on the host, there is no fabric to find
    lines: list[str] = []

    def capture(line: str) -> None:
        lines.append(line)
        ctx.log(line)

    result = ctx.driver.run(discover_script(), name="stack_discover", on_line=capture,
                            env=ctx.env | discover_env(inputs))
    if not result.ok:
        raise StepFailed(f"fabric discovery on {ctx.node.hostname} failed (exit "
                         f"{result.exit_status}): {lines[-1] if lines else 'no output'}")
    return parse_facts(lines)


def stack(ctx: StepContext) -> StackResult:
    nodes = order_cluster(ctx)
    facts = discover(ctx, nodes)
    try:
        rendered = renderer()(order=ctx.order, node=ctx.node, nodes=nodes, facts=facts)
    except ValueError as exc:
        raise StepFailed(f"the stack cannot be rendered: {exc}") from None
    ctx.result.update(facts=facts.to_dict())
    # A new deploy id re-runs the hardware preflight; a retry of this step keeps the id.
    ctx.run_script(rendered.bootstrap, name="stack",
                   env={"TRAINYARD_DEPLOY_ID": f"{ctx.run.pk}-{ctx.step_run.pk}"})
    if has_exporters(ctx.node):  # none on a simulated node or a declared test host
        ctx.run_script(exporters_script(), name="exporters",
                       env=exporters_env(ctx.node.management_address))
    ctx.say(f"Training stack installed: {ctx.order.strategy or rendered.inputs.strategy}, "
            f"{len(rendered.files)} files")
    return StackResult(strategy=rendered.inputs.strategy, tracker=rendered.inputs.tracker,
                       renderer=settings.PROVISIONING_STACK_RENDERER, facts=facts.to_dict(),
                       files=tuple(StackFile(name=f.name, path=f.path, sha256=f.sha256)
                                   for f in rendered.files),
                       cluster=tuple(n.hostname for n in nodes))
