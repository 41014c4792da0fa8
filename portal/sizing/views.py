from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from portal.sizing import services
from portal.sizing.forms import STEP_NAMES, WizardForm


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
    context = services.wizard_context(form, step)
    return render(request, "sizing/_wizard.html" if request.htmx else "sizing/wizard.html", context)


@require_http_methods(["POST"])
def results(request):
    """Live results while the inputs change (htmx); without htmx, the full results step."""
    form = WizardForm(request.POST, request.FILES)
    context = services.wizard_context(form, "results")
    return render(request, "sizing/_results.html" if request.htmx else "sizing/wizard.html", context)
