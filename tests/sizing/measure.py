"""Measure real Hugging Face models on CPU (torch + transformers; test/bench only)."""

from __future__ import annotations

import gc
import weakref

import torch
import transformers
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from portal.sizing.estimator import ModelSpec, model_from_hf_config

transformers.logging.set_verbosity_error()

VOCAB = 1000


# The decoder families measured: their config class, model class and MLP width by default
DECODERS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", 352),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", 320),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", 320),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", 96),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", 320),
    "mistral": ("MistralConfig", "MistralForCausalLM", 352),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", 352),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", 352),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM", 352),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", 96),
}


def hf_config(family: str, attn: str = "sdpa", **shape):
    """A small transformers config (random init, no downloads) and its model class."""
    h, layers, heads = shape.get("hidden", 128), shape.get("layers", 2), shape.get("heads", 4)
    vocab = shape.get("vocab", VOCAB)
    if family in DECODERS:
        config_cls, model_cls, inter = DECODERS[family]
        cfg = getattr(transformers, config_cls)(**{
            "vocab_size": vocab, "hidden_size": h, "intermediate_size": shape.get("inter", inter),
            "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": shape.get("kv_heads", heads // 2), "max_position_embeddings": 512,
            "attn_implementation": attn, **_decoder_fields(family, shape, h, heads)})
        return cfg, getattr(transformers, model_cls)
    if family == "gpt2":
        cfg = transformers.GPT2Config(
            vocab_size=vocab, n_embd=h, n_layer=layers, n_head=heads, n_positions=256,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation=attn,
            activation_function=shape.get("act", "gelu_new"))
        return cfg, transformers.GPT2LMHeadModel
    if family == "bert":
        cfg = transformers.BertConfig(
            vocab_size=vocab, hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=shape.get("inter", 4 * h), max_position_embeddings=256,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation=attn)
        return cfg, transformers.BertForMaskedLM
    raise ValueError(family)


def _decoder_fields(family: str, shape: dict, h: int, heads: int) -> dict:
    """What a decoder family's config sets beyond the shape every family shares."""
    head_dim = {"head_dim": shape.get("head_dim", (2 * h if family.startswith("qwen3") else h) // heads)}
    if family == "qwen2":
        return {"num_key_value_heads": shape.get("kv_heads", 1),
                "tie_word_embeddings": shape.get("tie", True)}
    if family == "qwen3":  # q/k norms per head; head_dim given, as Qwen3's configs give it
        return {**head_dim, "tie_word_embeddings": shape.get("tie", False)}
    if family == "qwen3_moe":  # q/k norms, every layer sparse, experts of their own width
        return {**head_dim, "moe_intermediate_size": shape.get("inter", 96), "intermediate_size": 4 * h,
                "num_experts": shape.get("experts", 4), "num_experts_per_tok": 2,
                "norm_topk_prob": shape.get("norm", True), "tie_word_embeddings": False}
    if family == "phi3":  # q/k/v in one qkv_proj, gate/up in one gate_up_proj
        return {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attention_dropout": 0.0, "pad_token_id": 0,
                "bos_token_id": 1, "eos_token_id": 2, "sliding_window": shape.get("window"),
                "tie_word_embeddings": shape.get("tie", False)}
    if family == "mistral":  # Llama's layer; every layer attends within sliding_window (None: causal)
        return {"sliding_window": shape.get("window")}
    if family == "gemma":  # GeGLU (tanh GELU), RMSNorm scaled by 1 + weight in fp32, tied head
        return head_dim
    if family == "gemma2":  # Gemma's layer with post-norms, every other layer sliding, soft-capped
        return {**head_dim, "sliding_window": shape.get("window", 16),  # (transformers runs it eager)
                "attn_logit_softcapping": shape.get("score_cap", 50.0),
                "final_logit_softcapping": shape.get("logit_cap", 30.0)}
    if family == "gemma3_text":  # Gemma's layer with q/k norms, post-norms and sliding-window layers
        return {**head_dim, "sliding_window": shape.get("window", 16),
                "sliding_window_pattern": shape.get("pattern", 2)}
    if family == "mixtral":
        return {"num_local_experts": 4, "num_experts_per_tok": 2}
    return {}


def spec_of(cfg) -> ModelSpec:
    """Our ModelSpec, parsed from the same config.json the model was built from."""
    d = cfg.to_dict()
    d["model_type"] = cfg.model_type
    return model_from_hf_config(d, name=f"test-{cfg.model_type}")


def build(cfg, cls, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    model = cls(cfg).to(dtype)
    model.train()
    return model


class CudaAutocastRules(torch.overrides.TorchFunctionMode):
    """CUDA autocast's fp32 cast list for the ops it has and CPU autocast lacks, on CPU: while
    autocast is on, ``pow`` runs on an fp32 copy of a half input (aten autocast_mode's
    ``pow`` fp32 policy on CUDA). The estimate is for CUDA; under plain CPU autocast GPT-2's
    gelu_new would keep its polynomial in bf16."""

    POW = (torch.pow, torch.Tensor.pow, torch.Tensor.__pow__)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (func in self.POW and torch.is_autocast_enabled("cpu") and isinstance(args[0], torch.Tensor)
                and args[0].dtype in (torch.bfloat16, torch.float16)):
            args = (args[0].float(), *args[1:])
        return func(*args, **kwargs)


def storage_bytes(tensors) -> int:
    seen = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def saved_for_backward(model, batch: int, seq: int, autocast: bool = False,
                       vocab: int = VOCAB, alive_only: bool = False) -> tuple[int, int]:
    """Bytes saved for backward by one forward pass with the loss: (activations,
    autocast half copies of parameters). Storages deduplicated, parameters excluded; autocast
    follows CUDA's cast lists (CudaAutocastRules). ``alive_only``: what is still saved when the
    forward returns, not what a graph no gradient flows through saved and dropped on the way
    (DoRA's BA through its adapter: dora.py get_lora_weight)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    labels = ids.clone()
    params = list(model.parameters())
    param_ptrs = {p.untyped_storage().data_ptr() for p in params}
    half_params = {}
    for p in params:
        half_params.setdefault(tuple(p.shape), []).append(p)
    seen: dict[int, int] = {}
    casts: dict[int, int] = {}
    packed: list[tuple[weakref.ref, bool]] = []

    def is_param_cast(t) -> bool:
        if not autocast or t.dtype != torch.bfloat16:
            return False
        for shape in (tuple(t.shape), tuple(reversed(t.shape))):
            for p in half_params.get(shape, ()):
                ref = p.detach().to(torch.bfloat16)
                if ref.shape == t.shape and torch.equal(ref, t):
                    return True
                if ref.dim() == 2 and ref.t().shape == t.shape and torch.equal(ref.t(), t):
                    return True
        return False

    def pack(t):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if alive_only and ptr not in param_ptrs:
            packed.append((weakref.ref(t), is_param_cast(t.detach())))
        elif ptr not in param_ptrs and ptr not in seen and ptr not in casts:
            (casts if is_param_cast(t.detach()) else seen)[ptr] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), CudaAutocastRules():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(input_ids=ids, labels=labels)
    if alive_only:
        gc.collect()
    for ref, is_cast in packed:  # alive_only: the storages the graph from the loss still holds
        if (t := ref()) is not None:
            (casts if is_cast else seen)[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    del out
    return sum(seen.values()), sum(casts.values())


def model_states_after_step(model, optimizer_cls=torch.optim.AdamW, batch=2, seq=16,
                            vocab=VOCAB) -> dict[str, int]:
    """Bytes of weights, gradients and optimizer state after one real optimizer step."""
    opt = optimizer_cls(model.parameters(), lr=1e-3)
    ids = torch.randint(0, vocab, (batch, seq))
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    params = list(model.parameters())
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    return {
        "weights": storage_bytes(params),
        "gradients": storage_bytes([p.grad for p in params if p.grad is not None]),
        "optimizer_states": storage_bytes(state),
    }


MODES = {  # how a Hugging Face model is measured: (estimator precision, torch dtype, autocast)
    "fp32": ("fp32", "float32", False),
    "bf16-model": ("bf16", "bfloat16", False),
    "autocast": ("bf16-mixed", "float32", True),
}

SMOKE_MODES = {  # how train_smoke.py's Llama runs: estimator (precision, mixed_layout, sharding)
    "fsdp2": ("bf16-mixed", "fsdp2", "fsdp-full-shard"),  # bench/stack_gpu.py's worker
    "autocast": ("bf16-mixed", "autocast", "none"),  # the node memory probe (node_checks.py)
    "fp32": ("fp32", None, "none"),
}


def smoke_saved_for_backward(cfg, batch: int, mode: str, checkpointing: bool = False) -> tuple[int, int, int]:
    """provisioning/acceptance/node/train_smoke.py's Llama, one forward with the loss as its loops
    run it: (bytes saved for backward, bytes of the logits the loop keeps, autocast half copies of
    parameters). ``fsdp2``: fully_shard on every block and the root with
    MixedPrecisionPolicy(bf16, fp32 reduce), a world of one over gloo (no collective runs),
    as bench/stack_gpu.py's worker; ``autocast``: fp32 weights under bf16 autocast, as the node
    memory probe; ``fp32``. Parameters (FSDP2's unsharded ones too) are excluded."""
    import sys
    from pathlib import Path

    import torch.distributed as dist
    import torch.nn.functional as F

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "provisioning" / "acceptance" / "node"))
    from train_smoke import Llama

    torch.manual_seed(0)
    model = Llama(cfg, checkpoint_activations=checkpointing)
    model.train()
    own_group = mode == "fsdp2" and not dist.is_initialized()
    if mode == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        if own_group:
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        options = {"mesh": init_device_mesh("cpu", (1,)), "reshard_after_forward": True,
                   "mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)}
        for block in model.blocks:
            fully_shard(block, **options)
        fully_shard(model, **options)
    halves = [p.detach().to(torch.bfloat16) for p in model.parameters()] if mode == "autocast" else []

    def param_ptrs() -> set[int]:
        local = (p.to_local() if hasattr(p, "to_local") else p for p in model.parameters())
        return {t.untyped_storage().data_ptr() for t in local}

    seen: dict[int, int] = {}
    casts: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr and ptr not in seen and ptr not in casts and ptr not in param_ptrs():
            plain = t.detach()
            is_cast = plain.dtype == torch.bfloat16 and any(
                w.shape == plain.shape and torch.equal(w, plain)
                or w.dim() == 2 and w.t().shape == plain.shape and torch.equal(w.t(), plain) for w in halves)
            (casts if is_cast else seen)[ptr] = st.nbytes()
        return t

    tokens = torch.randint(0, cfg.vocab, (batch, cfg.seq + 1), generator=torch.Generator().manual_seed(1))
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "autocast"):
                logits = model(tokens[:, :-1])
            F.cross_entropy(logits.float().view(-1, cfg.vocab), tokens[:, 1:].reshape(-1))
    finally:
        if own_group:
            dist.destroy_process_group()
    return sum(seen.values()), logits.untyped_storage().nbytes(), sum(casts.values())


class MovedBytes(TorchDispatchMode):
    """The bytes every eager kernel run inside it reads and writes, forward and backward: its
    tensor inputs and outputs (views move none; _unsafe_view is one its schema does not flag)."""

    def __init__(self):
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not (func.is_view or func is torch.ops.aten._unsafe_view.default):
            self.bytes += sum(t.numel() * t.element_size() for t in tree_leaves((args, kwargs, out))
                              if isinstance(t, torch.Tensor))
        return out
