from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import replace_url

from portal.accounts.selectors import organisations_for, primary_organisation
from portal.catalog.selectors import resale_markups
from portal.orders.selectors import quote_order
from portal.quotes.forms import ConfiguratorForm, default_initial, initial_from_plan
from portal.quotes.plans import plan_check
from portal.quotes.pricing import configured_price, shown_price
from portal.quotes.selectors import quote_for_user, stock_note, unit_prices
from portal.quotes.services import ConfigurationError, configuration_evaluate, quote_create
from portal.sizing.plan_tokens import plan_sign, plan_unsign
from portal.sizing.services import wizard_url

# What the page URL carries (never the custom storage keys: they go only in the POST).
FORM_FIELDS = ("sku", "node_count", "nvme", "network", "storage_provider", "storage_tb",
               "storage_retention_days", "storage_endpoint_url", "storage_bucket", "strategy",
               "tracker", "plan", "organisation")


@require_http_methods(["GET", "POST"])
def configure(request):
    if request.method == "POST":
        if not request.user.is_authenticated:
            return redirect_to_login(_configure_url(request.POST))
        form = _form(request, request.POST)
        quote = _create_quote(request, form)
        if quote is not None:
            return redirect("quotes:quote", reference=quote.reference)
        return render(request, "quotes/configure.html", _context(request, form), status=400)
    form = _form(request, _data_from_query(request.GET))
    return render(request, "quotes/configure.html", _context(request, form))


@require_GET
def price(request):
    """The live summary (price, rule messages) for htmx; the page URL follows the inputs."""
    form = _form(request, _data_from_query(request.GET))
    response = render(request, "quotes/_summary.html", _context(request, form))
    return replace_url(response, _configure_url(form.data))


def _form(request, data) -> ConfiguratorForm:
    """The configurator for ``data``; "Quote for" starts at the member's own organisation (the
    one the page then prices), and the choices show that organisation's prices."""
    organisations = organisations_for(request.user)
    chosen = organisations.filter(slug=data.get("organisation")).first() if data.get(
        "organisation") else None
    if chosen is None and request.user.is_authenticated:
        chosen = primary_organisation(request.user) or organisations.first()
        if chosen is not None and "organisation" not in data and organisations.count() > 1:
            data = data.copy()
            data["organisation"] = chosen.slug
    markups = resale_markups(request.user, chosen)
    form = ConfiguratorForm(data, organisations=organisations,
                            price_list=unit_prices(chosen, markups.basis))
    form.priced_for = (chosen, markups)  # _context prices the same organisation: read once
    return form


@login_required
def quote_detail(request, reference: str):
    quote = quote_for_user(user=request.user, reference=reference)
    if quote is None:
        raise Http404("No such quote.")
    ordered_as = quote_order(quote)
    return render(request, "quotes/quote.html", {
        "quote": quote, "plan": quote.plan, "reconfigure_url": _configure_url(_quote_params(quote)),
        **_prices(quote.organisation, resale_markups(request.user, quote.organisation),
                  lambda markup: shown_price(quote, markup)),
        "ordered_as": ordered_as,
        "stock_note": stock_note(quote.sku, requested=quote.node_count)
        if quote.is_valid and ordered_as is None else ""})


def _create_quote(request, form):
    if not form.is_valid():
        return None
    organisation = form.cleaned_data.get("organisation") or primary_organisation(request.user)
    if organisation is None:
        form.add_error(None, "Your login does not belong to an organisation yet, so it cannot hold "
                             "quotes. Ask your organisation's admin to invite you.")
        return None
    try:
        return quote_create(organisation=organisation, by=request.user,
                            configuration=form.configuration(), plan=form.plan_data)
    except ConfigurationError as exc:
        for problem in exc.problems:
            form.add_error(problem.field if problem.field in form.fields else None, problem.text)
        return None
    except ValueError as exc:  # a plan the pages cannot use (plan_check)
        form.add_error(None, str(exc))
        return None


def _prices(organisation, markups, priced) -> dict:
    """The price as the viewer reads it (``markups.basis``: a reseller's customer's people at the
    reseller's selling prices) and, for the reseller quoting for its customer, what that
    customer will pay (``customer_price``, at ``markups.shown``; None for anyone else)."""
    return {"price": priced(markups.basis),
            "customer_price": priced(markups.shown) if markups.shown is not None else None,
            "customer": organisation}


def _context(request, form) -> dict:
    evaluation = None
    priced = {"price": None, "customer_price": None, "customer": None}
    if form.is_valid():
        paying = _paying(request, form)
        config = form.configuration()
        evaluation = configuration_evaluate(config, plan=form.plan_data, organisation=paying)
        chosen, markups = form.priced_for
        if paying != chosen:
            markups = resale_markups(request.user, paying)
        priced = _prices(paying, markups, lambda markup: configured_price(config, evaluation.price, markup))
    field_messages = {name: [] for name in FORM_FIELDS if name in form.fields}
    if evaluation is not None:
        for message in evaluation.messages:
            field_messages.setdefault(message.field, []).append(message)
    return {
        "form": form,
        "evaluation": evaluation,
        **priced,
        "field_messages": field_messages,
        "plan": form.plan_data,
        "sizing_url": wizard_url(form.plan_data.get("workload")),
        "login_url": f"{reverse('login')}?{urlencode({'next': _configure_url(form.data)})}",
    }


def _paying(request, form):
    """Whose prices the page shows: the organisation the quote is for (None: list prices)."""
    if not request.user.is_authenticated:
        return None
    return form.cleaned_data.get("organisation") or primary_organisation(request.user)


def _data_from_query(query) -> dict:
    """Defaults, overlaid by a signed plan, overlaid by whatever the query string says."""
    data = default_initial()
    token = query.get("plan")
    if token:
        try:
            data |= initial_from_plan(plan_check(plan_unsign(token)))
        except ValueError:
            pass  # the form's clean_plan() reports it on the page
    data |= {key: query.get(key) for key in FORM_FIELDS if key in query}
    return {k: v for k, v in data.items() if v is not None}


def _configure_url(data) -> str:
    params = {key: data.get(key) for key in FORM_FIELDS if data.get(key) not in (None, "")}
    return f"{reverse('quotes:configure')}?{urlencode(params)}"


def _quote_params(quote) -> dict:
    return {
        "sku": quote.sku.slug, "node_count": quote.node_count, "nvme": quote.nvme.slug,
        "network": quote.network.slug, "storage_tb": quote.storage_tb,
        "storage_provider": quote.storage_provider.slug if quote.storage_provider else "",
        "storage_retention_days": quote.storage_retention_days,
        "storage_endpoint_url": quote.storage_endpoint_url, "storage_bucket": quote.storage_bucket,
        "strategy": quote.strategy.slug if quote.strategy else "",
        "tracker": quote.tracker.slug if quote.tracker else "",
        "plan": plan_sign(quote.plan) if quote.plan else "",
    }
