"""The stack renderer (``settings.PROVISIONING_STACK_RENDERER``): every file of one node and the
bootstrap that carries them. ``(*, order, node, nodes, facts) -> RenderedStack``."""

from __future__ import annotations

from dataclasses import dataclass

from provisioning.stack.bootstrap import render_bootstrap_script
from provisioning.stack.inputs import NodeFacts, StackInputs, stack_inputs
from provisioning.stack.render import RenderedFile, render_files

BOOTSTRAP_PATH = "/opt/trainyard/bootstrap.sh"


@dataclass(frozen=True)
class RenderedStack:
    inputs: StackInputs
    files: tuple[RenderedFile, ...]  # bootstrap.sh first, then what it writes

    @property
    def bootstrap(self) -> str:
        return self.files[0].content

    def file(self, name: str) -> RenderedFile | None:
        return next((f for f in self.files if f.name == name), None)


def render_inputs(inputs: StackInputs) -> RenderedStack:
    files = render_files(inputs)
    bootstrap = RenderedFile("bootstrap.sh", BOOTSTRAP_PATH,
                             render_bootstrap_script(inputs, files), "0755", "bash")
    return RenderedStack(inputs=inputs, files=(bootstrap, *files))


def render_stack(*, order, node, nodes, facts: NodeFacts | None = None) -> RenderedStack:
    return render_inputs(stack_inputs(order=order, node=node, nodes=nodes, facts=facts))
