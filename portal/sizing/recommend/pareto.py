"""Pareto front of (time, cost) and ranking by goal."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from .types import Goal

T = TypeVar("T")


def pareto_front(items: Sequence[T], time: Callable[[T], float], cost: Callable[[T], float]) -> list[T]:
    """Items no other item beats on both time and cost (ties: the first listed), fastest first."""
    ordered = sorted(items, key=lambda x: (time(x), cost(x)))
    front: list[T] = []
    cheapest = float("inf")
    for item in ordered:
        if cost(item) < cheapest:
            front.append(item)
            cheapest = cost(item)
    return front


def rank(front: Sequence[T], goal: Goal, time: Callable[[T], float], cost: Callable[[T], float],
         hours: Callable[[T], float]) -> tuple[list[T], bool]:
    """Front items ordered by the goal; False when nothing meets a deadline or budget (then the
    closest miss comes first: fastest for a deadline, cheapest for a budget)."""
    by_time = sorted(front, key=lambda x: (time(x), cost(x)))
    by_cost = sorted(front, key=lambda x: (cost(x), time(x)))
    if goal.kind == "fastest":
        return by_time, True
    if goal.kind == "cheapest":
        return by_cost, True
    if goal.kind == "deadline":
        ok = [x for x in by_cost if hours(x) <= goal.deadline_hours]
        return (ok, True) if ok else (by_time, False)
    ok = [x for x in by_time if cost(x) <= goal.budget_usd]
    return (ok, True) if ok else (by_cost, False)
