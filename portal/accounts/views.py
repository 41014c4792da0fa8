from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from portal.accounts.forms import ApiKeyForm, SSHKeyForm
from portal.accounts.models import SSHKey
from portal.accounts.selectors import (
    can_manage_api_keys,
    can_manage_ssh_keys,
    organisations_for,
    ssh_keys_of_organisation,
    ssh_keys_of_user,
)
from portal.accounts.services import api_key_issue, api_key_revoke
from portal.accounts.team_pages import team_section
from portal.catalog.selectors import sku_list
from portal.core.forms import add_service_errors
from portal.core.shown_once import keep_for_next_page, pop_shown_once
from portal.core.units import usd
from portal.quotes.pricing import unit_price
from portal.sizing.catalog_live import price_list_for
from provisioning.fulfilment import ssh_keys


@never_cache  # may show a new key's plaintext, once: no cache may keep a copy
@login_required
def organisation_detail(request, slug):
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    can_manage = can_manage_api_keys(request.user, organisation)
    form = ApiKeyForm(request.POST or None)
    new_key = _shown_once(request)
    status = 200
    if request.method == "POST" and not can_manage:
        messages.error(request, "Only an admin of this organisation can create API keys; no key "
                                "was created.")
        form, status = ApiKeyForm(), 403
    elif request.method == "POST" and form.is_valid():
        issued = api_key_issue(organisation=organisation, name=form.cleaned_data["name"],
                               scopes=form.cleaned_data["scopes"], by=request.user)
        # Post/redirect/get: a reload shows the page again, it does not create a second key.
        keep_for_next_page(request, NEW_KEY_SESSION, issued.plaintext)
        return redirect(f"{reverse('accounts:organisation', args=[slug])}#new-api-key")
    return render(request, "accounts/organisation_detail.html", organisation_context(
        request, organisation, form=form, new_key=new_key, can_manage_keys=can_manage),
        status=status)


NEW_KEY_SESSION = "accounts.new_api_key"  # encrypted, and popped by the page that shows it


def _shown_once(request) -> str | None:
    """A key created by the POST just before this page, shown this once."""
    return pop_shown_once(request, NEW_KEY_SESSION)


def organisation_context(request, organisation, **extra) -> dict:
    """What the organisation page shows: members and invitations, customers, API keys, SSH keys
    (``extra`` overrides a part, e.g. a bound form with its errors)."""
    can_manage = can_manage_api_keys(request.user, organisation)
    return {
        "organisation": organisation,
        "team": team_section(request, organisation, invite_form=extra.pop("invite_form", None)),
        "children": organisations_for(request.user).filter(parent=organisation),  # only those it acts for
        "api_keys": organisation.api_keys.select_related("created_by"),
        "form": ApiKeyForm(),
        "new_key": None,
        "can_manage_keys": can_manage,
        "ssh_section": organisation_ssh_section(request, organisation),
        "price_rows": reseller_price_rows(organisation) if can_manage and organisation.kind == "reseller"
        else None,
    } | extra


@dataclass(frozen=True)
class PriceRow:
    name: str
    list_hourly: object  # Decimal
    your_hourly: object

    @property
    def difference(self) -> str:
        """"+$0.22/h", "−$0.11/h" or "none"."""
        delta = self.your_hourly - self.list_hourly
        return "none" if not delta else f"{'+' if delta > 0 else '−'}{usd(abs(delta))}/h"


def reseller_price_rows(organisation) -> list[PriceRow]:
    """Each server as the catalog lists it and as the reseller's price list prices it (what its
    customers are quoted), so a reseller admin sees its list and its markup."""
    price_list = price_list_for(organisation)
    return [PriceRow(sku.name, sku.price_hourly, unit_price("sku", sku, sku.price_hourly, price_list))
            for sku in sku_list(sort="")]


@login_required
@require_POST
def api_key_revoke_view(request, slug, prefix):
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    key = get_object_or_404(organisation.api_keys, prefix=prefix)
    if not can_manage_api_keys(request.user, organisation):
        messages.error(request, "Only an admin of this organisation can revoke keys.")
    elif request.POST.get("confirm") != "yes":
        messages.error(request, f"Key {key.prefix}… was not revoked: confirm it first.")
    else:
        api_key_revoke(api_key=key)
        messages.success(request, f"Key {key.prefix}… revoked. Requests with it now fail.")
    return redirect("accounts:organisation", slug=slug)


# --- SSH keys: a person's own, and an organisation's --------------------------------------------
@dataclass(frozen=True)
class SSHKeySection:
    """What the SSH keys partial (accounts/_ssh_keys.html) shows, for a person or an organisation."""

    title: str
    intro: str
    rows: list  # (key, its remove URL)
    form: SSHKeyForm
    add_url: str
    can_manage: bool
    added: SSHKey | None = None
    refused: str = ""  # why the person may not do what they asked


def _personal_section(request, form=None, added=None) -> SSHKeySection:
    return SSHKeySection(
        title="Keys on your account",
        intro="Your own keys log in to every server of the organisations you belong to.",
        rows=[(k, reverse("account:ssh-key-remove", args=[k.pk]))
              for k in ssh_keys_of_user(request.user)],
        form=form or SSHKeyForm(), add_url=reverse("account:ssh-keys"), can_manage=True,
        added=added)


def organisation_ssh_section(request, organisation, form=None, added=None,
                             refused: str = "") -> SSHKeySection:
    return SSHKeySection(
        title="SSH keys",
        intro=f"Keys of {organisation.name} log in to all its servers, next to each member's "
              f"own keys. Changes reach running servers within a minute or two.",
        rows=[(k, reverse("accounts:ssh-key-remove", args=[organisation.slug, k.pk]))
              for k in ssh_keys_of_organisation(organisation)],
        form=form or SSHKeyForm(),
        add_url=reverse("accounts:ssh-keys", args=[organisation.slug]),
        can_manage=can_manage_ssh_keys(request.user, organisation), added=added, refused=refused)


def _add_key(request, form, **owner) -> SSHKey | None:
    """The added key, or None with the service's reasons on the form's fields."""
    if not form.is_valid():
        return None
    try:
        return ssh_keys.ssh_key_add(public_key=form.cleaned_data["public_key"],
                                    name=form.cleaned_data["name"], by=request.user, **owner)
    except ValidationError as exc:
        add_service_errors(form, exc)
        return None


def _keys_response(request, section: SSHKeySection, *, page_title: str, back_url: str,
                   status: int = 200):
    if request.htmx:  # htmx swaps only 2xx answers: the partial carries the errors itself
        return render(request, "accounts/_ssh_keys.html", {"section": section})
    return render(request, "accounts/ssh_keys.html", {"section": section, "page_title": page_title,
                                                      "back_url": back_url}, status=status)


@login_required
def account_ssh_keys(request):
    form = SSHKeyForm(request.POST or None)
    added = _add_key(request, form, user=request.user) if request.method == "POST" else None
    if added is not None and not request.htmx:
        messages.success(request, f"Key “{added.name}” added ({added.fingerprint}).")
        return redirect("account:ssh-keys")
    section = _personal_section(request, form=SSHKeyForm() if added else form, added=added)
    status = 400 if form.is_bound and added is None else 200
    return _keys_response(request, section, page_title="Your SSH keys", back_url="", status=status)


@login_required
@require_POST
def account_ssh_key_remove(request, key_id: int):
    key = get_object_or_404(ssh_keys_of_user(request.user), pk=key_id)
    ssh_keys.ssh_key_remove(ssh_key=key, by=request.user)
    if request.htmx:
        return _keys_response(request, _personal_section(request), page_title="", back_url="")
    messages.success(request, f"Key “{key.name}” removed; servers drop it within a minute or two.")
    return redirect("account:ssh-keys")


@login_required
def organisation_ssh_keys(request, slug):
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    form = SSHKeyForm(request.POST or None)
    added, status, refused = None, 200, ""
    if request.method == "POST" and not can_manage_ssh_keys(request.user, organisation):
        form, status = SSHKeyForm(), 403
        refused = "Only an admin of this organisation can add its SSH keys; no key was added."
    elif request.method == "POST":
        added = _add_key(request, form, organisation=organisation)
        status = 200 if added else 400
    if added is not None and not request.htmx:
        messages.success(request, f"Key “{added.name}” added ({added.fingerprint}).")
        return redirect(reverse("accounts:organisation", args=[slug]) + "#ssh-keys")
    section = organisation_ssh_section(request, organisation, form=SSHKeyForm() if added else form,
                                       added=added, refused=refused)
    return _keys_response(request, section, page_title=f"SSH keys of {organisation.name}",
                          back_url=reverse("accounts:organisation", args=[slug]), status=status)


@login_required
@require_POST
def organisation_ssh_key_remove(request, slug, key_id: int):
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    key = get_object_or_404(ssh_keys_of_organisation(organisation), pk=key_id)
    if not can_manage_ssh_keys(request.user, organisation):
        refused = "Only an admin of this organisation can remove its SSH keys; the key stays."
        return _keys_response(request, organisation_ssh_section(request, organisation,
                                                                refused=refused),
                              page_title=f"SSH keys of {organisation.name}",
                              back_url=reverse("accounts:organisation", args=[slug]), status=403)
    ssh_keys.ssh_key_remove(ssh_key=key, by=request.user)
    if request.htmx:
        return _keys_response(request, organisation_ssh_section(request, organisation),
                              page_title="", back_url="")
    messages.success(request, f"Key “{key.name}” removed; servers drop it within a minute or two.")
    return redirect(reverse("accounts:organisation", args=[slug]) + "#ssh-keys")
