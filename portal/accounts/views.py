from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from portal.accounts.forms import ApiKeyForm
from portal.accounts.selectors import can_manage_api_keys, organisations_for
from portal.accounts.services import api_key_issue, api_key_revoke


@never_cache  # may show a new key's plaintext, once: no cache may keep a copy
@login_required
def organisation_detail(request, slug):
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    can_manage = can_manage_api_keys(request.user, organisation)
    form = ApiKeyForm(request.POST or None)
    new_key = None
    status = 200
    if request.method == "POST" and not can_manage:
        messages.error(request, "Only an admin of this organisation can create API keys; no key "
                                "was created.")
        form, status = ApiKeyForm(), 403
    elif request.method == "POST" and form.is_valid():
        new_key = api_key_issue(organisation=organisation, name=form.cleaned_data["name"],
                                scopes=form.cleaned_data["scopes"], by=request.user).plaintext
        form = ApiKeyForm()
    return render(request, "accounts/organisation_detail.html", {
        "organisation": organisation,
        "memberships": organisation.memberships.select_related("user"),
        "children": organisations_for(request.user).filter(parent=organisation),  # only those it acts for
        "api_keys": organisation.api_keys.all(),
        "form": form,
        "new_key": new_key,
        "can_manage_keys": can_manage,
    }, status=status)


@login_required
@require_POST
def api_key_revoke_view(request, slug, prefix):
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    key = get_object_or_404(organisation.api_keys, prefix=prefix)
    if not can_manage_api_keys(request.user, organisation):
        messages.error(request, "Only an admin of this organisation can revoke keys.")
    else:
        api_key_revoke(api_key=key)
        messages.success(request, f"Key {key.prefix}… revoked. Requests with it now fail.")
    return redirect("accounts:organisation", slug=slug)
