"""The staff home: what hosting staff see at "/" (URL name ``home``). ``portal.core.views.home``
hands them here; customers get their own home there. The figures come from
``provisioning.staff.dashboard``."""

from django.shortcuts import render

from provisioning.staff.dashboard import staff_dashboard


def staff_home(request, *, rows: int):
    """The approval queue, what failed and the stock, ``rows`` of each list (hosting staff only:
    the caller checks ``is_hosting_staff``)."""
    return render(request, "staff/home.html", staff_dashboard(request.user, rows=rows))
