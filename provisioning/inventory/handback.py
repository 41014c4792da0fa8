"""The hand-back attestation, pure: what a node holds now (the lines ``stack/sh/inventory.sh``
prints) against its clean baseline (the same lines, recorded when it entered stock). Whatever
is new is a finding, in words an operator acts on; a process of the customer is always one.
A node goes back to stock only when there is none (DESIGN.md, rule 11)."""

from __future__ import annotations

from collections.abc import Iterable

KINDS = ("file", "proc", "crontab", "atjob", "linger", "user", "listen")
# Always a finding, whatever the baseline said: the customer's account must run nothing.
ALWAYS_FINDINGS = frozenset({"proc"})
MAX_LISTED = 200  # findings kept in a step result and an event; the count says how many in all


def parse_inventory(lines: Iterable[str]) -> tuple[str, ...]:
    """The inventory entries in ``lines`` (other output, e.g. the driver's own, is skipped),
    sorted and without duplicates."""
    entries = set()
    for line in lines:
        kind, _, rest = line.strip().partition(" ")
        if kind in KINDS and rest:
            entries.add(f"{kind} {rest}")
    return tuple(sorted(entries))


def attestation_findings(*, baseline: Iterable[str], now: Iterable[str]) -> list[str]:
    """What ``now`` holds that the clean ``baseline`` did not, as readable findings."""
    clean = set(baseline)
    return [describe(entry) for entry in sorted(set(now))
            if entry.split(" ", 1)[0] in ALWAYS_FINDINGS or entry not in clean]


def describe(entry: str) -> str:
    kind, _, rest = entry.partition(" ")
    if kind == "file":
        return f"file left behind: {rest}"
    if kind == "proc":
        user, _, command = rest.partition(" ")
        return f"process of {user} still running: {command or '?'}"
    if kind == "crontab":
        return f"crontab of {rest}"
    if kind == "atjob":
        return f"at job of {rest}"
    if kind == "linger":
        return f"lingering user manager of {rest} (systemd user units start at boot)"
    if kind == "user":
        return f"account {rest} not in the clean baseline"
    if kind == "listen":
        return f"listening socket not in the clean baseline: {rest}"
    return entry


def findings_summary(findings: list[str]) -> str:
    """One text for a node event: the count and the first findings."""
    if not findings:
        return "attestation: nothing of the last tenant remains"
    shown = findings[:20]
    more = f"\n… and {len(findings) - len(shown)} more" if len(findings) > len(shown) else ""
    return (f"attestation found {len(findings)} thing(s) of the last tenant:\n"
            + "\n".join(f"- {f}" for f in shown) + more)
