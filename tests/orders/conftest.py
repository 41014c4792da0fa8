"""People and helpers shared by the order and provisioning tests."""

from dataclasses import dataclass

import pytest

from portal.accounts.models import Membership, Organisation, User
from tests.factories import OrganisationFactory, member_of, staff


@dataclass
class People:
    acme: Organisation  # alice's organisation
    alice: User  # customer member of acme
    outsider_org: Organisation
    charlie: User  # member of another customer
    reseller: Organisation
    rita: User  # reseller admin
    client_org: Organisation  # the reseller's customer
    sam: User  # staff approver
    olga: User  # operator


@pytest.fixture
def people(db) -> People:
    acme = OrganisationFactory(name="Acme AI", slug="acme-ai")
    outsider = OrganisationFactory(name="Other Lab", slug="other-lab")
    reseller = OrganisationFactory(name="GPU Resale", slug="gpu-resale",
                                   kind=Organisation.Kind.RESELLER)
    client = OrganisationFactory(name="Resale Client", slug="resale-client", parent=reseller)
    rita = member_of(reseller, username="rita")
    Membership.objects.filter(user=rita).update(role=Membership.Role.RESELLER_ADMIN)
    return People(
        acme=acme, alice=member_of(acme, username="alice"), outsider_org=outsider,
        charlie=member_of(outsider, username="charlie"), reseller=reseller, rita=rita,
        client_org=client, sam=staff(User.StaffRole.APPROVER, username="sam"),
        olga=staff(User.StaffRole.OPERATOR, username="olga"),
    )


@pytest.fixture
def sim_dir(tmp_path):
    """Where simulated nodes keep their journal (shared with worker processes)."""
    path = tmp_path / "simulated"
    path.mkdir()
    return path


def drain(run_id: int, *, limit: int = 500) -> list:
    """Runs a started run's steps in this process, as workers would, until nothing is left.

    A step waiting to retry is run again at once: its backoff is taken as elapsed (``retry_at``
    moved to now, as if the Celery task's countdown had run out)."""
    from django.utils import timezone

    from provisioning import pipeline, services
    from provisioning.models import StepRun

    queue = list(services.run_start(run_id=run_id))
    outcomes = []
    while queue:
        if len(outcomes) >= limit:
            raise AssertionError(f"run {run_id} did not settle after {limit} step executions")
        key = queue.pop(0)
        outcome = pipeline.step_execute(run_id=key[0], node_id=key[1], step=key[2])
        outcomes.append((key, outcome))
        queue.extend(outcome.next_steps)
        if outcome.status == "retry":
            StepRun.objects.filter(run_id=key[0], node_id=key[1], step=key[2]).update(
                retry_at=timezone.now())
            queue.append(key)
    return outcomes
