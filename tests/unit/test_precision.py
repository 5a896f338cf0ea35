"""Issue 43, items 1-5: the precision a run computes in, resolved once by the card's compute capability and passed
to every place that needs it; weights the optimizer updates kept in float32 (QLoRA adapters, full fine-tuning on a
GPU); rollout counts summed over processes; probe work of one precision never reused by another. A GPU is faked
where the mechanism runs on a CPU (hardex.precision.gpu_capability, torch.cuda.is_available)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import types

import pytest

from hardex import precision
from hardex.config import check_config
from hardex.precision import PrecisionError, resolve_precision

AMPERE, VOLTA = (8, 0), (7, 0)


@pytest.fixture
def card(monkeypatch):
    """card((major, minor)): this process's GPUs have that compute capability."""
    return lambda cap: monkeypatch.setattr(precision, "gpu_capability", lambda: cap)


@pytest.fixture
def grpo(smoke_config) -> dict:
    g = check_config(copy.deepcopy(smoke_config))["grpo"]
    g.update(max_steps=2, save_steps=2, num_generations=4, prompts_per_step=2, max_completion_length=8)
    return g


# ---- the card's precision: bf16 from compute capability 8.0, read without starting CUDA ----

def test_auto_is_bf16_on_a_card_with_bfloat16_and_fp32_on_an_older_one_whose_bf16_is_refused(card, caplog):
    card((9, 0))
    assert resolve_precision("auto", use_cpu=False) == "bf16" and resolve_precision("bf16", use_cpu=False) == "bf16"
    card(VOLTA)
    with caplog.at_level("WARNING", logger="hardex.precision"):
        assert resolve_precision("auto", use_cpu=False) == "fp32"
    assert "compute capability 7.0 has no bfloat16" in caplog.text  # the log says why auto did not take bf16
    assert resolve_precision("fp16", use_cpu=False) == "fp16" and resolve_precision("fp32", use_cpu=False) == "fp32"
    refusal = (r"^grpo.precision: bf16 needs a GPU of compute capability 8.0 or above \(bfloat16 in hardware\); "
               r"this one's is 7.0: set it to auto, fp32 or fp16$")
    with pytest.raises(PrecisionError, match=refusal):
        resolve_precision("bf16", use_cpu=False)


def test_the_transformers_generator_reads_auto_by_the_card(card):
    import torch

    from hardex.generation.hf import pick_dtype

    card(AMPERE)
    assert pick_dtype("auto", "cuda") == torch.bfloat16
    card(VOLTA)
    assert pick_dtype("auto", "cuda:0") == torch.float32 and pick_dtype("float16", "cuda") == torch.float16


def test_the_capability_comes_from_nvidia_smi_for_this_process_gpus_without_starting_cuda(monkeypatch):
    import torch

    def no_cuda(*a, **k):
        raise AssertionError("CUDA started: a vLLM engine started after this would fork a poisoned process")

    monkeypatch.setattr(torch.cuda, "get_device_capability", no_cuda)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(precision.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    smi = "0, GPU-aaaa-1111, 7.0\n1, GPU-bbbb-2222, 9.0\n2, GPU-cccc-3333, [N/A]\n"
    monkeypatch.setattr(precision.subprocess, "run", lambda cmd, **k: types.SimpleNamespace(stdout=smi))
    for visible, expected in [("1", (9, 0)), ("GPU-aaaa", (7, 0)), ("1,0", (7, 0)), ("MIG-x", (7, 0)), (None, (7, 0))]:
        if visible is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        assert precision.gpu_capability() == expected, visible
    monkeypatch.setattr(precision.shutil, "which", lambda name: None)
    assert precision.gpu_capability() is None and precision.gpu_bfloat16()  # unreadable: taken as bf16


# ---- item 4: accelerate's --mixed_precision and the server's --dtype from the resolved precision ----

@pytest.mark.parametrize("asked, cap, mixed, dtype", [
    ("fp32", AMPERE, "no", "float32"), ("bf16", AMPERE, "bf16", "bfloat16"), ("fp16", AMPERE, "fp16", "float16"),
    ("auto", AMPERE, "bf16", "bfloat16"), ("auto", VOLTA, "no", "float32")])
def test_the_launcher_and_the_server_compute_in_the_resolved_precision(tmp_path, card, asked, cap, mixed, dtype):
    from accelerate.commands.launch import launch_command_parser

    from hardex.launch import launch_command
    from hardex.vllm_server import server_command

    card(cap)
    resolved = resolve_precision(asked, use_cpu=False)  # as train_grpo hands it to the launcher
    cmd = launch_command(tmp_path / "spec.json", 2, "zero2", use_cpu=False, accumulation=2, precision=resolved)
    assert launch_command_parser().parse_args(cmd[3:]).mixed_precision == mixed  # TRL's zero2.yaml says bf16
    server = server_command("m", {"vllm_server_gpus": 1, "precision": asked}, port=8000)
    assert server[server.index("--dtype") + 1] == dtype


def test_bf16_on_an_old_card_is_refused_and_the_launcher_takes_only_a_resolved_precision(tmp_path, card):
    from hardex.launch import LaunchError, launch_command

    card(VOLTA)
    with pytest.raises(PrecisionError, match="^grpo.precision: bf16 needs"):
        resolve_precision("bf16", use_cpu=False)
    with pytest.raises(LaunchError, match="resolved"):
        launch_command(tmp_path / "spec.json", 2, "multi_gpu", use_cpu=False, precision="auto")


def test_a_run_in_several_processes_launches_them_in_the_precision_its_log_names(tmp_path, tiny_model, grpo,
                                                                                 monkeypatch, card):
    """train_grpo resolves grpo.precision once; the spec the processes read and accelerate's --mixed_precision
    both carry the value the log names (was: bf16 whatever grpo.precision said)."""
    import torch

    from hardex import launch
    from hardex.controls import RewardSpec
    from hardex.training import TrainingError, train_grpo

    card(AMPERE)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU node, as far as precision goes
    launched = {}

    def fake_run(cmd, **kw):
        launched["cmd"] = cmd
        return types.SimpleNamespace(returncode=0)

    monkeypatch.setattr(launch.subprocess, "run", fake_run)
    lines = []
    g = {**grpo, "processes": 2, "precision": "fp32", "rollouts": "trl"}
    rows = [{"prompt": f"q{i}", "answer": "(A)"} for i in range(4)]
    with pytest.raises(TrainingError, match="stopped at step 0"):  # nothing trained: the launch was faked
        train_grpo(str(tiny_model), rows, RewardSpec("swaps", "lenient", 1.0), g, 0, tmp_path / "run",
                   tmp_path / "final", tmp_path / "steps.parquet", log=lines.append)
    assert "precision fp32 (grpo.precision)" in lines
    cmd = launched["cmd"]
    assert cmd[cmd.index("--mixed_precision") + 1] == "no"
    spec = json.loads((tmp_path / "run" / "checkpoints" / "launch.json").read_text())
    assert spec["grpo"]["precision"] == "fp32"


# ---- items 1, 2: the weights the optimizer updates are float32 ----

def fit_until_the_optimizer(monkeypatch, tmp_path, tiny_model, g, quantized: bool = False) -> dict:
    """hardex.training.fit up to TRL's train(), where the optimizer would be created: the dtypes of the
    trainable parameters then, and the trainer's step counts function."""
    from transformers import AutoModelForCausalLM
    from trl import GRPOTrainer

    from hardex import training

    seen = {}
    load = AutoModelForCausalLM.from_pretrained

    def from_pretrained(*a, **k):
        model = load(*a, **k)
        if quantized:  # what TRL reads to treat a model as 4-bit (bitsandbytes' weights need a GPU)
            model.is_loaded_in_4bit = True
        return model

    def train(self, resume_from_checkpoint=None):
        assert self.optimizer is None  # created by train(): the parameters it will hold are these
        seen["trainable"] = {str(p.dtype) for p in self.model.parameters() if p.requires_grad}
        seen["counts"] = next((cb.counts for cb in self.callback_handler.callbacks if hasattr(cb, "counts")), None)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", from_pretrained)
    monkeypatch.setattr(GRPOTrainer, "train", train)
    rows = [{"prompt": f"Alice:red Bob:blue. Swaps: none. Bob has? {i}\n", "answer": "(B)"} for i in range(4)]
    (tmp_path / "ckpt").mkdir()
    training.fit(str(tiny_model), rows, lambda c, a, p: 1.0, g, 0, tmp_path / "ckpt", None, g["max_steps"], {})
    return seen


def test_qlora_adapters_train_in_float32(tmp_path, tiny_model, grpo, monkeypatch, one_torch_thread):
    """TRL 1.16 casts a quantized model's trainable parameters to bfloat16 (grpo_trainer.py, QLoRA's recipe);
    torch's AdamW keeps no float32 copy, so hardex casts them back before the optimizer exists."""
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    g = {**grpo, "finetune": "lora", "lora": lora, "precision": "fp32", "rollouts": "trl"}
    seen = fit_until_the_optimizer(monkeypatch, tmp_path, tiny_model, g, quantized=True)
    assert seen["trainable"] == {"torch.float32"}


GPU = pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU (tools/gpu-smoke.sh)")


@GPU
def test_qlora_adapters_of_a_real_4bit_base_train_in_float32(tmp_path, tiny_model, grpo, monkeypatch):
    pytest.importorskip("bitsandbytes")
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    g = {**grpo, "finetune": "lora", "lora": lora, "quantization": "4bit", "precision": "auto", "rollouts": "trl"}
    assert fit_until_the_optimizer(monkeypatch, tmp_path, tiny_model, g)["trainable"] == {"torch.float32"}


def test_full_fine_tuning_keeps_float32_weights_on_a_gpu_as_on_a_cpu(card):
    """policy_dtype: the weights AdamW updates stay float32 under bf16 or fp16 autocast, on a GPU too; LoRA's
    frozen base loads in the precision's own 16 bits (fp16 no longer loads bfloat16)."""
    import torch

    from hardex.precision import policy_dtype

    card(AMPERE)
    for use_cpu in (False, True):
        for asked in ("auto", "bf16", "fp16", "fp32"):
            assert policy_dtype({"finetune": "full", "precision": asked}, use_cpu=use_cpu) == torch.float32
    lora = {"finetune": "lora"}
    assert policy_dtype({**lora, "precision": "bf16"}, use_cpu=False) == torch.bfloat16
    assert policy_dtype({**lora, "precision": "fp16"}, use_cpu=False) == torch.float16
    assert policy_dtype({**lora, "precision": "fp32"}, use_cpu=False) == torch.float32


def test_adamw_moves_every_weight_of_a_full_fine_tune_at_the_presets_learning_rate(card):
    """Four AdamW steps at lr 5e-6 on weights loaded as policy_dtype gives a GPU run: every entry moves
    (in bfloat16, the old GPU dtype, about none does: the steps are far below bfloat16's spacing)."""
    import torch

    from hardex.precision import policy_dtype

    card(AMPERE)
    torch.manual_seed(0)
    start = 0.02 * torch.randn(64, 64)
    w = torch.nn.Parameter(start.to(policy_dtype({"finetune": "full", "precision": "bf16"}, use_cpu=False), copy=True))
    opt = torch.optim.AdamW([w], lr=5e-6, weight_decay=0.0)
    for _ in range(4):
        w.grad = torch.randn_like(w)
        opt.step()
    moved = (w.detach().float() != start.to(w.dtype).float()).float().mean().item()
    assert moved > 0.99, f"{moved:.0%} of the entries moved"


# ---- item 3: TRL's rollouts counted once over the processes ----

WORKER = """
import json, sys, torch, torch.distributed as dist
from hardex.checkpoints import summed_over_processes
from hardex.training import trl_rollout_counts
rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
counts = trl_rollout_counts({"prompts_per_step": 4, "num_generations": 6})()
total = summed_over_processes(counts, torch.device("cpu"))
if rank == 0:
    open(out, "w").write(json.dumps(total))
dist.destroy_process_group()
"""


def test_trl_rollouts_are_counted_once_over_two_processes(tmp_path):
    """In a 2-process gloo group, each rank's count of TRL's rollouts summed over the ranks is the step's
    prompts_per_step x num_generations (was: the global count on every rank, summed: twice it)."""
    from hardex.launch import free_port

    out = tmp_path / "total.json"
    port = str(free_port())
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(r), port, str(out)], env=env) for r in (0, 1)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert json.loads(out.read_text()) == {"rollouts_generated": 4 * 6, "rollouts_discarded": 0}


def test_fit_counts_trls_rollouts_with_the_per_process_share(tmp_path, tiny_model, grpo, monkeypatch,
                                                             one_torch_thread):
    from hardex import training

    made = []
    real = training.trl_rollout_counts
    monkeypatch.setattr(training, "trl_rollout_counts", lambda g: made.append(g) or real(g))
    seen = fit_until_the_optimizer(monkeypatch, tmp_path, tiny_model, {**grpo, "rollouts": "trl"})
    assert made and seen["counts"]() == {"rollouts_generated": grpo["prompts_per_step"] * grpo["num_generations"],
                                         "rollouts_discarded": 0}  # one process: the whole step


# ---- item 5: probe work of a bf16 run is not reused by an fp32 run ----

def test_the_work_identity_of_a_bf16_and_an_fp32_probe_differ(tiny_model, monkeypatch, card):
    from hardex import devices
    from hardex.job import work_identity
    from hardex.tasks import get_task

    model = {"path": str(tiny_model), "dtype": "auto"}
    task = get_task("swaps", "lenient")
    generation = {"backend": "transformers"}
    card(AMPERE)
    monkeypatch.setattr(devices, "pick_device", lambda device=None: "cuda")
    gpu = work_identity(model, task, generation)
    monkeypatch.setattr(devices, "pick_device", lambda device=None: "cpu")
    monkeypatch.setenv("HARDEX_CPU_BFLOAT16", "0")
    cpu = work_identity(model, task, generation)
    assert (gpu["dtype"], cpu["dtype"]) == ("bfloat16", "float32") and gpu != cpu
    pinned = {**model, "dtype": "float32"}
    assert work_identity(pinned, task, generation)["dtype"] == "float32"
