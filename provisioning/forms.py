"""Staff forms: approve / reject in the queue, swap a node, enrol a node, maintenance notes."""

from django import forms

from portal.catalog.models import ServerSKU
from portal.core.forms import VisibleTextMixin
from provisioning import enrolment
from provisioning.drivers import driver_names
from provisioning.models import Node


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
    note = forms.CharField(label="Note (optional)", required=False, max_length=500)

    def __init__(self, *args, order, eligible=(), **kwargs):
        super().__init__(*args, prefix=f"approve-{order.pk}", **kwargs)
        self.order = order
        self.eligible = list(eligible)  # the ready nodes of the SKU, shown as checkboxes


class RejectForm(VisibleTextMixin, forms.Form):
    reason = forms.CharField(
        label="Reason the customer reads", max_length=2000, widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"required": "Give the customer a reason for the rejection."},
        help_text="e.g. “No H100 nodes free until next week; a 4× A100 80GB fits this job.”")

    def __init__(self, *args, order, **kwargs):
        super().__init__(*args, prefix=f"reject-{order.pk}", **kwargs)
        self.order = order


class SwapForm(VisibleTextMixin, forms.Form):
    node = forms.ModelChoiceField(queryset=Node.objects.all(), widget=forms.HiddenInput)
    replacement = forms.ModelChoiceField(
        queryset=Node.objects.select_related("sku"), required=False, label="Replacement",
        empty_label="Pick automatically (same SKU and fabric)")
    note = forms.CharField(label="Note (optional)", required=False, max_length=500)


class NodeEnrolForm(VisibleTextMixin, forms.Form):
    hostname = forms.CharField(max_length=120, help_text="Unique, e.g. gpu-h100-a07.")
    sku = forms.ModelChoiceField(queryset=ServerSKU.objects.filter(is_active=True).select_related("gpu"),
                                 label="Server SKU", empty_label=None)
    management_address = forms.CharField(max_length=255, label="Management address",
                                         help_text="host or host:port the driver connects to.")
    driver = forms.ChoiceField(choices=(), initial="simulated",
                               help_text="How we reach the node: simulated (demo, tests) or ssh.")
    fabric_group = forms.CharField(max_length=60, required=False, label="Fabric group",
                                   help_text="Nodes of one cluster order share a fabric group "
                                             "(e.g. the InfiniBand leaf). Empty for stand-alone nodes.")
    fabric_address = forms.GenericIPAddressField(
        required=False, label="Fabric address",
        help_text="The node's address on the cluster fabric (InfiniBand / RoCE): a cluster's "
                  "MASTER_ADDR and NCCL interface. Needed for cluster orders.")
    nvme_devices = forms.CharField(required=False, label="NVMe data devices",
                                   help_text="Comma or space separated, e.g. /dev/nvme1n1 /dev/nvme2n1.")
    host_key = forms.CharField(required=False, label="SSH host key (ssh nodes)",
                               widget=forms.Textarea(attrs={"rows": 2}),
                               help_text="Pinned: the line `ssh-keyscan -t ed25519 HOST` prints, or the "
                                         "SHA256: fingerprint. Compare it with the node's console "
                                         "before you paste it.")
    bmc_address = forms.CharField(required=False, max_length=255, label="BMC address (ssh nodes)",
                                  help_text="IPMI host[:port] for power control; the password "
                                            "comes from IPMI_PASSWORD_FILE.")
    bmc_user = forms.CharField(required=False, max_length=64, label="BMC user")
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    ready = forms.BooleanField(required=False, initial=True, label="Accept into stock once checked",
                               help_text="Runs a reachability and health check through the driver; the "
                                         "node becomes ready only if it passes.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["driver"].choices = [(name, name) for name in driver_names()]
        self.fields["sku"].label_from_instance = lambda s: f"{s.name}"

    def clean_hostname(self):
        hostname = self.cleaned_data["hostname"].strip()
        if problem := enrolment.hostname_problem(hostname):
            raise forms.ValidationError(problem)
        if Node.objects.filter(hostname__iexact=hostname).exists():
            raise forms.ValidationError(f"A node named {hostname} is already enrolled; hostnames "
                                        f"are unique.")
        return hostname

    def clean_management_address(self):
        address = self.cleaned_data["management_address"].strip()
        if problem := enrolment.address_problem(address):
            raise forms.ValidationError(problem)
        return address

    def clean(self):
        data = super().clean()
        if data.get("driver") == "ssh":
            if problem := enrolment.host_key_problem(data.get("host_key", "")):
                self.add_error("host_key", problem)
            if problem := enrolment.bmc_problem(data.get("bmc_address", "").strip(),
                                                data.get("bmc_user", "").strip()):
                self.add_error("bmc_address", problem)
        return data

    def driver_options(self) -> dict:
        """The public facts the driver needs (never a secret: those come from settings)."""
        data, options = self.cleaned_data, {}
        if data.get("driver") == "ssh":
            options["host_key"] = data["host_key"].strip()
            if data.get("bmc_address"):
                options["ipmi"] = {"address": data["bmc_address"].strip(),
                                   "user": data["bmc_user"].strip()}
        return options

    def clean_nvme_devices(self):
        raw = self.cleaned_data["nvme_devices"].replace(",", " ").split()
        bad = [d for d in raw if not d.startswith("/dev/")]
        if bad:
            raise forms.ValidationError(f"Device paths start with /dev/: {', '.join(bad)}.")
        return raw


class NodeNoteForm(VisibleTextMixin, forms.Form):
    note = forms.CharField(label="Note (optional)", required=False, max_length=500)
