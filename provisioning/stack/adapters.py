"""``adapters.json`` for a LoRA or QLoRA plan: the PEFT ``LoraConfig`` arguments and, for QLoRA,
transformers' ``BitsAndBytesConfig`` arguments, read by the training script:

    import json; from peft import LoraConfig; from transformers import BitsAndBytesConfig
    adapters = json.load(open("/etc/trainyard/adapters.json"))
    lora = LoraConfig(**adapters["lora"])
    quantization = BitsAndBytesConfig(**adapters["quantization"])  # QLoRA only

LoRA rank from the plan (alpha twice the rank); the adapters, their dropout and DoRA
(``use_dora``) the plan was sized with (its ``estimator_regime``: the output head too where it
names ``lm_head``), else the stack's for the family, every linear layer of the attention and MLP
blocks (``portal.sizing.recommend.regimes.layer_lora_targets``, what the recommender sizes;
Phi-3's fused qkv_proj and gate_up_proj by its model type). QLoRA: NF4 base weights with double
quantization, compute in the plan's half type; when the parameters are
sharded (FSDP full or hybrid shard, ZeRO-3) ``bnb_4bit_quant_storage`` is that half type too, so
FSDP and ZeRO-3 can shard the 4-bit weights with the rest.
"""

from __future__ import annotations

import json

from portal.sizing.recommend.regimes import layer_lora_targets
from provisioning.stack.inputs import StackInputs

TASKS = {"bert": "FEATURE_EXTRACTION"}


def adapters_config(inputs: StackInputs) -> dict:
    t = inputs.training
    targets = list(t.lora_targets or layer_lora_targets(t.family, t.model_type))
    config: dict = {"lora": {"r": t.lora_rank, "lora_alpha": 2 * t.lora_rank, "lora_dropout": t.lora_dropout,
                             "bias": "none",
                             # PEFT takes the shorthand as a string, not in a list
                             "target_modules": "all-linear" if targets == ["all-linear"] else targets,
                             "task_type": TASKS.get(t.family, "CAUSAL_LM")}}
    if t.use_dora:
        config["lora"]["use_dora"] = True
    if t.finetune == "qlora":
        half = "float16" if t.precision == "fp16-mixed" else "bfloat16"
        quantization = {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                        "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": half}
        if t.shards_params:
            quantization["bnb_4bit_quant_storage"] = half
        config["quantization"] = quantization
    return config


def render_adapters(inputs: StackInputs) -> str:
    return json.dumps(adapters_config(inputs), indent=2) + "\n"
