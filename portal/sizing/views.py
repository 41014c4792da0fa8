from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from portal.accounts.selectors import primary_organisation
from portal.sizing import charts, services
from portal.sizing.estimator import get_preset
from portal.sizing.forms import STEP_NAMES, STEPS, WizardForm
from portal.sizing.plan_tokens import plan_sign


@require_http_methods(["GET", "POST"])
def wizard(request):
    """The wizard, step by step; every step is a plain form post, htmx swaps just the panel."""
    if request.method == "POST":
        form, wanted = WizardForm(request.POST, request.FILES), request.POST.get("go", "model")
    elif set(request.GET) & set(WizardForm.base_fields):
        form, wanted = WizardForm.from_query(request.GET), request.GET.get("go", "results")
    else:
        form, wanted = WizardForm(), request.GET.get("go", "model")
    step = form.step_to_show(wanted) if wanted in STEP_NAMES else "model"
    context = wizard_context(form, step, organisation=_paying(request), viewer=request.user)
    return render(request, "sizing/_wizard.html" if request.htmx else "sizing/wizard.html", context)


@require_http_methods(["POST"])
def results(request):
    """Live results while the inputs change (htmx); without htmx, the full results step."""
    form = WizardForm(request.POST, request.FILES)
    context = wizard_context(form, "results", organisation=_paying(request), viewer=request.user)
    # The results alone replace #results: the form's field errors beside it go out of band.
    context["field_errors_oob"] = bool(request.htmx)
    return render(request, "sizing/_results.html" if request.htmx else "sizing/wizard.html", context)


def _paying(request):
    """Whose prices the plans show (a reseller's people: the reseller's price list)."""
    return primary_organisation(request.user) if request.user.is_authenticated else None


def wizard_context(form, step: str, *, organisation=None, viewer=None) -> dict:
    """Everything the wizard templates show for `step`; results only when the inputs are valid;
    plans priced as ``organisation`` pays, as ``viewer`` reads its prices."""
    index = STEP_NAMES.index(step)
    context = {
        "form": form, "step": step, "step_index": index,
        "steps": [{"name": n, "label": label, "done": i < index, "current": n == step}
                  for i, (n, label, _f) in enumerate(STEPS)],
        "presets": [(name, get_preset(name).params.total) for name in services.preset_names()],
        "step_fields": {n: fields for n, _l, fields in STEPS},
        "recommendation": None, "error": None,
    }
    if step != "results" or not form.is_bound or not form.is_valid():
        return context
    try:
        data = services.catalog(organisation=organisation, viewer=viewer)
        rec = services.recommendation_run(workload=form.workload(), goal=form.goal_spec(),
                                          options=form.search_options(), catalog_data=data)
    except ValueError as exc:
        context["error"] = str(exc)
        return context
    summary = form.summary()
    plans = [services.plan_payload(p, workload=summary, catalog_data=data) for p in rec.plans]
    for i, plan in enumerate(plans):
        plan["rank"] = i + 1
        plan["label"] = charts.plan_label(plan)
        plan["token"] = plan_sign(plan)
        plan["parts"] = charts.memory_parts(plan)
    points = [p.to_dict() for p in rec.points]
    context.update({
        "recommendation": rec, "plans": plans, "best": plans[0], "model": form.loaded,
        "memory_chart": charts.memory_chart(plans), "memory_legend": charts.memory_legend(plans),
        "cost_chart": charts.cost_time_chart(points, plans), "point_count": len(points),
        "pareto_count": sum(1 for p in points if p["pareto"]),
    })
    return context
