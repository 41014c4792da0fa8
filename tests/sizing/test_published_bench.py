"""bench/estimator_published.py on published rows it was not written for (the kept-aside runs
come in the same cases format): rows of a known kind are configured from what the row says,
and a row it cannot configure is listed as unmodelled with the reason, never guessed and
never a crash."""

import json

from tests.sizing.test_margin import published


def _cases(tmp_path, rows_by_case: dict) -> list:
    """(row, evaluate(row)) of each given case's rows, from a cases file holding those rows."""
    cases = json.loads(published.CASES_PATH.read_text())
    for case in cases["cases"]:
        if case["id"] in rows_by_case:
            case["published"]["rows"] = rows_by_case[case["id"]]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    return [(row, published.evaluate(row)) for row in published.rows(path) if row.case in rows_by_case]


FOUNDRY = "llm_foundry_mpt_throughput"


def test_every_llm_foundry_size_sharding_and_gpu_is_configured_from_the_row(tmp_path):
    rows = [["1b", 2048, 128, "h100_80gb", 40.6, 40.6, 12, 1536, 44123, "amp_bf16", "SHARD_GRAD_OP", False,
             0],
            ["125m", 4096, 8, "a100_40gb", 46.08, 46.08, 16, 256, 118396, "bf16 PURE", "FULL_SHARD", False,
             0]]
    (grad_op, grad_op_out), (small, small_out) = _cases(tmp_path, {FOUNDRY: rows})
    assert grad_op.parallel == {"dp": 128, "sharding": "fsdp-shard-grad-op"}
    assert (grad_op.model.hidden_size, grad_op.model.num_layers, grad_op.model.num_heads) == (2048, 24, 16)
    assert small.gpu.memory_bytes == 40 * 10**9 and small.gpu.memory_bandwidth_gbps == 1555
    assert small.training["precision"] == "bf16" and small.training["loss"] == "fused"
    for out in (grad_op_out, small_out):
        published_tps, ours, error = out["throughput"]
        assert ours > 0 and error == (ours - published_tps) / published_tps


def test_a_row_it_cannot_configure_is_listed_unmodelled_with_the_reason(tmp_path):
    results = _cases(tmp_path, {
        FOUNDRY: [["175b", 2048, 512, "h100_80gb", 40, 40, 1, 512, 100, "amp_bf16", "FULL_SHARD", True,
                   0],
                  ["7b", 2048, 8, "mi300x", 40, 40, 6, 48, 1000, "amp_bf16", "HYBRID_SHARD", False, 0]],
        "torchtitan_llama3.1_8B_fsdp_8gpu": [["FSDP + async TP", 6000, 70.0]],
        "peft_metamathqa_llama3.2_3B": [["prefix tuning", 1, 2, 3, 4], ["LoRA r=16 on q,k,v,o", 1, 2, 3, 4]],
    })
    why = {row.label: out.get("unmodelled") for row, out in results}
    assert why["175b s2048 512xh100 ckpt amp_bf16"] == ["no configuration for model size '175b'"]
    assert why["7b s2048 8xmi300x amp_bf16 HYBRID_SHARD"] == [
        "no configuration for sharding 'HYBRID_SHARD', GPU 'mi300x'"]
    assert why["8 GPUs FSDP + async TP"] == ["no configuration for 'FSDP + async TP'"]
    assert why["prefix tuning"] == ["no configuration for the PEFT method 'prefix tuning'"]
    lora = next(row for row, _ in results if row.label == "LoRA r=16 on q,k,v,o")
    assert lora.training["lora_rank"] == 16
    assert lora.training["lora_targets"] == ("q_proj", "k_proj", "v_proj", "o_proj")
    assert why["LoRA r=16 on q,k,v,o"] is None  # configured and estimated


def test_other_implementations_of_the_flashattention_readme_are_rows_too():
    rows = {row.label: (row, published.evaluate(row)) for row in published.rows()
            if row.case == "flashattention_readme"}
    megatron, out = rows["GPT3-2.7B Megatron 8xA100"]
    assert megatron.training["attention"] == "eager" and megatron.training["stack"] == "megatron"
    assert "throughput" in out
    hf, out = rows["GPT3-125M HF 8xA100"]
    assert "Hugging Face GPT-2 modules" in out["unmodelled"][0]
    assert "GPT3-2.7B HF 8xA100" not in rows  # published as OOM: no figure to compare


def test_a_malformed_row_is_unmodelled_and_the_rest_of_its_case_still_runs(tmp_path):
    good = ["7b", 2048, 8, "h100_80gb", 46.44, 46.44, 6, 48, 10643, "amp_bf16", "FULL_SHARD", False, 0]
    results = _cases(tmp_path, {
        FOUNDRY: [good[:12], good],  # a row with a column missing, then a whole one
        "torchtitan_llama3.1_8B_fsdp_8gpu": [["FSDP", 5762, 82.4, "extra"]],
    })
    first, second, titan = results
    assert first[0].label == "row 1" and "cannot read the row" in first[1]["unmodelled"][0]
    assert "throughput" in second[1]  # the whole row is configured and estimated
    assert titan[0].label == "row 1" and "cannot read the row" in titan[1]["unmodelled"][0]


def test_a_case_the_file_lacks_is_skipped_and_a_figure_that_is_no_number_is_unmodelled(tmp_path):
    cases = json.loads(published.CASES_PATH.read_text())
    for case in cases["cases"]:
        if case["id"] == "flashattention_readme":
            case["published"]["throughput_8xA100_tokens_per_s"]["GPT3-125M"] = "OOM"
    cases["cases"] = [c for c in cases["cases"] if c["id"] != "narayanan_table1_weak_scaling"]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    rows = published.rows(path)
    assert not [r for r in rows if r.case == "narayanan_table1_weak_scaling"]
    oom = next(r for r in rows if r.label == "GPT3-125M 8xA100")
    assert published.evaluate(oom)["unmodelled"] == ["no throughput figure in 'OOM'"]
    published.main(["--cases", str(path)])  # prints its tables
