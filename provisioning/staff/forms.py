"""Staff forms: approve / reject in the queue, swap a node, enrol and edit a node, maintenance notes."""

import re
from dataclasses import replace

from django import forms
from django.conf import settings

from portal.catalog.models import ServerSKU
from portal.core.forms import VisibleTextMixin
from provisioning.drivers import OptionsSchema, driver_names, options_schema
from provisioning.inventory import enrolment
from provisioning.models import Node
from provisioning.power.bmc import BMC_KIND_CHOICES, DEFAULT_BMC_KIND, Bmc
from provisioning.states import WipeMethod, wipe_method_problem


class NodeChoices(forms.ModelMultipleChoiceField):
    def label_from_instance(self, node):
        group = f" · fabric {node.fabric_group}" if node.fabric_group else ""
        return f"{node.hostname}{group}"


class ApproveForm(VisibleTextMixin, forms.Form):
    """Any node may be posted; the service says why a node of another SKU or state is wrong."""

    nodes = NodeChoices(queryset=Node.objects.select_related("sku"), required=False,
                        widget=forms.CheckboxSelectMultiple, label="Nodes",
                        help_text="The suggested nodes are ticked. Leave all unticked to take the "
                                  "suggestion as it stands when you approve.")
    note = forms.CharField(label="Internal note (optional, staff only)", required=False,
                           max_length=500,
                           help_text="Kept in the order's history for staff; the customer does not "
                                     "see it.")

    def __init__(self, *args, order, **kwargs):
        super().__init__(*args, prefix=f"approve-{order.pk}", **kwargs)
        self.order = order


class RejectForm(VisibleTextMixin, forms.Form):
    reason = forms.CharField(
        label="Reason the customer reads", max_length=2000, widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"required": "Give the customer a reason for the rejection."},
        help_text="e.g. “No H100 nodes free until next week; a 4× A100 80GB fits this job.”")
    internal_note = forms.CharField(
        label="Internal note (optional, staff only)", required=False, max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Kept in the order's history for staff; the customer does not see it.")

    def __init__(self, *args, order, **kwargs):
        super().__init__(*args, prefix=f"reject-{order.pk}", **kwargs)
        self.order = order


class SwapForm(VisibleTextMixin, forms.Form):
    node = forms.ModelChoiceField(queryset=Node.objects.all(), widget=forms.HiddenInput)
    replacement = forms.ModelChoiceField(
        queryset=Node.objects.select_related("sku"), required=False, label="Replacement",
        empty_label="Pick automatically (same SKU and fabric)")
    note = forms.CharField(label="Note (optional)", required=False, max_length=500)


def _reads_login(schema: OptionsSchema) -> bool:
    return schema.host_key or schema.login_user or schema.bmc


class NodeFactsForm(VisibleTextMixin, forms.Form):
    """What an operator says about a node at enrolment and may change later (``NodeEditForm``)."""

    management_address = forms.CharField(max_length=255, label="Management address",
                                         help_text="host or host:port the driver connects to.")
    fabric_group = forms.CharField(max_length=60, required=False, label="Fabric group",
                                   help_text="Nodes of one cluster order share a fabric group "
                                             "(e.g. the InfiniBand leaf). Empty for stand-alone nodes.")
    fabric_address = forms.GenericIPAddressField(
        required=False, label="Fabric address",
        help_text="The node's address on the cluster fabric (InfiniBand / RoCE): a cluster's "
                  "MASTER_ADDR and NCCL interface. Needed for cluster orders.")
    nvme_devices = forms.CharField(required=False, label="Data devices",
                                   help_text="The NVMe devices that hold customer data, comma or "
                                             "space separated, e.g. /dev/nvme1n1 /dev/nvme2n1.")
    wipe_method = forms.ChoiceField(
        label="How customer data is erased between tenants",
        choices=[("", "Choose…"), *WipeMethod.choices],
        error_messages={"required": "Choose how this node's data is erased between tenants: a "
                                    "method for its data devices, or 'No local data devices'."},
        help_text="Every termination erases the data, then checks nothing of the tenant is left.")
    host_key = forms.CharField(required=False, label="SSH host key",
                               widget=forms.Textarea(attrs={"rows": 2}),
                               help_text="Pinned: the line `ssh-keyscan -t ed25519 HOST` prints, or the "
                                         "SHA256: fingerprint. Compare it with the node's console "
                                         "before you paste it.")
    login_user = forms.CharField(required=False, max_length=32, label="Customer login")
    bmc_kind = forms.ChoiceField(required=False, label="BMC protocol", initial=DEFAULT_BMC_KIND,
                                 choices=BMC_KIND_CHOICES)
    bmc_address = forms.CharField(required=False, max_length=255, label="BMC address",
                                  help_text="IPMI host[:port], or the Redfish BMC's https://host, "
                                            "for power control; the password comes from "
                                            "IPMI_PASSWORD_FILE or REDFISH_PASSWORD_FILE.")
    bmc_user = forms.CharField(required=False, max_length=64, label="BMC user")
    bmc_system_id = forms.CharField(required=False, max_length=120, label="Redfish system id",
                                    help_text="Its id under /redfish/v1/Systems/ (e.g. 1); empty: "
                                              "the BMC's only system.")
    test_host = forms.BooleanField(
        required=False, label="Declared test host (no GPUs)",
        help_text="A CPU machine for trying the pipeline: acceptance trains on the CPU, and power "
                  "and package installs are never run on it.")
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["login_user"].help_text = (
            f"The account customers log in with; empty: {settings.PROVISIONING_LOGIN_USER}. Never "
            f"the account Trainyard manages the node with.")

    def driver_name(self) -> str:
        return self.cleaned_data.get("driver", "")

    def schema(self) -> OptionsSchema:
        return options_schema(self.driver_name())

    def login_drivers(self) -> str:
        """The drivers that read a host key, a customer login or a BMC: the legend of those fields."""
        return ", ".join(n for n in driver_names() if _reads_login(options_schema(n)))

    def clean_management_address(self):
        address = self.cleaned_data["management_address"].strip()
        if problem := enrolment.address_problem(address):
            raise forms.ValidationError(problem)
        return address

    def clean_nvme_devices(self):
        raw = self.cleaned_data["nvme_devices"].replace(",", " ").split()
        bad = [d for d in raw if not d.startswith("/dev/")]
        if bad:
            raise forms.ValidationError(f"Device paths start with /dev/: {', '.join(bad)}.")
        return raw

    def clean_login_user(self):
        user = self.cleaned_data["login_user"].strip()
        if user and not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", user):
            raise forms.ValidationError("A Linux account name: lowercase letters, digits, '_' and "
                                        "'-', starting with a letter or '_'.")
        return user

    def clean(self):
        data = super().clean()
        if "nvme_devices" in data and data.get("wipe_method"):
            if problem := wipe_method_problem(data["wipe_method"], data["nvme_devices"]):
                self.add_error("wipe_method", problem)
        schema = self.schema()
        if schema.host_key and (problem := enrolment.host_key_problem(data.get("host_key", ""))):
            self.add_error("host_key", problem)
        if schema.bmc and (problem := enrolment.bmc_problem(self._bmc(keep=None))):
            self.add_error("bmc_address", problem)
        return data

    def driver_options(self, base: dict | None = None) -> dict:
        """The public facts the driver needs (never a secret: those come from settings),
        over ``base`` (a node's options, when editing). What the driver does not read stays."""
        data, schema = self.cleaned_data, self.schema()
        stored = schema.parse(base or {})
        bmc = self._bmc(keep=stored.bmc)
        options = replace(
            stored, test_host=True if data.get("test_host") else None,
            host_key=data["host_key"].strip() if schema.host_key else stored.host_key,
            login_user=(data.get("login_user") or None) if schema.login_user else stored.login_user,
            bmc=(bmc if bmc.address else None) if schema.bmc else stored.bmc)
        return schema.dump(options, base or {})

    def _bmc(self, *, keep: Bmc | None) -> Bmc:
        data = self.cleaned_data
        return Bmc.entered(data.get("bmc_kind") or DEFAULT_BMC_KIND, address=data.get("bmc_address", ""),
                           user=data.get("bmc_user", ""), system_id=data.get("bmc_system_id", ""),
                           keep=keep)


class NodeEnrolForm(NodeFactsForm):
    hostname = forms.CharField(max_length=120, help_text="Unique, e.g. gpu-h100-a07.")
    sku = forms.ModelChoiceField(queryset=ServerSKU.objects.filter(is_active=True).select_related("gpu"),
                                 label="Server SKU", empty_label=None)
    driver = forms.ChoiceField(choices=(),
                               help_text="How we reach the node: simulated (demo, tests) or ssh.")
    ready = forms.BooleanField(required=False, initial=True, label="Accept into stock once checked",
                               help_text="Runs a reachability and health check through the driver and "
                                         "records the node's clean baseline; the node becomes ready "
                                         "only if both succeed.")
    field_order = ["hostname", "sku", "management_address", "driver"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["driver"].choices = [(name, name) for name in driver_names()]
        self.fields["driver"].initial = settings.DEFAULT_NODE_DRIVER
        self.fields["sku"].label_from_instance = lambda s: f"{s.name}"

    def clean_hostname(self):
        hostname = self.cleaned_data["hostname"].strip()
        if problem := enrolment.hostname_problem(hostname):
            raise forms.ValidationError(problem)
        if Node.objects.filter(hostname__iexact=hostname).exists():
            raise forms.ValidationError(f"A node named {hostname} is already enrolled; hostnames "
                                        f"are unique.")
        return hostname


class NodeEditForm(NodeFactsForm):
    """The same facts for an enrolled node, filled in from it."""

    def __init__(self, *args, node: Node, **kwargs):
        stored = options_schema(node.driver).parse(node.driver_options or {})
        bmc = stored.bmc or Bmc(kind=DEFAULT_BMC_KIND)
        initial = {"management_address": node.management_address,
                   "fabric_group": node.fabric_group, "fabric_address": node.fabric_address,
                   "nvme_devices": " ".join(node.nvme_devices or ()),
                   "wipe_method": node.wipe_method, "host_key": stored.host_key_text,
                   "login_user": stored.login_user or "", "bmc_kind": bmc.kind,
                   "bmc_address": bmc.address, "bmc_user": bmc.user,
                   "bmc_system_id": bmc.system_id or "", "test_host": stored.test_host is True,
                   "notes": node.notes}
        super().__init__(*args, initial=initial, **kwargs)
        self.node = node

    def driver_name(self) -> str:
        return self.node.driver

    def login_drivers(self) -> str:
        return self.node.driver if _reads_login(self.schema()) else ""

    def clean(self):
        """A stored option of the wrong shape that this form does not write (an engine's machine
        id, an old fabric address) would be dropped by the save without a word: refused instead."""
        data = super().clean()
        schema = self.schema()
        written = {"test_host", *(("host_key",) if schema.host_key else ()),
                   *(("login_user",) if schema.login_user else ())}
        kept = {k: v for k, v in (self.node.driver_options or {}).items() if k not in written}
        if problems := schema.shape_problems(kept):
            self.add_error(None, " ".join(problems) + " Saving would drop it: correct it in the admin's"
                                                      " driver options first.")
        return data

    def changes(self) -> dict:
        data = self.cleaned_data
        return {"management_address": data["management_address"],
                "fabric_group": data["fabric_group"].strip(),
                "fabric_address": data["fabric_address"] or "",
                "nvme_devices": data["nvme_devices"], "wipe_method": data["wipe_method"],
                "driver_options": self.driver_options(base=self.node.driver_options),
                "notes": data["notes"]}


class NodeNoteForm(VisibleTextMixin, forms.Form):
    note = forms.CharField(label="Note (optional)", required=False, max_length=500)
