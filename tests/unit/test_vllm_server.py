"""hardex.vllm_server: GRPO rollouts from a vLLM server on GPUs of the job's own (TRL's server mode).

Here (no GPU) the split of the job's GPUs, the server's command line (checked against `trl vllm-serve`'s
own parser) and the refusal on a CPU are tested; the GPU test runs a 2-step run where CUDA and vLLM are."""

from __future__ import annotations

import copy

import pytest

from hardex.config import check_config
from hardex.vllm_server import ServerError, serve_rollouts, server_command, split_gpus


def test_the_server_takes_the_last_gpus_and_training_the_first():
    assert split_gpus(["4", "5", "6"], processes=2, server_gpus=1) == (["4", "5"], ["6"])
    assert split_gpus(["0", "1", "2", "3"], processes=2, server_gpus=2) == (["0", "1"], ["2", "3"])
    with pytest.raises(ServerError, match=r"needs 2 GPU\(s\) for training and 2 for the server; this job sees 3"):
        split_gpus(["0", "1", "2"], processes=2, server_gpus=2)


def test_the_command_is_one_trl_vllm_serve_parses():
    from trl import TrlParser
    from trl.scripts.vllm_serve import ScriptArguments

    g = {"vllm_server_gpus": 2, "vllm": {"gpu_memory_utilization": 0.85, "max_model_len": 1024}}
    cmd = server_command("Qwen/Qwen3-4B", g, port=8123)
    assert cmd[1:4] == ["-m", "trl.cli.main", "vllm-serve"]
    (args,) = TrlParser((ScriptArguments,)).parse_args_into_dataclasses(cmd[4:])
    assert (args.model, args.port, args.tensor_parallel_size) == ("Qwen/Qwen3-4B", 8123, 2)
    assert (args.gpu_memory_utilization, args.max_model_len, args.host) == (0.85, 1024, "127.0.0.1")


def test_on_a_cpu_server_rollouts_are_refused_before_anything_starts(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("HARDEX_GPUS", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi: no GPU
    with pytest.raises(ServerError, match="vllm-server needs (CUDA GPUs|vllm)"):
        with serve_rollouts("m", {"processes": 1, "vllm_server_gpus": 1}):
            pass
    with pytest.raises(ServerError, match="vllm-server needs CUDA GPUs"):
        with serve_rollouts("m", {"processes": 1, "vllm_server_gpus": 1}, command=["true"]):
            pass


def test_the_train_job_asks_for_the_servers_gpus_and_online_filtering_is_refused(smoke_config):
    cfg = copy.deepcopy(smoke_config)
    cfg["grpo"].update(rollouts="vllm-server", vllm_server_gpus=2)
    cfg["selection"]["online_strategies"] = []
    assert check_config(copy.deepcopy(cfg))["grpo"]["vllm_server_gpus"] == 2
    cfg["selection"]["online_strategies"] = ["hard"]
    from hardex.config import ConfigError

    with pytest.raises(ConfigError, match=r"samples with TRL's vLLM server \(grpo.rollouts: vllm-server\)"):
        check_config(cfg)


def test_server_rollouts_train_on_a_gpu(tmp_path, tiny_model, smoke_config):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs and vllm (no GPU here; the device tool runs it where a machine is lent)")
    pytest.importorskip("vllm")
    from hardex.training import train_grpo

    g = check_config(copy.deepcopy(smoke_config))["grpo"]
    g.update(rollouts="vllm-server", vllm_server_gpus=1, max_steps=2, save_steps=1, num_generations=4,
             prompts_per_step=2, max_completion_length=12, vllm={})
    rows = [{"prompt": f"Bob has? {i}\n", "answer": "(B)"} for i in range(4)]
    summary = train_grpo(str(tiny_model), rows, lambda c, a, p: float(len(c) % 2 == 0), g, 0, tmp_path / "run",
                         tmp_path / "run" / "final", tmp_path / "run" / "steps.parquet")
    assert summary["steps"] == 2


# ---- issue 64 G1: TRL syncs the server by merging the adapters into the frozen base and unmerging them ----

def sync_drift(dtype, cycles: int = 200) -> float:
    """The largest change of a frozen base weight, relative to the weights' mean size, after `cycles` of TRL's
    server sync of a PEFT model (merge_adapter, read the weights, unmerge_adapter: W += dW, then W -= dW) on a
    tiny Llama whose base loads in `dtype` and whose adapter moves the weights by about 4 %, as a trained one does."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    base = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2)).to(dtype)
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj"], init_lora_weights=False))
    proj = model.base_model.model.model.layers[0].self_attn.q_proj
    with torch.no_grad():
        proj.lora_B["default"].weight.mul_(0.01)  # PEFT's random B moves the weights 4x; a trained adapter far less
    weight = proj.base_layer.weight
    before = weight.detach().float().clone()
    for _ in range(cycles):
        model.merge_adapter()
        model.unmerge_adapter()
    return ((weight.detach().float() - before).abs().max() / before.abs().mean()).item()


def test_server_rollouts_with_lora_train_only_where_the_sync_keeps_the_base(smoke_config):
    import torch

    from hardex.config import ConfigError
    from hardex.precision import policy_dtype

    refused = []
    for precision in ("auto", "bf16", "fp16", "fp32"):
        cfg = copy.deepcopy(smoke_config)
        cfg["grpo"].update(rollouts="vllm-server", finetune="lora", precision=precision)
        cfg["selection"]["online_strategies"] = []
        try:
            grpo = check_config(cfg)["grpo"]
        except ConfigError:
            refused.append(precision)
            continue
        # what planning accepts keeps the base within float32's rounding (2^16 times finer than bfloat16's)
        assert sync_drift(policy_dtype(grpo, use_cpu=False)) < 1e-5, precision
    assert refused == ["auto", "bf16", "fp16"]  # auto is bf16 on every card vLLM serves LoRA on
    # what the refusal spares: in bfloat16 the round trips move the frozen base by several % of its weights
    assert sync_drift(torch.bfloat16) > 1e-2
