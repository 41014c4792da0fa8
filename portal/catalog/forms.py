from django import forms

from portal.catalog.selectors import SKU_SORTS
from portal.core.forms import VisibleTextMixin

GPU_COUNTS = [("", "Any"), ("1", "1"), ("2", "2"), ("4", "4"), ("8", "8")]
MIN_MEMORY_GB = [("", "Any"), ("24", "24 GB+"), ("48", "48 GB+"), ("80", "80 GB+"), ("141", "141 GB+")]
INTERCONNECTS = [("", "Any"), ("nvlink", "NVLink / NVSwitch"), ("pcie", "PCIe")]


class CatalogFilterForm(VisibleTextMixin, forms.Form):
    gpus = forms.TypedChoiceField(label="GPUs per server", choices=GPU_COUNTS, required=False,
                                  coerce=int, empty_value=None)
    memory = forms.TypedChoiceField(label="GPU memory", choices=MIN_MEMORY_GB, required=False,
                                    coerce=int, empty_value=None)
    interconnect = forms.ChoiceField(label="Interconnect", choices=INTERCONNECTS, required=False)
    sort = forms.ChoiceField(label="Sort by", required=False,
                             choices=[(key, label) for key, (label, _order) in SKU_SORTS.items()])
    q = forms.CharField(label="Search", required=False, max_length=100,
                        widget=forms.TextInput(attrs={"type": "search",
                                                      "placeholder": "GPU or SKU, e.g. H100"}))
