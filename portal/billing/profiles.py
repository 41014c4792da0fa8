"""An organisation's billing profile (who its invoices are made out to), edited by its admins.
Every change is audited (``BillingProfileEvent``: who, when, each detail from → to). An issued
invoice keeps the details copied onto it at issue; only later invoices read the new ones."""

from __future__ import annotations

from django.db import transaction

from portal.accounts.models import Organisation
from portal.accounts.team import can_manage_members
from portal.billing.models import BillingProfile, BillingProfileEvent
from portal.core.states import DomainError, actor_or_none

FIELDS = ("legal_name", "address", "country", "vat_id", "email")


def can_edit_billing_profile(user, organisation: Organisation) -> bool:
    """Whoever administers the organisation (its admins, its reseller's admins, staff)."""
    return can_manage_members(user, organisation)


def billing_profile_save(*, organisation: Organisation, by, **details) -> BillingProfile:
    """Creates or changes the profile with ``details`` (the keys of ``FIELDS``), validated as the
    model validates (a VAT id by python-stdnum, of the profile's country): ValidationError, and
    nothing saved, when a detail is wrong."""
    if not can_edit_billing_profile(by, organisation):
        raise DomainError(f"Only an admin of {organisation.name} can change its billing details.")
    unknown = set(details) - set(FIELDS)
    if unknown:
        raise ValueError(f"not billing details: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        profile = (BillingProfile.objects.select_for_update().filter(organisation=organisation).first()
                   or BillingProfile(organisation=organisation))
        before = {name: getattr(profile, name) for name in FIELDS}
        created = profile.pk is None
        for name, value in details.items():
            setattr(profile, name, value)
        profile.full_clean()
        profile.save()
        changes = [f"{BillingProfile._meta.get_field(name).verbose_name}: {before[name]!r} → "
                   f"{getattr(profile, name)!r}" for name in FIELDS if before[name] != getattr(profile, name)]
        if changes:
            BillingProfileEvent.objects.create(organisation=organisation, actor=actor_or_none(by),
                                               transition="create" if created else "edit",
                                               note="; ".join(changes))
    return profile
