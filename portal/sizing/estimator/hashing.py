"""Frozen input dataclasses that hash once.

The estimator's per-model and per-layout caches (functools.lru_cache) take ModelSpec,
TrainingConfig and ParallelConfig as keys; a recommendation looks them up thousands of times,
and the hash dataclasses generate walks every field on every lookup. These classes are frozen,
so their hash never changes: worked out on first use and kept. Equality is the dataclass's
(the compared fields), with the hashes compared first.
"""

from __future__ import annotations

from dataclasses import fields


def hash_once(cls):
    """Give a frozen dataclass a cached __hash__ and a hash-first __eq__ (same semantics)."""
    names = [f.name for f in fields(cls) if f.compare and (f.hash is None or f.hash)]
    mine = ", ".join(f"self.{n}" for n in names) + ","
    theirs = ", ".join(f"other.{n}" for n in names) + ","
    # generated like dataclasses' own methods: one tuple of the fields, no per-field loop
    source = f"""
def __hash__(self):
    try:
        return self._hash
    except AttributeError:
        h = hash(({mine}))
        object.__setattr__(self, "_hash", h)
        return h

def __eq__(self, other):
    if self is other:
        return True
    if other.__class__ is not self.__class__:
        return NotImplemented
    if self.__hash__() != other.__hash__():
        return False
    return ({mine}) == ({theirs})
"""
    namespace: dict = {}
    exec(source, {}, namespace)  # noqa: S102 (field names of our own dataclasses)
    cls.__hash__ = namespace["__hash__"]
    cls.__eq__ = namespace["__eq__"]
    return cls
