"""Issue 35: what would break on a first multi-GPU, 4-bit or server-mode run, checked where the mechanism runs
on a CPU (a gloo group, a fake Slurm allocation, a stand-in server, the config check), with the GPU tests beside
them (they skip without CUDA; tools/gpu-smoke.sh runs the same on a lent GPU)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

from hardex.config import ConfigError, check_config

GPU = pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU (tools/gpu-smoke.sh)")


# ---- 1. the step logger's reduction: its tensor on the process's device (nccl takes CUDA tensors only) ----

@pytest.fixture
def one_process_group(monkeypatch):
    import torch.distributed as dist

    def start(backend: str):
        from hardex.launch import free_port

        monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
        monkeypatch.setenv("MASTER_PORT", str(free_port()))
        dist.init_process_group(backend, rank=0, world_size=1)

    yield start
    if dist.is_initialized():
        dist.destroy_process_group()


def test_the_reduction_runs_in_a_one_process_group_on_the_devices_tensor(one_process_group, monkeypatch):
    import torch
    import torch.distributed as dist

    from hardex.checkpoints import summed_over_processes

    one_process_group("gloo")
    seen = []
    real = dist.all_reduce

    def nccl_like(tensor, *a, **k):  # nccl refuses a tensor off the process's device; record where it lies
        seen.append(tensor.device)
        return real(tensor, *a, **k)

    monkeypatch.setattr(dist, "all_reduce", nccl_like)
    counts = {"rollouts_generated": 16, "rollouts_discarded": 4, "tokens_generated": 99, "filter_capped": True}
    assert summed_over_processes(counts, torch.device("cpu")) == counts
    assert seen == [torch.device("cpu")]  # reduced (a 1-process group too), on the device it was given


def test_the_step_recorder_reduces_on_the_trainers_device(tmp_path, monkeypatch):
    """Driven as TRL's trainer drives it (on_step_begin, on_log with the step's logs): the counts are reduced on
    the device of the trainer's args (a CUDA device under nccl), and the step's row is written."""
    from types import SimpleNamespace

    from hardex import checkpoints

    handed = []

    def reduce(counts, device=None):
        handed.append(device)
        return counts

    monkeypatch.setattr(checkpoints, "summed_over_processes", reduce)
    device = object()  # the trainer's own device, whatever it is
    recorder = checkpoints.step_recorder(tmp_path / "steps.jsonl", lambda: {"rollouts_generated": 8})
    state = SimpleNamespace(global_step=3, is_world_process_zero=True)
    args = SimpleNamespace(device=device)
    recorder.on_step_begin(args, state, None)
    recorder.on_log(args, state, None, logs={"reward": 0.5, "loss": 0.1, "grad_norm": 1.0})
    assert handed == [device]
    row = json.loads((tmp_path / "steps.jsonl").read_text())
    assert row["step"] == 3 and row["rollouts_generated"] == 8


@GPU
def test_the_reduction_runs_over_nccl_on_a_gpu(one_process_group):
    import torch

    from hardex.checkpoints import summed_over_processes

    one_process_group("nccl")
    torch.cuda.set_device(0)
    assert summed_over_processes({"rollouts_generated": 3}, torch.device("cuda", 0)) == {"rollouts_generated": 3}


# ---- 2, 8. combinations refused at planning, each in one line naming the key ----

@pytest.mark.parametrize("change, match", [
    (dict(processes=2, distributed="zero3", rollouts="hardex", prompts_per_step=4),
     r"^grpo.rollouts: hardex samples the unwrapped model, whose weights grpo.distributed: zero3 shards"),
    (dict(processes=2, distributed="fsdp2", rollouts="vllm", prompts_per_step=4),
     r"^grpo.rollouts: vllm samples the unwrapped model"),
    (dict(processes=2, prompts_per_step=3, num_generations=4, gradient_accumulation_steps=1),
     r"^grpo.prompts_per_step: 3 prompts do not split into whole groups over 2 processes"),
    (dict(processes=2, quantization="4bit", finetune="lora", prompts_per_step=4),
     r"^grpo.quantization: 4bit loads every process's model on the first GPU"),
    (dict(quantization="4bit", finetune="lora", rollouts="vllm"),
     r"^grpo.quantization: 4bit with rollouts: vllm would add the LoRA deltas to packed 4-bit weights"),
])
def test_gpu_combinations_that_cannot_train_are_refused(smoke_config, change, match):
    cfg = copy.deepcopy(smoke_config)
    cfg["grpo"].update(change)
    with pytest.raises(ConfigError, match=match) as err:
        check_config(cfg)
    assert "\n" not in str(err.value)


def test_sharding_with_trls_own_rollouts_and_whole_groups_are_allowed(smoke_config):
    cfg = copy.deepcopy(smoke_config)
    cfg["grpo"].update(processes=2, distributed="zero3", rollouts="trl", prompts_per_step=4)
    cfg["selection"]["online_strategies"] = []
    check_config(cfg)


# ---- 3. optional packages named at planning, with the command that installs them ----

def test_missing_gpu_packages_are_named_with_their_install_command(smoke_config):
    from hardex.gpu_packages import jobs_run, missing_packages, needed_packages

    cfg = copy.deepcopy(smoke_config)
    cfg["grpo"].update(quantization="4bit", finetune="lora")
    cfg["models"]["tiny"]["grpo"] = {"processes": 2, "distributed": "zero2", "quantization": "none",
                                     "rollouts": "vllm-server", "precision": "fp32"}  # LoRA on a bf16 base: refused
    cfg["selection"]["online_strategies"] = []
    cfg = check_config(cfg)
    assert needed_packages(cfg) == {"deepspeed": "models.tiny.grpo.distributed: zero2",
                                    "vllm": "models.tiny.grpo.rollouts: vllm-server"}
    cfg["models"]["tiny"]["grpo"] = {"quantization": "4bit"}
    lines = missing_packages(cfg)
    if __import__("importlib").util.find_spec("bitsandbytes") is None:
        assert lines == ["models.tiny.grpo.quantization: 4bit needs bitsandbytes, which is not installed: "
                         "pip install 'hardex[quantization]'  (or pip install bitsandbytes)"]
    assert not jobs_run(["snakemake", "-n"]) and not jobs_run(["snakemake", "-pn", "--cores", "1"])
    assert not jobs_run(["snakemake", "--containerize"]) and jobs_run(["snakemake", "--cores", "4", "-p"])


# ---- 4. GPU claims inside a Slurm allocation of several GPUs ----

def test_jobs_inside_a_slurm_allocation_of_four_gpus_claim_distinct_ones(monkeypatch, tmp_path):
    from hardex.devices import claim_gpus

    monkeypatch.delenv("HARDEX_GPUS", raising=False)
    monkeypatch.setenv("HARDEX_GPU_LOCKS", str(tmp_path / "locks"))
    monkeypatch.setenv("SLURM_JOB_ID", "4242")  # an salloc of a node's GPUs, Snakemake running local jobs in it
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    with claim_gpus(1, log=lambda _: None) as a:
        os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"  # a second job of the same allocation
        with claim_gpus(1, log=lambda _: None) as b:
            assert a != b
    assert (tmp_path / "locks" / "slurm-4242").is_dir()  # locks kept per allocation


# ---- 5. zero1-3 with the trainer's own accumulation ----

def test_deepspeed_is_launched_with_the_trainers_accumulation(tmp_path):
    from accelerate.commands.launch import launch_command_parser

    from hardex.launch import launch_command

    cmd = launch_command(tmp_path / "spec.json", 2, "zero1", use_cpu=False, accumulation=8)
    args = launch_command_parser().parse_args(cmd[3:])
    assert args.gradient_accumulation_steps == 8  # accelerate exports it; TRL's zero1.yaml says 1
    assert "--gradient_accumulation_steps" not in launch_command(tmp_path / "s", 2, "multi_gpu", use_cpu=False)


# ---- 6. server mode: the training GPUs narrowed before CUDA starts; a server that dies is noticed ----

HEALTH_SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_server_mode_narrows_the_training_gpus_before_cuda_is_touched(monkeypatch):
    import torch

    from hardex.launch import free_port
    from hardex.vllm_server import serve_rollouts

    seen = []
    for name in ("is_available", "device_count", "init", "current_device"):
        real = getattr(torch.cuda, name)
        monkeypatch.setattr(torch.cuda, name, lambda *a, _real=real, _n=name, **k: (
            seen.append((_n, os.environ.get("CUDA_VISIBLE_DEVICES"))), _real(*a, **k))[1])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")  # the job's claimed GPUs: training 4, the server 5
    port = free_port()
    with serve_rollouts("m", {"processes": 1, "vllm_server_gpus": 1}, log=lambda _: None,
                        command=[sys.executable, "-c", HEALTH_SERVER, str(port)], port=port) as served:
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "4" and served["vllm_server_port"] == port
        torch.cuda.is_available()  # the trainer, after
    assert seen and all(visible == "4" for _, visible in seen), seen


def test_a_server_that_dies_at_start_fails_the_job_at_once(monkeypatch):
    import time

    from hardex.vllm_server import ServerError, serve_rollouts

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    t0 = time.time()
    with pytest.raises(ServerError, match="exited with status 3 before it answered"):
        with serve_rollouts("m", {"processes": 1, "vllm_server_gpus": 1}, log=lambda _: None,
                            command=[sys.executable, "-c", "import sys; sys.exit(3)"]):
            pass
    assert time.time() - t0 < 30


# ---- 7. ZeRO 3: the GRPOConfig (DeepSpeed's init hook) before the model loads ----

def test_the_trainer_config_is_made_before_the_model_loads(monkeypatch, tmp_path, tiny_model, smoke_config):
    import transformers
    import trl

    from hardex.training import fit

    order = []
    real_config, real_load = trl.GRPOConfig, transformers.AutoModelForCausalLM.from_pretrained

    class Stop(Exception):
        pass

    def config(*a, **k):
        order.append("GRPOConfig")
        return real_config(*a, **k)

    def load(*a, **k):
        order.append("from_pretrained")
        raise Stop

    monkeypatch.setattr(trl, "GRPOConfig", config)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", load)
    g = check_config(copy.deepcopy(smoke_config))["grpo"]
    with pytest.raises(Stop):
        fit(str(tiny_model), [{"prompt": "p", "answer": "a"}] * 8, lambda *a: 0.0, g, 0, tmp_path, None, 2, {})
    assert order == ["GRPOConfig", "from_pretrained"]


def test_the_smoke_script_runs_its_cpu_checks(tmp_path):
    from tests.support import ROOT

    res = subprocess.run(["bash", str(ROOT / "tools" / "gpu-smoke.sh"), "--cpu"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env={**os.environ, "PYTHON": sys.executable, "GPU_SMOKE_DIR": str(tmp_path)})
    # (the script puts src/ first on PYTHONPATH and keeps the rest: an offline host's packages live there)
    out = res.stdout
    assert res.returncode == 0, out[-3000:] + res.stderr[-3000:]
    assert "FAIL" not in out.replace("0 FAIL", "")
    for check in ("versions", "nccl-reduction", "cuda-order", "grpo-1proc", "grpo-accelerate", "grpo-4bit", "vllm"):
        assert any(line.split()[1:2] == [check] for line in out.splitlines() if line.startswith(("PASS", "SKIP"))), check
    assert "SUMMARY" in out


def test_the_first_run_check_runs_at_tiny_sizes(tmp_path):
    """tools/gpu-smoke.sh --first-run --tiny: every check of the real-size first run, its code run at stand-in sizes
    (a check that cannot run here skips with its reason; none fails), on a host with no network and an empty model
    cache, as a lent GPU machine or a compute node is: its first GPU run failed four checks there."""
    from tests.support import ROOT

    sys.path.insert(0, str(ROOT / "tools"))
    from first_run_check import CHECKS

    res = subprocess.run(["bash", str(ROOT / "tools" / "gpu-smoke.sh"), "--first-run", "--tiny", "--budget", "900"],
                         capture_output=True, text=True, timeout=900, cwd=ROOT,
                         env={**os.environ, "PYTHON": sys.executable, "GPU_SMOKE_DIR": str(tmp_path),
                              "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-cache")})
    out = res.stdout
    assert res.returncode == 0, out[-3000:] + res.stderr[-3000:]
    results = {line.split()[1]: line.split()[0] for line in out.splitlines() if line.startswith(("PASS", "SKIP", "FAIL"))}
    assert set(results) == set(CHECKS), out
    assert "FAIL" not in results.values(), out
    # what a CPU runs, it must pass: only ZeRO (CUDA and deepspeed) may skip
    assert {name for name, status in results.items() if status == "SKIP"} <= {"zero3-1proc"}, out
    assert "weights saved in float32" in out and "adapters float32" in out
