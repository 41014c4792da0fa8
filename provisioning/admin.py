from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied

from portal.core.forms import VisibleTextMixin
from portal.core.states import DomainError
from provisioning.drivers import driver_names
from provisioning.inventory import services as inventory_services
from provisioning.inventory.enrolment import enrolment_problems
from provisioning.models import (
    HealthCheck,
    HealthCheckDaily,
    Node,
    NodeEvent,
    ProvisioningRun,
    RunEvent,
    StepRun,
)
from provisioning.monitoring.health import node_health_check
from provisioning.states import wipe_method_problem


class NodeEventInline(admin.TabularInline):
    model = NodeEvent
    extra = 0
    can_delete = False
    readonly_fields = ("at", "actor", "transition", "from_state", "to_state", "order", "note")

    def has_add_permission(self, request, obj=None):
        return False


class NodeAdminForm(VisibleTextMixin, forms.ModelForm):
    """The admin adds and edits nodes under the checks the enrolment page applies
    (``provisioning.inventory.enrolment``): a bad hostname, address, host key or BMC is a field error."""

    class Meta:
        model = Node
        fields = ("hostname", "sku", "management_address", "driver", "driver_options",
                  "fabric_group", "fabric_address", "nvme_devices", "wipe_method", "notes")

    def clean(self):
        data = super().clean()
        hostname = (data.get("hostname") or self.instance.hostname or "").strip()
        others = Node.objects.filter(hostname__iexact=hostname).exclude(pk=self.instance.pk)
        if hostname and others.exists():
            self.add_error("hostname", f"A node named {hostname} is already enrolled (hostnames "
                                       f"are case-insensitive).")
        driver = data.get("driver") or self.instance.driver or ""
        if driver and driver not in driver_names():
            self.add_error("driver", f"Unknown driver {driver!r}; choose one of "
                                     f"{', '.join(driver_names())}.")
        problems = enrolment_problems(hostname=hostname,
                                      management_address=data.get("management_address") or "",
                                      driver=driver, driver_options=data.get("driver_options"))
        if problem := wipe_method_problem(data.get("wipe_method") or "",
                                          data.get("nvme_devices") or []):
            problems["wipe_method"] = problem
        for field, problem in problems.items():
            self.add_error(field if field in self.fields else "driver_options", problem)
        return data


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    form = NodeAdminForm
    list_display = ("hostname", "sku", "state", "fabric_group", "driver", "order",
                    "management_address")
    list_filter = ("state", "sku", "fabric_group", "driver")
    search_fields = ("hostname", "management_address", "notes")
    readonly_fields = ("state", "state_changed_at", "order", "reserved_until", "created_at")
    inlines = [NodeEventInline]
    actions = ["accept", "maintenance", "return_to_service", "health_check"]

    def get_readonly_fields(self, request, obj=None):
        """An enrolled node keeps its name, SKU and driver (enrol it anew instead)."""
        return (*self.readonly_fields, *(("hostname", "sku", "driver") if obj is not None else ()))

    def save_model(self, request, obj, form, change):
        if change:  # through the service: checked as the operators' page does, and audited
            try:
                inventory_services.node_update(node=Node.objects.get(pk=obj.pk), by=request.user, **{
                    name: form.cleaned_data[name] for name in inventory_services.EDITABLE_NODE_FIELDS
                    if name in form.cleaned_data})
            except DomainError as exc:
                self.message_user(request, str(exc), messages.ERROR)
            return
        try:
            node = inventory_services.node_enrol(
                by=request.user, sku=obj.sku, hostname=obj.hostname,
                management_address=obj.management_address, driver=obj.driver,
                fabric_group=obj.fabric_group, fabric_address=obj.fabric_address or "",
                nvme_devices=obj.nvme_devices, driver_options=obj.driver_options,
                wipe_method=obj.wipe_method, notes=obj.notes)
        except DomainError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        obj.pk = node.pk

    def _each(self, request, queryset, fn, done: str):
        ok = 0
        for node in queryset:
            try:
                fn(node=node, by=request.user)
                ok += 1
            except (DomainError, PermissionDenied) as exc:
                self.message_user(request, f"{node.hostname}: {exc}", messages.ERROR)
        if ok:
            self.message_user(request, f"{ok} node(s) {done}.")

    @admin.action(description="Check and accept into stock (ready once the check passes)")
    def accept(self, request, queryset):
        self._each(request, queryset, inventory_services.node_accept,
                   "being checked; ready if the check passes")

    @admin.action(description="Put into maintenance")
    def maintenance(self, request, queryset):
        self._each(request, queryset, inventory_services.node_set_maintenance, "put into maintenance")

    @admin.action(description="Check and return to service (ready once the check passes)")
    def return_to_service(self, request, queryset):
        self._each(request, queryset, inventory_services.node_return_to_service,
                   "being checked; back in stock if the check passes")

    @admin.action(description="Run a health check now")
    def health_check(self, request, queryset):
        for node in queryset:
            check = node_health_check(node=node)
            self.message_user(request, f"{node.hostname}: {'ok' if check.ok else '; '.join(check.problems)}")


class StepRunInline(admin.TabularInline):
    model = StepRun
    extra = 0
    can_delete = False
    fields = ("node", "step", "status", "attempts", "started_at", "finished_at", "error")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


class RunEventInline(admin.TabularInline):
    model = RunEvent
    extra = 0
    can_delete = False
    readonly_fields = ("at", "actor", "transition", "from_state", "to_state", "note")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(ProvisioningRun)
class ProvisioningRunAdmin(admin.ModelAdmin):
    list_display = ("pk", "order", "kind", "status", "created_at", "finished_at")
    list_filter = ("kind", "status")
    search_fields = ("order__reference",)
    readonly_fields = ("order", "kind", "status", "created_by", "created_at", "started_at",
                       "finished_at", "error")
    inlines = [RunEventInline, StepRunInline]


@admin.register(HealthCheck)
class HealthCheckAdmin(admin.ModelAdmin):
    list_display = ("node", "at", "ok", "gpu_count", "expected_gpu_count", "max_temperature_c",
                    "ecc_errors")
    list_filter = ("ok",)
    search_fields = ("node__hostname",)


@admin.register(HealthCheckDaily)
class HealthCheckDailyAdmin(admin.ModelAdmin):
    """Written by the retention task from the day's checks: read only."""

    list_display = ("node", "day", "checks", "ok_count", "failed_count", "unreachable_count",
                    "worst", "max_temperature_c", "max_ecc_errors", "min_gpu_count")
    list_filter = ("worst",)
    search_fields = ("node__hostname",)
    date_hierarchy = "day"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
