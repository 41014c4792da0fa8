"""QLoRA on bitsandbytes: what its 4-bit matmul saves, and what parameter offload leaves on the GPU.

- bitsandbytes <= 0.43.1: ``MatMul4Bit.forward`` stored ``ctx.tensors = (A, B)`` whenever an
  input needed a gradient, so every 4-bit linear kept its input A for a backward that never uses
  it (tag 0.43.0: bitsandbytes/autograd/_functions.py); bitsandbytes#1270 (9e753741,
  0.43.2) stores ``(None, B)``. ``TrainingConfig.bnb_version``.
- Parameter offload (FSDP's CPU offload, ZeRO-3's offload_param) moves parameters to host RAM;
  bitsandbytes keeps its quantisation state on the parameter and its module
  (``Params4bit._quantize``: ``self.quant_state = quant_state; self.module.quant_state = ...``),
  not in a parameter, so it stays whole on every GPU.
- Without double quantisation (``compress_statistics=False``: Hugging Face's
  ``bnb_4bit_use_double_quant=False``, Lightning's ``nf4`` mode) that state is an fp32 absmax per
  block of 64 weights (bitsandbytes ``functional.quantize_4bit``). ``TrainingConfig.nf4_double_quant``.
- ``MatMul4Bit`` multiplies by ``dequantize_4bit(B, state).to(A.dtype)`` in forward and for A's
  gradient in backward (tag 0.42.0): one whole weight at a time exists in the dtype it was
  quantised from, then in the compute dtype. Transformers keeps the output head in half
  (``get_keys_to_not_convert``) and quantises weights as loaded; Lightning's BitsandbytesPrecision
  (2.2.1) converts every ``nn.Linear`` and quantises from ``weight.to(torch.half)``.
  ``TrainingConfig.nf4_quantizer``; ``activations.bnb_dequantised``.
"""

import pytest

from portal.sizing.estimator import ParallelConfig, TrainingConfig, estimate, get_preset, model_from_hf_config
from portal.sizing.estimator.activations import bnb_dequantised
from portal.sizing.estimator.dtypes import (
    NF4_DOUBLE_QUANT_BYTES,
    NF4_PLAIN_STATE_BYTES,
    NF4_QUANT_STATE_BYTES,
)
from portal.sizing.estimator.models import param_tensors

ALL = ("all-linear",)


def _activations(m, **knobs) -> int:
    training = TrainingConfig(**{"precision": "bf16", "finetune": "qlora", "micro_batch": 2, "seq_len": 1024,
                                 "attention": "flash", "lora_targets": ALL, **knobs})
    return estimate(m, training).per_gpu.activations


def test_bitsandbytes_up_to_0_43_1_keeps_every_4bit_linears_input():
    """With LoRA dropout each adapter saves its own dropped copy, so the linears' shared inputs are
    kept by nobody, except bitsandbytes <= 0.43.1's MatMul4Bit: the attention norm's output (q, k,
    v: one tensor), the MLP norm's (gate, up) and the SwiGLU product (down_proj), in bf16, per
    layer. o_proj's input is the attention kernel's output, which the kernel saves anyway."""
    m = get_preset("llama-3.1-8b")
    tokens = 2 * 1024
    new = _activations(m, lora_dropout=0.05)
    old = _activations(m, lora_dropout=0.05, bnb_version="<=0.43.1")
    assert old - new == m.num_layers * tokens * 2 * (2 * m.hidden_size + m.intermediate_size)


def test_old_bitsandbytes_adds_nothing_where_the_adapters_already_keep_the_inputs():
    """Without dropout the adapters' lora_A keep x itself (and down_proj's the product): the
    tensor bitsandbytes also held is the same one, so nothing more is saved; torchao's NF4 linear
    (torchtune) never kept its input."""
    m = get_preset("llama-3.1-8b")
    assert _activations(m, bnb_version="<=0.43.1") == _activations(m)
    assert (_activations(m, lora_dropout=0.05, quant_storage="torchao-nf4", bnb_version="<=0.43.1")
            == _activations(m, lora_dropout=0.05, quant_storage="torchao-nf4"))


def test_under_full_recompute_only_the_recomputed_layer_keeps_the_old_inputs():
    """Full recompute keeps layer inputs: bitsandbytes' extra copies live in the one layer being
    recomputed, not in every layer (they are not in the saved activations)."""
    m = get_preset("llama-2-70b")  # its recomputed layer outweighs the loss's vocabulary tensors
    knobs = {"lora_dropout": 0.05, "checkpointing": "full"}
    assert _activations(m, bnb_version="<=0.43.1", **knobs) == _activations(m, **knobs)
    training = {"precision": "bf16", "finetune": "qlora", "micro_batch": 2, "seq_len": 2048,
                "attention": "flash", "lora_targets": ALL, **knobs}
    new = estimate(m, TrainingConfig(**training))
    old = estimate(m, TrainingConfig(**training, bnb_version="<=0.43.1"))
    tokens = 2 * 2048
    kept = tokens * 2 * (2 * m.hidden_size + m.intermediate_size)
    assert old.per_gpu.transient - new.per_gpu.transient == kept


def _nf4_elements(m) -> int:
    return sum(t.total for t in param_tensors(m) if t.group == "layer" and t.kind == "linear")


@pytest.mark.parametrize("sharding", ["fsdp-full-shard", "zero3"])
def test_parameter_offload_leaves_bitsandbytes_quant_state_on_the_gpu(sharding):
    """Offloading parameters moves the packed 4-bit codes (a parameter) to host RAM; the
    quantisation state (one 8-bit absmax per 64 weights, one fp32 scale per 256 of those) stays
    on every GPU, whole. Nothing is lost: host plus device hold what the GPU held before."""
    m = get_preset("llama-2-70b")
    training = TrainingConfig(precision="bf16", finetune="qlora", quant_storage="bf16", lora_targets=ALL,
                              checkpointing="full")
    off = estimate(m, training, ParallelConfig(dp=2, sharding=sharding, offload="optimizer+params"))
    on_gpu = estimate(m, training, ParallelConfig(dp=2, sharding=sharding, offload="optimizer"))
    assert off.per_gpu.weights == pytest.approx(_nf4_elements(m) * NF4_QUANT_STATE_BYTES, rel=1e-9)
    moved = on_gpu.per_gpu.weights + on_gpu.per_gpu.gradients - off.per_gpu.weights
    assert off.memory.cpu_bytes_per_gpu - on_gpu.memory.cpu_bytes_per_gpu == pytest.approx(moved, rel=1e-9)


def test_torchao_nf4_and_16_bit_bases_offload_every_weight():
    """torchao's NF4Tensor keeps its scalers inside the tensor (offloaded with it); LoRA's 16-bit
    base and full fine-tuning have no state outside their parameters."""
    m = get_preset("llama-2-70b")
    par = ParallelConfig(dp=2, sharding="fsdp-full-shard", offload="optimizer+params")
    for training in (TrainingConfig(precision="bf16", finetune="qlora", quant_storage="torchao-nf4"),
                     TrainingConfig(precision="bf16", finetune="lora"), TrainingConfig(precision="bf16")):
        assert estimate(m, training, par).per_gpu.weights == 0


def test_an_old_bitsandbytes_is_named_in_what_the_estimate_represents():
    m = get_preset("llama-3.1-8b")
    old = estimate(m, TrainingConfig(finetune="qlora", bnb_version="<=0.43.1"))
    assert "bitsandbytes<=0.43.1" in old.represents
    assert not any("bitsandbytes" in k for k in estimate(m, TrainingConfig(finetune="qlora")).represents)


def test_an_unknown_bitsandbytes_version_is_a_clear_error():
    with pytest.raises(ValueError, match="bnb_version"):
        TrainingConfig(finetune="qlora", bnb_version="0.41")


# -- NF4 without double quantisation (bitsandbytes' compress_statistics=False) -----------------------
@pytest.mark.parametrize("parallel", [ParallelConfig(), ParallelConfig(dp=8, sharding="fsdp-full-shard")])
def test_plain_nf4_keeps_an_fp32_absmax_per_64_weights_whole_on_every_gpu(parallel):
    """Without double quantisation bitsandbytes keeps one fp32 absmax per block of 64 weights
    (4/64 B) instead of an 8-bit one with fp32 scales per 256 blocks: on the module, so it is not
    sharded with the packed codes."""
    m = get_preset("llama-2-70b")
    knobs = {"precision": "bf16", "finetune": "qlora", "lora_targets": ALL, "checkpointing": "full"}
    double = estimate(m, TrainingConfig(**knobs), parallel).per_gpu
    plain = estimate(m, TrainingConfig(**knobs, nf4_double_quant=False), parallel).per_gpu
    assert plain.weights - double.weights == pytest.approx(
        _nf4_elements(m) * (NF4_PLAIN_STATE_BYTES - NF4_QUANT_STATE_BYTES), abs=1)
    assert NF4_PLAIN_STATE_BYTES == 4 / 64
    # nothing else moves (but the allocator's overhead, a share of what is allocated)
    for term in ("gradients", "optimizer_states", "activations", "logits_and_loss", "transient",
                 "gathered_buffers"):
        assert getattr(plain, term) == getattr(double, term)


def test_parameter_offload_leaves_the_plain_fp32_absmax_on_the_gpu():
    m = get_preset("llama-2-70b")
    training = TrainingConfig(precision="bf16", finetune="qlora", quant_storage="bf16", lora_targets=ALL,
                              checkpointing="full", nf4_double_quant=False)
    off = estimate(m, training, ParallelConfig(dp=2, sharding="fsdp-full-shard", offload="optimizer+params"))
    assert off.per_gpu.weights == pytest.approx(_nf4_elements(m) * NF4_PLAIN_STATE_BYTES, rel=1e-9)


def test_plain_nf4_is_named_and_refused_for_torchaos_nf4():
    m = get_preset("llama-3.1-8b")
    plain = estimate(m, TrainingConfig(finetune="qlora", precision="bf16", nf4_double_quant=False))
    assert "nf4 without double quantisation (fp32 absmax)" in plain.represents
    with pytest.raises(ValueError, match="NF4Tensor always quantises its scalers"):
        TrainingConfig(finetune="qlora", quant_storage="torchao-nf4", nf4_double_quant=False)
    with pytest.raises(ValueError, match="nf4_double_quant must be true or false"):
        TrainingConfig(finetune="qlora", nf4_double_quant="no")


# -- the dequantised weight at each 4-bit matmul, and who quantised the base ---------------------------
def test_a_4bit_matmul_dequantises_its_whole_weight_once_or_twice_by_who_quantised_it():
    """Transformers: the largest layer linear (Llama 3.1 8B's MLP, 14336 x 4096) once in the
    compute dtype; TP splits it. Lightning: dequantised to fp16, then cast to bf16 (4 B a weight)
    or fp32 (6 B), and the untied head (128256 x 4096) is 4-bit too."""
    m = get_preset("llama-3.1-8b")
    mlp, head = 14336 * 4096, 128256 * 4096
    qlora = {"finetune": "qlora", "precision": "bf16"}
    assert bnb_dequantised(m, TrainingConfig(**qlora), 1) == (2 * mlp, 0)
    assert bnb_dequantised(m, TrainingConfig(**qlora), 2) == (mlp, 0)
    assert bnb_dequantised(m, TrainingConfig(finetune="qlora", precision="fp32"), 1) == (4 * mlp, 0)
    assert bnb_dequantised(m, TrainingConfig(**qlora, nf4_quantizer="lightning"), 1) == (4 * mlp, 4 * head)
    fp32 = TrainingConfig(finetune="qlora", precision="fp32", nf4_quantizer="lightning")
    assert bnb_dequantised(m, fp32, 1) == (6 * mlp, 6 * head)
    torchao = TrainingConfig(finetune="qlora", quant_storage="torchao-nf4")
    for other in (TrainingConfig(finetune="lora"), torchao):
        assert bnb_dequantised(m, other, 1) == (0, 0)


def test_a_layers_dequantised_weight_joins_its_recomputed_backward():
    """Under full recompute with a fused loss (a small logits transient) the backward's peak is a
    recomputed layer plus its dequantised MLP weight: the bitsandbytes base holds exactly that
    weight more than torchao's NF4 (not counted), and nothing else of the transient differs."""
    m = get_preset("llama-3.1-8b")
    knobs = {"finetune": "qlora", "precision": "bf16", "seq_len": 1024, "checkpointing": "full",
             "loss": "fused"}
    bnb = estimate(m, TrainingConfig(**knobs)).per_gpu
    torchao = estimate(m, TrainingConfig(**knobs, quant_storage="torchao-nf4")).per_gpu
    assert bnb.transient - torchao.transient == 2 * 14336 * 4096
    assert bnb.activations == torchao.activations and bnb.logits_and_loss == torchao.logits_and_loss


def test_lightnings_4bit_head_is_smaller_at_rest_and_dequantised_next_to_the_logits():
    """The same QLoRA run quantised by Lightning instead of transformers: the head's weights drop
    from bf16 to NF4, and its two dequantised copies (fp16 + bf16) join the logits' transient at
    the loss, which outweighs a layer's weight here. On bitsandbytes <= 0.43.1 the 4-bit head
    also keeps its input, the final norm's bf16 output."""
    m = get_preset("llama-3.1-8b")
    knobs = {"finetune": "qlora", "precision": "bf16", "micro_batch": 2, "seq_len": 512, "loss": "chunked"}
    hf = estimate(m, TrainingConfig(**knobs)).per_gpu
    lightning = estimate(m, TrainingConfig(**knobs, nf4_quantizer="lightning")).per_gpu
    head = 128256 * 4096
    assert hf.weights - lightning.weights == pytest.approx(head * (2 - NF4_DOUBLE_QUANT_BYTES), abs=1)
    assert lightning.transient - hf.transient == 4 * head
    for term in ("gradients", "optimizer_states", "activations", "logits_and_loss"):
        assert getattr(lightning, term) == getattr(hf, term)
    old = {**knobs, "bnb_version": "<=0.43.1", "lora_dropout": 0.05}
    old_hf = estimate(m, TrainingConfig(**old)).per_gpu
    old_lightning = estimate(m, TrainingConfig(**old, nf4_quantizer="lightning")).per_gpu
    assert old_lightning.activations - old_hf.activations == 2 * 512 * 2 * 4096


def test_lightnings_quantizer_is_named_and_refused_where_litgpt_does_not_run_it():
    """One GPU, a true dtype, an untied head: Lightning's conversion clones a tied head into a 4-bit
    weight of its own, which is not modelled."""
    m = get_preset("llama-3.1-8b")
    lightning = TrainingConfig(finetune="qlora", precision="bf16", nf4_quantizer="lightning")
    assert "nf4_quantizer=lightning" in estimate(m, lightning).represents
    for parallel in (ParallelConfig(dp=2), ParallelConfig(dp=2, sharding="fsdp-full-shard"),
                     ParallelConfig(tp=2)):
        with pytest.raises(ValueError, match="on one GPU without offload"):
            estimate(m, lightning, parallel)
    with pytest.raises(ValueError, match="true dtype"):
        estimate(m, TrainingConfig(finetune="qlora", precision="bf16-mixed", nf4_quantizer="lightning"))
    tied = model_from_hf_config({"model_type": "llama", "vocab_size": 128256, "hidden_size": 2048,
                                 "intermediate_size": 8192, "num_hidden_layers": 16,
                                 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
                                 "tie_word_embeddings": True}, name="tied")
    with pytest.raises(ValueError, match="ties its head to the embedding"):
        estimate(tied, lightning)
    with pytest.raises(ValueError, match="needs finetune='qlora' on bitsandbytes"):
        TrainingConfig(finetune="lora", nf4_quantizer="lightning")
    with pytest.raises(ValueError, match="needs finetune='qlora' on bitsandbytes"):
        TrainingConfig(finetune="qlora", quant_storage="torchao-nf4", nf4_quantizer="lightning")
    with pytest.raises(ValueError, match="nf4_quantizer"):
        TrainingConfig(finetune="qlora", nf4_quantizer="unsloth")
