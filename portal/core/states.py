"""State machines: the basics every table uses, and the one audited ``transition()``.

Each stateful model (order, node, provisioning run) has one table that lists its allowed moves
(``portal.orders.states``, ``provisioning.states``). ``transition()`` applies one move: it locks
the row, checks the table, saves the new state with the fields that go with it and writes the
audit row, all inside ``transaction.atomic()``. No I/O here: callers queue mail and work with
``transaction.on_commit``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import models, transaction

M = TypeVar("M", bound=models.Model)


class DomainError(ValueError):
    """A business rule said no. The message is written for the person who asked."""


class TransitionNotAllowed(DomainError):
    pass


@dataclass(frozen=True)
class Transition:
    name: str
    sources: frozenset[str]
    target: str
    label: str  # what a person sees in the history, e.g. "Termination requested"

    @property
    def verb(self) -> str:
        return self.name.replace("_", " ")

    def allowed_from(self, state: str) -> bool:
        return state in self.sources


class TransitionTable:
    def __init__(self, entity: str, transitions: list[Transition], labels: dict[str, str]):
        self.entity = entity
        self.labels = labels
        self.by_name = {t.name: t for t in transitions}
        if len(self.by_name) != len(transitions):
            raise ValueError(f"{entity}: two transitions share a name")

    def __iter__(self):
        return iter(self.by_name.values())

    def get(self, name: str) -> Transition:
        try:
            return self.by_name[name]
        except KeyError:
            raise ValueError(f"{self.entity} has no transition {name!r}") from None

    def check(self, name: str, state: str, *, subject: str = "") -> Transition:
        """The transition, or TransitionNotAllowed with a message a person can read."""
        transition = self.get(name)
        if not transition.allowed_from(state):
            subject = subject or f"this {self.entity}"
            label = self.labels[state].lower()
            if state == transition.target:
                raise TransitionNotAllowed(f"Cannot {transition.verb} {subject}: it is already {label}.")
            allowed = " or ".join(self.labels[s].lower() for s in sorted(transition.sources))
            raise TransitionNotAllowed(
                f"Cannot {transition.verb} {subject}: it is {label} (only possible when {allowed})."
            )
        return transition

    def allowed_from(self, state: str) -> list[Transition]:
        return [t for t in self if t.allowed_from(state)]


# record(locked_row, from_state, to_state, actor) -> the audit row it created
AuditRecorder = Callable[[Any, str, str, Any], models.Model]


def actor_or_none(by):
    """A saved user, or None when the system acted (policy, worker, beat)."""
    return by if getattr(by, "pk", None) else None


def transition(instance: M, *, table: TransitionTable, name: str, record: AuditRecorder,
               by=None, subject: str = "", state_field: str = "state",
               fields: Mapping[str, Any] | None = None) -> tuple[M, models.Model]:
    """Moves ``instance`` along transition ``name`` of ``table``; returns it and the audit row.

    The row is locked (``select_for_update``) and checked against the table (TransitionNotAllowed
    when it says no); ``fields`` are saved with the new state (``auto_now`` fields too) and
    ``record`` writes the audit row, all in one transaction. The caller's instance is refreshed
    with the saved values.
    """
    fields = dict(fields or {})
    model = type(instance)
    stamped = [f.name for f in model._meta.concrete_fields if getattr(f, "auto_now", False)]
    with transaction.atomic():
        locked = model._default_manager.select_for_update().get(pk=instance.pk)
        from_state = getattr(locked, state_field)
        move = table.check(name, from_state, subject=subject)
        setattr(locked, state_field, move.target)
        for key, value in fields.items():
            setattr(locked, key, value)
        saved = list(dict.fromkeys([state_field, *fields, *stamped]))
        locked.save(update_fields=saved)
        event = record(locked, from_state, move.target, actor_or_none(by))
    for attr in saved:
        setattr(instance, attr, getattr(locked, attr))
    return instance, event
