"""SSH keys: install the order's keys (the organisation's and its members' personal keys) on the
node. Runs after the stack in a provisioning run, and alone in a ``sync_keys`` run (day 2) when
a key is added or removed while the server is active. Records names and fingerprints only."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from portal.accounts.selectors import ssh_keys_for_servers_of
from provisioning.drivers import login_user_for
from provisioning.pipeline.context import StepContext, StepResult
from provisioning.stack.access import KEYS_PATH, KeyLine, authorized_keys_env, authorized_keys_script


@dataclass(frozen=True)
class InstalledKey:
    name: str
    fingerprint: str
    key_type: str
    owner: str  # "organisation" or the username of a member's personal key

    @classmethod
    def from_dict(cls, data) -> InstalledKey:
        data = data if isinstance(data, dict) else {}
        return cls(**{f.name: str(data.get(f.name, "")) for f in fields(cls)})


@dataclass(frozen=True)
class AccessResult(StepResult):
    key_count: int = 0
    keys: tuple[InstalledKey, ...] = field(default_factory=tuple)
    path: str = KEYS_PATH
    login_user: str = ""

    @classmethod
    def from_dict(cls, data: dict | None) -> AccessResult:
        result = super().from_dict(data)
        keys = tuple(k if isinstance(k, InstalledKey) else InstalledKey.from_dict(k)
                     for k in result.keys or ())
        return cls(**{**result.__dict__, "keys": keys})

    @property
    def fingerprints(self) -> tuple[str, ...]:
        return tuple(k.fingerprint for k in self.keys)


def access(ctx: StepContext) -> AccessResult:
    installed, lines, seen = [], [], set()
    for key in ssh_keys_for_servers_of(ctx.order.organisation):
        if key.fingerprint in seen:  # the same key personal and the organisation's: once
            continue
        seen.add(key.fingerprint)
        owner = key.user.get_username() if key.user_id else "organisation"
        lines.append(KeyLine(line=key.public_key, label=f"{key.name} ({owner})"))
        installed.append(InstalledKey(name=key.name, fingerprint=key.fingerprint,
                                      key_type=key.key_type, owner=owner))
    login_user = login_user_for(ctx.node)
    env = authorized_keys_env(lines, order_reference=ctx.order.reference, login_user=login_user)
    ctx.run_script(authorized_keys_script(), name="access", env=env)
    ctx.log(f"{len(installed)} SSH key(s) installed for {login_user}")
    for key in installed:
        ctx.log(f"key {key.name}: {key.fingerprint}")
    if installed:
        ctx.say(f"{len(installed)} SSH key{'s' if len(installed) != 1 else ''} installed: "
                f"{', '.join(key.name for key in installed)}")
    else:
        ctx.say("No SSH key yet: add one on your account or organisation page")
    return AccessResult(key_count=len(installed), keys=tuple(installed), login_user=login_user)
