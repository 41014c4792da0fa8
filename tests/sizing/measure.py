"""Measure real Hugging Face models on CPU (torch + transformers; test/bench only)."""

from __future__ import annotations

import torch
import transformers

from portal.sizing.estimator import ModelSpec, model_from_hf_config

transformers.logging.set_verbosity_error()

VOCAB = 1000


def hf_config(family: str, attn: str = "sdpa", **shape):
    """A small transformers config (random init, no downloads) and its model class."""
    h, layers, heads = shape.get("hidden", 128), shape.get("layers", 2), shape.get("heads", 4)
    vocab = shape.get("vocab", VOCAB)
    if family == "llama":
        cfg = transformers.LlamaConfig(
            vocab_size=vocab, hidden_size=h, intermediate_size=shape.get("inter", 352),
            num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=shape.get("kv_heads", heads // 2), max_position_embeddings=512,
            attn_implementation=attn)
        return cfg, transformers.LlamaForCausalLM
    if family == "qwen2":
        cfg = transformers.Qwen2Config(
            vocab_size=vocab, hidden_size=h, intermediate_size=shape.get("inter", 320),
            num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=shape.get("kv_heads", 1), max_position_embeddings=512,
            tie_word_embeddings=shape.get("tie", True), attn_implementation=attn)
        return cfg, transformers.Qwen2ForCausalLM
    if family == "mixtral":
        cfg = transformers.MixtralConfig(
            vocab_size=vocab, hidden_size=h, intermediate_size=shape.get("inter", 96),
            num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=shape.get("kv_heads", heads // 2), num_local_experts=4,
            num_experts_per_tok=2, max_position_embeddings=512, attn_implementation=attn)
        return cfg, transformers.MixtralForCausalLM
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


def storage_bytes(tensors) -> int:
    seen = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def saved_for_backward(model, batch: int, seq: int, autocast: bool = False,
                       vocab: int = VOCAB) -> tuple[int, int]:
    """Bytes saved for backward by one forward pass with the loss: (activations,
    autocast half copies of parameters). Storages deduplicated, parameters excluded."""
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
        if ptr not in param_ptrs and ptr not in seen and ptr not in casts:
            (casts if is_param_cast(t.detach()) else seen)[ptr] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(input_ids=ids, labels=labels)
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
