"""LoRA/QLoRA: a frozen weight makes autograd save less (activations.adapted_linears).

PyTorch's generated autograd code saves an input of an op only when the gradient that needs
it is computed: ``mm`` keeps its input for the weight's gradient, ``mul`` each factor for the
other's. With the base frozen, a frozen linear keeps no input and a frozen norm weight no
normalised copy; only the inputs of adapted linears (and each adapter's rank-r middle) are
saved, and nothing before the first adapted linear (the embedding's output needs no gradient).

Measured with saved_tensors_hooks on Hugging Face's Llama whose linears are wrapped as PEFT's
``lora.Linear.forward`` runs them (base output + lora_B(lora_A(dropout(x))) * scaling, dropout 0).
"""

from dataclasses import replace

import pytest

from portal.sizing.estimator import ParallelConfig, TrainingConfig, estimate, get_preset
from portal.sizing.estimator.activations import frozen_weight_casts, logits_backward_transient

MLP = ("gate_proj", "up_proj", "down_proj")
LAYER_1 = "model.layers.1."  # a layer past the first (whose inputs may need no gradient)
ALL = ("q_proj", "k_proj", "v_proj", "o_proj", *MLP)


def _saved(model_spec, **knobs) -> int:
    est = estimate(
        model_spec,
        TrainingConfig(
            **{"precision": "bf16", "micro_batch": 2, "seq_len": 1024, "attention": "sdpa", **knobs}
        ),
    )
    return est.per_gpu.activations


def test_a_frozen_down_proj_keeps_no_copy_of_its_input():
    """Adapting down_proj as well saves its input, the SwiGLU product (b*s*I half elements
    per layer), and the adapter's rank-r middle; nothing else changes."""
    m = get_preset("llama-3.1-8b")
    base = _saved(m, finetune="lora", lora_rank=16, lora_targets=("q_proj", "v_proj"))
    more = _saved(m, finetune="lora", lora_rank=16, lora_targets=("q_proj", "v_proj", "down_proj"))
    tokens = 2 * 1024
    assert more - base == m.num_layers * tokens * 2 * (m.intermediate_size + 16)


def test_lora_saves_less_than_full_finetuning_and_full_recompute_keeps_layer_inputs():
    m = get_preset("llama-3.1-8b")
    full = _saved(m)
    lora = _saved(m, finetune="lora", lora_targets=("q_proj", "v_proj"))
    assert lora < 0.8 * full
    # under full recompute only each layer's input is kept: the same for LoRA and full
    ckpt_full = _saved(m, checkpointing="full")
    ckpt_lora = _saved(m, checkpointing="full", finetune="lora", lora_targets=("q_proj", "v_proj"))
    # what the frozen embedding, final norm weight and head keep no more: the token ids (int64),
    # the final norm's normalised copy and the head's input (half)
    assert ckpt_full - ckpt_lora == 2 * 1024 * (8 + 2 * m.hidden_size + 2 * m.hidden_size)


def _lora_saved_bytes_match(family: str, mode: str, targets: tuple[str, ...], ckpt: str,
                            attention: str = "sdpa", dora: bool = False, **extra) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch import nn

    from .measure import build, hf_config, saved_for_backward, spec_of
    from .peft_replica import DoraLinear, LoraLinear

    precision, dtype, autocast = {
        "fp32": ("fp32", torch.float32, False),
        "bf16-model": ("bf16", torch.bfloat16, False),
        "autocast": ("bf16-mixed", torch.float32, True),
    }[mode]
    shape = {"hidden": 64, "heads": 2, "kv_heads": 1, "layers": 3, "inter": 160, **extra}
    cfg, cls = hf_config(family, attention, **shape)
    model = build(cfg, cls, dtype)
    if ckpt == "full":
        model.activation_checkpointing_enable()
    for p in model.parameters():
        p.requires_grad_(False)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and name in targets:
                setattr(module, name, (DoraLinear if dora else LoraLinear)(child, 4))
    # DoRA runs BA through its adapter on the way (no gradient flows there): what stays saved counts
    measured, weight_casts = saved_for_backward(model, 2, 40, autocast=autocast, alive_only=dora)
    est = estimate(
        spec_of(cfg),
        TrainingConfig(
            precision=precision,
            micro_batch=2,
            seq_len=40,
            attention=attention,
            checkpointing=ckpt,
            finetune="lora",
            lora_rank=4,
            lora_targets=targets,
            use_dora=dora,
        ),
    )
    assert est.per_gpu.activations + est.per_gpu.logits_and_loss == pytest.approx(measured, rel=0.005)
    # autocast: the half casts of frozen weights kept for their inputs' gradients (and the adapters')
    if ckpt == "none":
        assert est.per_gpu.gathered_buffers == (weight_casts if autocast else 0)
    elif autocast:  # the forward keeps the head's; the recomputed layer's come back in backward
        one_layer = sum(w.numel() for name, w in model.named_parameters()
                        if name.startswith(LAYER_1) and w.dim() == 2)
        assert est.per_gpu.gathered_buffers == weight_casts + 2 * one_layer


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["fp32", "bf16-model", "autocast"])
@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), ("o_proj",), ("k_proj", "down_proj"), MLP, ALL,
                                     ("q_proj", "v_proj", "lm_head"), ("o_proj", "lm_head"),
                                     # the first MLP keeps only what its adapters' gradients need
                                     ("down_proj",), ("gate_proj",), ("up_proj", "down_proj")])
@pytest.mark.parametrize("ckpt", ["none", "full"])
def test_saved_bytes_match_peft_style_lora_on_hf_llama(mode, targets, ckpt):
    _lora_saved_bytes_match("llama", mode, targets, ckpt)


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["fp32", "bf16-model", "autocast"])
@pytest.mark.parametrize("targets", [("q_proj",), ("k_proj",), ("v_proj",), ("q_proj", "v_proj"),
                                     ("k_proj", "down_proj"), ("o_proj",), ALL])
@pytest.mark.parametrize("kv_heads", [1, 2])
def test_saved_bytes_match_peft_style_lora_on_hf_llamas_eager_attention(mode, targets, kv_heads):
    """The first layer's eager attention keeps each matmul factor only for the other's gradient:
    with q, k or v adapted alone there, the rest of q, the repeated k and v, the scores' softmax
    and the half probabilities are kept only where a gradient needs them (over by 1 to 7 % before).
    Without recompute: under it the first layer keeps its input only, as any layer."""
    _lora_saved_bytes_match("llama", mode, targets, "none", attention="eager", kv_heads=kv_heads)


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["fp32", "bf16-model", "autocast"])
@pytest.mark.parametrize("family, targets", [("llama", ("q_proj", "v_proj")), ("llama", ("o_proj",)),
                                             ("llama", MLP), ("llama", ALL), ("gemma2", ALL)])
@pytest.mark.parametrize("ckpt", ["none", "full"])
def test_saved_bytes_match_peft_style_dora(family, mode, targets, ckpt):
    """DoRA (use_dora) keeps each adapted linear's base output and its adapter's output for the
    magnitude's gradient, in every layer, and three vectors of its width (the first layer's third
    where its input needs no gradient is left out: a vector)."""
    _lora_saved_bytes_match(family, mode, targets, ckpt, attention="eager" if family == "gemma2" else "sdpa",
                            dora=True)


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["fp32", "bf16-model", "autocast"])
@pytest.mark.parametrize("targets", [("qkv_proj",), ("o_proj",), ("gate_up_proj", "down_proj"),
                                     ("down_proj",),
                                     ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head")])
@pytest.mark.parametrize("ckpt", ["none", "full"])
def test_saved_bytes_match_peft_style_lora_on_hf_phi3s_fused_projections(mode, targets, ckpt):
    _lora_saved_bytes_match("phi3", mode, targets, ckpt)


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["fp32", "bf16-model", "autocast"])
@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), ("v_proj",), ("k_proj", "o_proj"), ("o_proj",),
                                     ALL])
@pytest.mark.parametrize("ckpt", ["none", "full"])
def test_saved_bytes_match_peft_style_lora_on_hf_qwen3s_q_and_k_norms(mode, targets, ckpt):
    """A frozen q/k norm keeps its fp32 input and rsqrt once its projection's output needs a
    gradient: from the second layer on, or where the projection is adapted."""
    _lora_saved_bytes_match("qwen3", mode, targets, ckpt)


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["fp32", "bf16-model", "autocast"])
@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), ("o_proj",), ("k_proj", "down_proj"), ALL,
                                     ("o_proj", "lm_head")])
@pytest.mark.parametrize("ckpt", ["none", "full"])
def test_saved_bytes_match_peft_style_lora_on_hf_gemmas_unit_offset_norms(mode, targets, ckpt):
    """A frozen Gemma norm keeps its fp32 input, rsqrt and the fp32 1 + weight it multiplies by
    once its input needs a gradient (not in the layers before the first adapter)."""
    _lora_saved_bytes_match("gemma", mode, targets, ckpt)


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["fp32", "bf16-model", "autocast"])
@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), ("v_proj",), ("k_proj",), ("o_proj",),
                                     ("k_proj", "down_proj"), MLP, ALL, ("o_proj", "lm_head")])
@pytest.mark.parametrize("ckpt", ["none", "full"])
def test_saved_bytes_match_peft_style_lora_on_hf_gemma2s_soft_capped_eager_attention(mode, targets, ckpt):
    """Gemma 2 runs eager (transformers has no SDPA path for soft-capped scores): tanh keeps the capped
    scores once they need a gradient (not in the first layer when neither q_proj nor k_proj there is
    adapted), and the capped logits whenever the head's input needs one."""
    _lora_saved_bytes_match("gemma2", mode, targets, ckpt, attention="eager")


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["fp32", "bf16-model", "autocast"])
@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), ("v_proj",), ("o_proj",), ("k_proj", "down_proj"),
                                     MLP, ALL, ("o_proj", "lm_head")])
@pytest.mark.parametrize("ckpt", ["none", "full"])
def test_saved_bytes_match_peft_style_lora_on_hf_gemma3s_post_norms_and_sliding_layers(mode, targets, ckpt):
    """Gemma 3's norms on the attention's and the MLP's outputs keep their input once it needs a
    gradient (not in the first layer's attention when no attention linear there is adapted), and
    its sliding-window layers (here the sequence passes the window) keep SDPA's mask and the
    repeated k and v."""
    _lora_saved_bytes_match("gemma3_text", mode, targets, ckpt)


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["fp32", "bf16-model", "autocast"])
@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), ("o_proj",), MLP])
def test_saved_bytes_match_peft_style_lora_on_a_sliding_window_mistral(mode, targets):
    """Every Mistral layer slides: past the window each keeps SDPA's mask once its attention runs
    with a gradient, the first one too when q, k or v is adapted."""
    _lora_saved_bytes_match("mistral", mode, targets, "none", window=16)


def test_lora_dropout_keeps_one_dropped_copy_and_mask_per_adapter():
    """PEFT applies a dropout per adapter (lora_A(dropout(x))): with p > 0 every adapter keeps its
    own half copy and a 1-byte mask instead of one shared input. On a dense llama, q, k and v
    adapters read one norm output: three copies of 3 bytes instead of one of 2."""
    m = get_preset("llama-3.1-8b")
    knobs = {"finetune": "lora", "lora_rank": 8, "lora_targets": ("q_proj", "k_proj", "v_proj")}
    plain = _saved(m, **knobs)
    dropped = _saved(m, **knobs, lora_dropout=0.1)
    tokens, h = 2 * 1024, m.hidden_size
    first_layer_masks = 3 * tokens * h  # the first layer's input needs no gradient: no masks kept
    assert dropped - plain == m.num_layers * tokens * h * (3 * (2 + 1) - 2) - first_layer_masks


def test_gpt2_lora_dropout_copies_come_on_top_of_the_full_count():
    """Frozen ops of GPT-2 are not traced (counted as if trained, an over-estimate); LoRA dropout's
    copies and masks are added for every adapted linear, so the count stays above what runs."""
    m = get_preset("gpt2-124m")
    knobs = {"precision": "bf16-mixed", "finetune": "lora", "lora_targets": ("c_attn", "c_proj", "c_fc")}
    plain = _saved(m, **knobs)
    dropped = _saved(m, **knobs, lora_dropout=0.05)
    inputs = 3 * m.hidden_size + m.intermediate_size  # c_attn, attn.c_proj, c_fc, mlp.c_proj
    assert dropped - plain == m.num_layers * 2 * 1024 * inputs * (2 + 1)
    assert plain == _saved(m, precision="bf16-mixed")  # full fine-tuning's count without dropout


def test_an_adapter_on_the_output_head_trains_its_own_weights_and_keeps_the_heads_input():
    """lm_head in lora_targets (PEFT's and litgpt's name for the head): the adapter's r x (h + V)
    weights train, and lora_A keeps the head's input (the final norm's output, which a frozen head
    keeps none of) and lora_B the rank-r middle; with LoRA dropout the dropped copy and its mask
    instead of the input. Tied or untied, the adapter has the head's shape."""
    untied = get_preset("llama-3.1-8b")
    for m in (untied, replace(untied, tie_word_embeddings=True)):
        layers = {"finetune": "lora", "lora_rank": 16, "lora_targets": ("q_proj", "v_proj")}
        head = {**layers, "lora_targets": ("q_proj", "v_proj", "lm_head")}
        config = {"precision": "bf16-mixed", "micro_batch": 2, "seq_len": 1024}
        without = estimate(m, TrainingConfig(**config, **layers))
        with_head = estimate(m, TrainingConfig(**config, **head))
        assert with_head.params.trainable - without.params.trainable == 16 * (m.hidden_size + m.vocab_size)
        assert "finetune=lora r=16 +head" in with_head.represents
        assert "+head" not in " ".join(without.represents)
        tokens = 2 * 1024
        kept = with_head.per_gpu.activations - without.per_gpu.activations
        assert kept == tokens * (2 * m.hidden_size + 2 * 16)
        dropped = estimate(m, TrainingConfig(**config, **head, lora_dropout=0.1)).per_gpu.activations
        plain_dropped = estimate(m, TrainingConfig(**config, **layers, lora_dropout=0.1)).per_gpu.activations
        assert dropped - plain_dropped == tokens * ((2 + 1) * m.hidden_size + 2 * 16)


def test_all_linear_leaves_the_head_out_and_the_head_alone_is_refused():
    """PEFT's "all-linear" excludes the output layer; naming the head alone would leave no gradient
    to reach the frozen layers, a step the estimator does not model: a clear error, never the
    adapters silently dropped."""
    m = get_preset("llama-3.1-8b")
    every = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    assert (estimate(m, TrainingConfig(finetune="lora", lora_targets=("all-linear",))).params.trainable
            == estimate(m, TrainingConfig(finetune="lora", lora_targets=every)).params.trainable)
    with pytest.raises(ValueError, match="adapts the output head as well"):
        estimate(m, TrainingConfig(finetune="lora", lora_targets=("lm_head",)))


def test_a_fused_loss_cannot_train_an_adapted_head_and_a_compiled_loss_holds_its_temporaries():
    """Fused linear cross-entropy (Liger) multiplies by ``lm_head.weight``, which PEFT answers with
    the base weight: the head's adapter would not train, so the combination is refused. Under a
    compiled loss the head's forward (base output, lora_B's output and its scaled copy, half
    logits each) outgrows the half gradient the fused kernel writes: 2 more bytes per logit."""
    targets = {"finetune": "lora", "lora_targets": ("q_proj", "lm_head")}
    with pytest.raises(ValueError, match="loss='fused'"):
        TrainingConfig(loss="fused", **targets)
    m = get_preset("llama-3.1-8b")
    logits = 2048 * m.vocab_size
    for loss, chunks in (("full", 1), ("chunked", 8)):
        for act in (2, 4):  # half logits, fp32 logits
            base, adapted = (logits_backward_transient(m, 1, 2048, 1, loss, 8, compiled=True, head_adapter=a,
                                                       act=act) for a in (False, True))
            assert base == act * logits // chunks
            assert adapted - base == act * logits // chunks
    config = {"precision": "bf16-mixed", "micro_batch": 1, "seq_len": 2048, "compile_loss": True}
    plain = estimate(m, TrainingConfig(**config, finetune="lora", lora_targets=("q_proj",)))
    head = estimate(m, TrainingConfig(**config, **targets))
    assert head.per_gpu.total - plain.per_gpu.total > 2 * logits  # the rest of the head's bytes on top


def test_a_4bit_head_on_old_bitsandbytes_and_its_adapter_keep_one_copy_of_the_input():
    """bitsandbytes <= 0.43.1 kept each 4-bit linear's input, the head's too (Lightning quantises
    it); the head's adapter without dropout keeps that same tensor: counted once."""
    m = get_preset("llama-3.1-8b")
    config = {"precision": "bf16", "micro_batch": 1, "seq_len": 1024, "finetune": "qlora",
              "nf4_quantizer": "lightning", "bnb_version": "<=0.43.1", "lora_rank": 8}
    layers = estimate(m, TrainingConfig(**config, lora_targets=("q_proj",)), ParallelConfig())
    head = estimate(m, TrainingConfig(**config, lora_targets=("q_proj", "lm_head")), ParallelConfig())
    assert head.per_gpu.activations - layers.per_gpu.activations == 1024 * 8 * 2  # the middle only


def test_autocast_lora_keeps_a_half_cast_of_each_frozen_weight_until_its_backward():
    """Autocast caches the casts of weights that need a gradient only: a frozen one is cast at every
    call and its matmul keeps the cast for its input's gradient. Llama 3.1 8B (fp32 weights, the
    DDP stack's autocast): about half the weights' own bytes again without recompute; with it, the
    head's and the recomputed layer's only; none where the weights are already half or 4-bit."""
    from portal.sizing.estimator.models import param_tensors

    m = get_preset("llama-3.1-8b")
    tc = TrainingConfig(precision="bf16-mixed", finetune="lora", lora_targets=("q_proj", "v_proj"),
                        micro_batch=1, seq_len=2048, checkpointing="none")
    linears = sum(t.total for t in param_tensors(m) if t.group == "layer" and t.kind == "linear")
    head = m.vocab_size * m.hidden_size
    casts = estimate(m, tc).per_gpu.gathered_buffers
    assert 2 * (linears * (m.num_layers - 1) / m.num_layers + head) < casts < 2 * (linears + head) * 1.01
    recomputed = estimate(m, replace(tc, checkpointing="full")).per_gpu.gathered_buffers
    assert 2 * (linears / m.num_layers + head) < recomputed < 2 * (linears / m.num_layers + head) * 1.01
    assert estimate(m, replace(tc, precision="bf16")).per_gpu.gathered_buffers == 0
    assert estimate(m, replace(tc, finetune="qlora")).per_gpu.gathered_buffers == 0
    sharded = ParallelConfig(dp=2, sharding="fsdp-full-shard")  # gathered in the compute dtype: no cast
    assert frozen_weight_casts(m, replace(tc, mixed_layout="fsdp2"), sharded, "fsdp2", True) == 0
