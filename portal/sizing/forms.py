"""The sizing wizard: one form whose fields are shown step by step (model → training → data → goal)."""

import math
import re

from django import forms

from portal.catalog.pricing import usd_json
from portal.core.forms import VisibleTextMixin
from portal.sizing import services
from portal.sizing.estimator.config import DORA_TP_REFUSAL, FINETUNE, LIMITS, OPTIMIZERS, PRECISIONS
from portal.sizing.recommend import Goal, SearchOptions, Workload
from portal.sizing.recommend.types import CHECKPOINTING, MAX_TOKENS, NODE_COUNTS, PP_SIZES, TP_SIZES

STEPS = (
    ("model", "Model", ("model_source", "preset", "config_file", "hf_model_id", "model_config")),
    ("training", "Training setup", ("finetune", "precision", "seq_len", "global_batch_seqs", "optimizer",
                                    "lora_rank", "use_dora", "strategy", "tp", "pp", "checkpointing",
                                    "max_nodes")),
    ("data", "Data", ("dataset_tokens", "dataset_gb", "dataset_files", "epochs", "train_tokens")),
    ("goal", "Goal", ("goal", "deadline_hours", "budget_usd")),
    ("results", "Results", ()),
)
STEP_NAMES = tuple(s[0] for s in STEPS)
BYTES_PER_TOKEN_GUESS = 4  # raw text is about 4 bytes per token for English and code
ANY = ""

STRATEGY_CHOICES = [(ANY, "Any (let the recommender choose)"), ("ddp", "DDP"), ("zero1", "ZeRO-1"),
                    ("zero2", "ZeRO-2"), ("fsdp", "FSDP full shard"), ("zero3", "ZeRO-3"),
                    ("zero3-offload", "ZeRO-3 + CPU offload")]
# How the wizard labels the estimator's options (estimator/config.py declares the values; a value
# without a label here fails tests/sizing/test_wizard_choices.py). In the order shown.
FINETUNE_LABELS = {"full": "Full fine-tuning / pre-training", "lora": "LoRA adapters",
                   "qlora": "QLoRA (4-bit base)"}
PRECISION_LABELS = {"bf16-mixed": "BF16 mixed precision", "fp16-mixed": "FP16 mixed precision",
                    "bf16": "Pure BF16", "fp8": "FP8 (Hopper and newer)", "fp32": "FP32"}
OPTIMIZER_LABELS = {"adamw": "AdamW", "adamw-8bit": "AdamW 8-bit", "adafactor": "Adafactor", "lion": "Lion",
                    "sgd-momentum": "SGD with momentum"}


def option_choices(values: tuple[str, ...], labels: dict[str, str]) -> list[tuple[str, str]]:
    """The choices of one of the estimator's option lists: its values, labelled and in the order
    of ``labels`` (a value it lacks is shown as itself, after the others)."""
    order = {value: i for i, value in enumerate(labels)}
    return [(v, labels.get(v, v)) for v in sorted(values, key=lambda v: order.get(v, len(order)))]


def parse_count(text: str) -> int:
    """'500M', '2B', '1.5e9', '2,000,000' → an integer; ValueError otherwise."""
    cleaned = str(text).strip().replace(",", "").replace("_", "").replace(" ", "").upper()
    match = re.fullmatch(r"(\d+(?:\.\d+)?(?:E\d+)?)([KMBT]?)", cleaned)
    if not match:
        raise ValueError(text)
    value = float(match.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[match.group(2)]
    if not math.isfinite(value):
        raise ValueError(text)
    return int(value)


class CountField(forms.CharField):
    """Token counts written the way people say them: 500M, 2B, 1.5T."""

    def __init__(self, *, minimum: int = 0, maximum: int = MAX_TOKENS, **kwargs):
        self.minimum, self.maximum = minimum, maximum
        super().__init__(**kwargs)

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        try:
            count = parse_count(value)
        except ValueError:
            raise forms.ValidationError("Enter a number of tokens such as 500M, 2B or 1.5T.") from None
        if count < self.minimum:
            raise forms.ValidationError(f"Enter at least {self.minimum:,}.")
        if count > self.maximum:
            raise forms.ValidationError(f"Enter at most {self.maximum:.0e} tokens.")
        return count


class WizardForm(VisibleTextMixin, forms.Form):
    # Step 1: model
    model_source = forms.ChoiceField(
        label="Where does the model come from?", initial="preset", widget=forms.RadioSelect,
        choices=[("preset", "A known model"), ("upload", "Upload config.json"), ("hf", "Hugging Face id")])
    preset = forms.CharField(label="Model", initial="llama-3.1-8b", required=False,
                             help_text="Type to search the presets, e.g. llama, mistral, qwen.")
    config_file = forms.FileField(label="config.json", required=False,
                                  help_text="The model's Hugging Face config.json (architecture only, "
                                            "no weights).")
    hf_model_id = forms.CharField(label="Hugging Face model id", required=False, max_length=200,
                                  help_text="e.g. mistralai/Mistral-7B-v0.1. The models of the presets "
                                            "need no connection; others are fetched from Hugging "
                                            "Face.")
    model_config = forms.CharField(widget=forms.HiddenInput, required=False)

    # Step 2: training setup
    finetune = forms.ChoiceField(
        label="Training method", initial="full", widget=forms.RadioSelect,
        choices=option_choices(FINETUNE, FINETUNE_LABELS))
    precision = forms.ChoiceField(label="Precision", initial="bf16-mixed",
                                  choices=option_choices(PRECISIONS, PRECISION_LABELS))
    seq_len = forms.IntegerField(label="Sequence length (tokens)", initial=4096, min_value=128,
                                 max_value=131072)
    global_batch_seqs = forms.IntegerField(label="Global batch (sequences)", initial=256, min_value=1,
                                           max_value=65536, help_text="Sequences per optimizer step.")
    optimizer = forms.ChoiceField(label="Optimizer", initial="adamw",
                                  choices=option_choices(OPTIMIZERS, OPTIMIZER_LABELS))
    lora_rank = forms.IntegerField(label="LoRA rank", initial=16, min_value=1, max_value=1024)
    use_dora = forms.BooleanField(
        label="DoRA (weight-decomposed LoRA)", required=False,
        help_text="A trained magnitude per output feature on top of the adapters: often closer to a full "
                  "fine-tune, and slower, since it recomputes each adapted weight's norm at every step.")
    strategy = forms.ChoiceField(label="Parallel strategy", initial=ANY, required=False,
                                 choices=STRATEGY_CHOICES)
    tp = forms.TypedChoiceField(label="Tensor parallel", initial=ANY, required=False, coerce=int,
                                empty_value=None,
                                choices=[(ANY, "Any")] + [(n, str(n)) for n in TP_SIZES])
    pp = forms.TypedChoiceField(label="Pipeline stages", initial=ANY, required=False, coerce=int,
                                empty_value=None,
                                choices=[(ANY, "Any")] + [(n, str(n)) for n in PP_SIZES])
    checkpointing = forms.ChoiceField(label="Activation checkpointing", initial=ANY, required=False,
                                      choices=[(ANY, "Any")] + [(c, c.capitalize()) for c in CHECKPOINTING])
    max_nodes = forms.TypedChoiceField(label="At most", initial=32, coerce=int,
                                       choices=[(n, f"{n} node{'s' if n > 1 else ''}") for n in NODE_COUNTS])

    # Step 3: data
    dataset_tokens = CountField(label="Dataset size (tokens)", initial="500M", minimum=1,
                                help_text="e.g. 500M or 2B.")
    dataset_gb = forms.FloatField(label="Dataset on disk (GB)", required=False, min_value=0,
                                  max_value=MAX_TOKENS / 1e9,
                                  help_text="Leave empty to assume about 4 bytes per token.")
    dataset_files = forms.IntegerField(label="Number of files", initial=1000, min_value=1,
                                       max_value=LIMITS["dataset_files"][1],
                                       help_text="Many small files? We suggest sharding them.")
    epochs = forms.FloatField(label="Epochs", initial=1, min_value=0, max_value=1000)
    train_tokens = CountField(label="Or train exactly this many tokens", required=False,
                              help_text="Overrides epochs, e.g. for pre-training on a token budget.")

    # Step 4: goal
    goal = forms.ChoiceField(
        label="What matters most?", initial="cheapest", widget=forms.RadioSelect,
        choices=[("cheapest", "Lowest cost"), ("fastest", "Shortest time"),
                 ("deadline", "Cheapest within a deadline"), ("budget", "Fastest within a budget")])
    deadline_hours = forms.FloatField(label="Deadline (hours)", initial=24, min_value=0.1, required=False,
                                      max_value=LIMITS["deadline_hours"][1])
    budget_usd = forms.DecimalField(label="Budget (USD)", initial=1000, min_value=1, required=False,
                                    max_value=LIMITS["budget_usd"][1], decimal_places=2)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loaded = None  # services.LoadedModel once clean() found the model
        for name, field in self.fields.items():
            field.widget.attrs.setdefault("aria-describedby", f"err-{name}")
        self.fields["preset"].widget.attrs.update({"list": "preset-list", "autocomplete": "off"})
        self.fields["config_file"].widget.attrs["accept"] = ".json,application/json"

    @classmethod
    def from_query(cls, query) -> "WizardForm":
        """A bound form from a link: the defaults, overlaid by the parameters it names."""
        data = {name: field.initial for name, field in cls.base_fields.items() if field.initial is not None}
        data |= {name: query.get(name) for name in cls.base_fields if name in query}
        return cls(data)

    # --- validation ---------------------------------------------------------------------
    def clean(self):
        data = super().clean()
        self._clean_model(data)
        if self.loaded is not None:
            self._clean_layout(data)
        if data.get("goal") == "deadline" and not data.get("deadline_hours"):
            self.add_error("deadline_hours", "Give the deadline in hours.")
        if data.get("goal") == "budget" and not data.get("budget_usd"):
            self.add_error("budget_usd", "Give the budget in USD.")
        if data.get("epochs") == 0 and not data.get("train_tokens"):
            self.add_error("epochs", "Train for more than 0 epochs, or give a number of tokens.")
        elif (not data.get("train_tokens") and data.get("epochs") and data.get("dataset_tokens")
              and data["epochs"] * data["dataset_tokens"] > MAX_TOKENS):
            self.add_error("epochs", f"That is more than {MAX_TOKENS:.0e} tokens to train; "
                                     "fewer epochs, or give a number of tokens.")
        return data

    def _clean_model(self, data):
        source = data.get("model_source")
        try:
            if source == "upload":
                upload = data.get("config_file")
                if upload:
                    self.loaded = services.model_from_upload(upload, name=_stem(upload.name))
                    self._carry("model_config", services.config_token(self.loaded))
                elif data.get("model_config"):
                    self.loaded = services.model_from_config_token(data["model_config"])
                else:
                    self.add_error("config_file", "Choose the model's config.json to upload.")
            elif source == "hf":
                self.loaded = services.model_from_hf(data.get("hf_model_id", ""))
            elif source == "preset":
                self.loaded = services.model_from_preset(data.get("preset", ""))
        except services.ModelSourceError as exc:
            field = {"upload": "config_file", "hf": "hf_model_id"}.get(source, "preset")
            self.add_error(field, str(exc))

    def _clean_layout(self, data):
        """Fixed tensor/pipeline sizes must suit the model's shape: say so on the field."""
        model = self.loaded.spec
        tp, pp = data.get("tp"), data.get("pp")
        if tp:
            if model.num_heads % tp or (model.num_kv_heads % tp and tp % model.num_kv_heads):
                self.add_error("tp", f"Tensor parallel {tp} does not divide the model's {model.num_heads} "
                                     f"attention heads ({model.num_kv_heads} key/value heads).")
            elif model.intermediate_size % tp:
                self.add_error("tp", f"Tensor parallel {tp} does not divide the MLP width "
                                     f"{model.intermediate_size}.")
        if tp and tp > 1 and self.dora():
            self.add_error("tp", f"{DORA_TP_REFUSAL}.")
        if pp and pp > model.num_layers:
            self.add_error("pp", f"{pp} pipeline stages are more than the model's {model.num_layers} layers.")
        if data.get("strategy") and (tp or pp) and not services.strategy_runs(data["strategy"], tp=tp or 1,
                                                                               pp=pp or 1):
            shape = " and ".join(f"{label} {n}" for label, n in (("tensor parallel", tp), ("pipeline", pp))
                                 if n and n > 1)
            self.add_error("strategy", f"{dict(STRATEGY_CHOICES)[data['strategy']]} cannot be combined "
                                       f"with {shape}: no training stack in the catalog runs it.")
        positions = model.max_position_embeddings
        if model.family in ("gpt2", "bert") and data.get("seq_len") and data["seq_len"] > positions:
            self.add_error("seq_len", f"{model.name} has {positions} learned positions; "
                                      f"use a sequence length of at most {positions}.")

    def _carry(self, name, value):
        self.data = self.data.copy()
        self.data[name] = value

    # --- what the step shows ------------------------------------------------------------
    def step_to_show(self, wanted: str) -> str:
        """The wanted step, or the first step before it whose fields have errors."""
        wanted = wanted if wanted in STEP_NAMES else "model"
        if not self.is_bound:
            return wanted
        self.is_valid()
        for name, _, fields in STEPS:
            if name == wanted:
                return wanted
            if any(f in self.errors for f in fields):
                return name
        return wanted

    # --- to the recommender --------------------------------------------------------------
    def workload(self) -> Workload:
        d = self.cleaned_data
        tokens = d["dataset_tokens"]
        dataset_bytes = int(d["dataset_gb"] * 1e9) if d.get("dataset_gb") else tokens * BYTES_PER_TOKEN_GUESS
        return Workload(
            model=self.loaded.spec, dataset_tokens=tokens, dataset_bytes=dataset_bytes,
            dataset_files=d["dataset_files"], finetune=d["finetune"], precision=d["precision"],
            optimizer=d["optimizer"], seq_len=d["seq_len"],
            global_batch_tokens=d["global_batch_seqs"] * d["seq_len"], epochs=float(d["epochs"]),
            train_tokens=d.get("train_tokens") or 0, lora_rank=d["lora_rank"], use_dora=self.dora())

    def dora(self) -> bool:
        """DoRA applies to LoRA adapters only (the box is hidden for the other methods)."""
        return bool(self.cleaned_data.get("use_dora")) and self.cleaned_data.get("finetune") == "lora"

    def goal_spec(self) -> Goal:
        d = self.cleaned_data
        return Goal(d["goal"], deadline_hours=d.get("deadline_hours") if d["goal"] == "deadline" else None,
                    budget_usd=d.get("budget_usd") if d["goal"] == "budget" else None)

    def search_options(self) -> SearchOptions:
        d = self.cleaned_data
        return SearchOptions(
            node_counts=tuple(n for n in NODE_COUNTS if n <= d["max_nodes"]),
            tp_sizes=(d["tp"],) if d.get("tp") else TP_SIZES,
            pp_sizes=(d["pp"],) if d.get("pp") else PP_SIZES,
            checkpointing=(d["checkpointing"],) if d.get("checkpointing") else CHECKPOINTING,
            strategies=(d["strategy"],) if d.get("strategy") else (),
        )

    def summary(self) -> dict:
        """The inputs, as stored with the plan in a quote."""
        d = self.cleaned_data
        out = {"model": self.loaded.label, "model_source": d["model_source"], "finetune": d["finetune"],
               "precision": d["precision"], "seq_len": d["seq_len"],
               "global_batch_tokens": d["global_batch_seqs"] * d["seq_len"],
               "dataset_tokens": d["dataset_tokens"], "dataset_files": d["dataset_files"],
               "epochs": d["epochs"], "train_tokens": d.get("train_tokens") or 0, "goal": d["goal"]}
        if d["finetune"] != "full":
            out["lora_rank"] = d["lora_rank"]
        if self.dora():
            out["use_dora"] = True
        if d["goal"] == "deadline":
            out["deadline_hours"] = d["deadline_hours"]
        if d["goal"] == "budget":
            out["budget_usd"] = usd_json(d["budget_usd"])
        return out


def _stem(filename: str) -> str:
    name = (filename or "").rsplit("/", 1)[-1]
    return "" if name.lower() == "config.json" else name.removesuffix(".json")
