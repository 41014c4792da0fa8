"""Every move in the node table works from each allowed state and is refused from every other."""

import pytest

from portal.core.states import TransitionNotAllowed
from provisioning.models import Node
from provisioning.states import NODE_TERMINAL, NODE_TRANSITIONS, NodeState
from provisioning.transitions import node_transition
from tests.factories import make_node

ALLOWED = [(t.name, s) for t in NODE_TRANSITIONS for s in sorted(t.sources)]
FORBIDDEN = {t.name: [s for s in NodeState.values if s not in t.sources] for t in NODE_TRANSITIONS}


def test_every_state_is_reachable_and_every_one_but_retired_can_be_left():
    targets = {t.target for t in NODE_TRANSITIONS} | {NodeState.ENROLLED}
    sources = set().union(*(t.sources for t in NODE_TRANSITIONS))
    assert targets == set(NodeState.values)
    assert NODE_TERMINAL == {NodeState.RETIRED}
    assert sources == set(NodeState.values) - NODE_TERMINAL


@pytest.mark.parametrize(("name", "source"), ALLOWED)
def test_an_allowed_node_transition_is_recorded(catalog, people, sim_dir, name, source):
    node = make_node(sku="1x-l4-24gb", state_dir=sim_dir, state=source)
    node_transition(node=node, name=name, by=people.olga, note="test")
    target = NODE_TRANSITIONS.get(name).target
    assert Node.objects.get(pk=node.pk).state == target
    event = node.events.get(transition=name)
    assert (event.from_state, event.to_state, event.actor) == (source, target, people.olga)


@pytest.mark.parametrize("name", FORBIDDEN)
def test_a_forbidden_node_transition_is_refused_from_every_other_state(catalog, sim_dir, name):
    node = make_node(sku="1x-l4-24gb", state_dir=sim_dir)
    for source in FORBIDDEN[name]:
        Node.objects.filter(pk=node.pk).update(state=source)
        node.state = source
        with pytest.raises(TransitionNotAllowed, match=node.hostname):
            node_transition(node=node, name=name)
        assert Node.objects.get(pk=node.pk).state == source
    assert not node.events.filter(transition=name).exists()
