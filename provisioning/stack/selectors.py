"""Reads for the server page: the files the stack step put on each node (names and SHA-256 as
its result recorded them), and one of them rendered again on demand for download."""

from __future__ import annotations

from dataclasses import dataclass

from provisioning.models import Node, StepRun
from provisioning.pipeline.steps.stack import StackFile, StackResult, renderer
from provisioning.stack.render import RenderedFile
from provisioning.states import StepStatus


@dataclass(frozen=True)
class NodeStackFiles:
    hostname: str
    rank: int
    files: tuple[StackFile, ...]


def _latest_stack_steps(order) -> dict[str, StepRun]:
    steps = (StepRun.objects.filter(run__order=order, step="stack", status=StepStatus.SUCCEEDED,
                                    node__order=order)
             .select_related("node", "run").order_by("node__hostname", "-finished_at", "-pk"))
    latest: dict[str, StepRun] = {}
    for step in steps:
        latest.setdefault(step.node.hostname, step)
    return latest


def _recorded_cluster(step: StepRun) -> tuple[str, ...]:
    return tuple(StackResult.from_dict(step.result).cluster)


def _cluster(step: StepRun, known: dict[str, Node] | None = None) -> list[Node]:
    """The nodes the files were rendered for: as the step recorded them, else (results stored
    before it recorded them) the run's nodes. ``known``: nodes already read, by hostname."""
    recorded = _recorded_cluster(step)
    if recorded:
        found = known if known is not None and set(recorded) <= set(known) else \
            {n.hostname: n for n in Node.objects.filter(hostname__in=recorded)}
        if set(recorded) <= set(found):
            return [found[h] for h in recorded]
    skipped = StepRun.objects.filter(run=step.run, status=StepStatus.SKIPPED).values("node_id")
    ids = StepRun.objects.filter(run=step.run).exclude(node_id__in=skipped).values("node_id")
    return list(Node.objects.filter(pk__in=ids).order_by("hostname"))


def stack_downloads(order) -> tuple[NodeStackFiles, ...]:
    steps = _latest_stack_steps(order).values()
    known = {step.node.hostname: step.node for step in steps}  # read with their steps
    missing = {h for step in steps for h in _recorded_cluster(step)} - set(known)
    if missing:
        known |= {n.hostname: n for n in Node.objects.filter(hostname__in=missing)}
    found = []
    for step in steps:
        cluster = _cluster(step, known)
        rank = next((i for i, n in enumerate(cluster) if n.pk == step.node_id), 0)
        found.append(NodeStackFiles(hostname=step.node.hostname, rank=rank,
                                    files=StackResult.from_dict(step.result).files))
    return tuple(found)


class StaleFile(Exception):
    """The file renders differently now than what the node received (recorded SHA-256)."""


def stack_file(order, *, hostname: str, name: str) -> RenderedFile | None:
    """``name`` of ``hostname`` as the stack step rendered it; None when the step recorded no
    such file; StaleFile when today's rendering no longer matches what the node got."""
    step = _latest_stack_steps(order).get(hostname)
    if step is None:
        return None
    result = StackResult.from_dict(step.result)
    recorded = next((f for f in result.files if f.name == name), None)
    if recorded is None:
        return None
    try:
        rendered = renderer()(order=order, node=step.node, nodes=_cluster(step),
                              facts=result.node_facts)
    except ValueError as exc:  # the plan or the catalog changed since: it no longer renders
        raise StaleFile(f"{name} of {hostname} no longer renders ({exc}); re-deploy the stack "
                        f"after fixing that.") from None
    file = rendered.file(name)
    if file is None or file.sha256 != recorded.sha256:
        raise StaleFile(f"{name} of {hostname} renders differently now than when it was deployed "
                        f"(SHA-256 {recorded.sha256[:12]}…); re-deploy the stack to refresh it.")
    return file
