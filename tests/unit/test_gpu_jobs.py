"""A GPU job's setup, on a CPU: a vLLM engine that starts without CUDA in the job's process and spawns its
own; jobs that share a card held to their slice (vLLM's memory share, torch's allocator cap); a job that
asked for a GPU and whose torch sees none stopped with the driver's and torch's CUDA versions; the built
model warm-started on the GPU; hub models fetched without their original/*.pth copies.

Nothing here runs vLLM or CUDA: a stand-in `vllm` records what the backend hands it, and torch.cuda's calls
are recorded where the test says so."""

from __future__ import annotations

import importlib.machinery
import os
import sys
import types

import pytest
import torch

from hardex import devices
from hardex.generation import Sampling
from hardex.generation.vllm_backend import VLLMGenerator, engine_kwargs
from hardex.job import job_log


class CharTokenizer:
    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [ord(c) for c in text]}


@pytest.fixture
def gpu_vllm(monkeypatch):
    """A stand-in `vllm` on a GPU build: its engines record the multiprocessing method and whether this
    process had touched torch.cuda when they started."""
    engines, cuda_calls = [], []

    class LLM:
        def __init__(self, **kw):
            engines.append({"kw": kw, "method": os.environ.get("VLLM_WORKER_MULTIPROC_METHOD"),
                            "cuda_calls": list(cuda_calls)})

        def generate(self, prompts, params, use_tqdm=True, lora_request=None):
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text="x", token_ids=[1])]) for _ in prompts]

    vllm = types.ModuleType("vllm")
    vllm.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    vllm.LLM, vllm.SamplingParams = LLM, lambda **kw: kw
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: False)  # vLLM's CUDA platform (NVML)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)
    # each of these starts CUDA's driver in this process, or initializes CUDA
    for name in ("is_available", "device_count", "init", "_lazy_init", "mem_get_info", "get_device_capability"):
        monkeypatch.setattr(torch.cuda, name, lambda *a, _name=name, **k: cuda_calls.append(_name) or 1)
    monkeypatch.delenv("VLLM_WORKER_MULTIPROC_METHOD", raising=False)
    return engines


@pytest.fixture
def shared_card(monkeypatch, tmp_path):
    """A fake node of one GPU that four jobs share (HARDEX_JOBS_PER_GPU=4)."""
    monkeypatch.setenv("HARDEX_GPUS", "0")
    monkeypatch.setenv("HARDEX_JOBS_PER_GPU", "4")
    monkeypatch.setenv("HARDEX_GPU_LOCKS", str(tmp_path / "locks"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("HARDEX_ALLOW_CPU", raising=False)


def fake_job(tmp_path, gpu: int):
    """What Snakemake hands a script: its log, rule and resources."""
    return types.SimpleNamespace(log=[str(tmp_path / "job.log")], rule="probe", wildcards={},
                                 resources=types.SimpleNamespace(gpu=gpu))


# ---- 6. fork safety: the engine starts before anything touches CUDA here, and spawns its processes ----

def test_a_gpu_engine_starts_with_spawn_and_without_cuda_in_this_process(gpu_vllm):
    gen = VLLMGenerator("m", tokenizer=CharTokenizer(), progress=False)
    gen.generate(["q"], 2, Sampling(1.0, 1.0, 4), seed=0)
    (engine,) = gpu_vllm
    assert engine["cuda_calls"] == []  # torch.cuda.is_available() poisons a fork while is_initialized() is False
    assert engine["method"] == "spawn"  # vLLM would fork: it checks is_initialized() alone
    assert "VLLM_WORKER_MULTIPROC_METHOD" not in os.environ  # put back once the engine is up
    assert engine["kw"]["gpu_memory_utilization"] == 0.9 and "enable_chunked_prefill" not in engine["kw"]


def test_a_users_own_multiprocessing_method_is_kept_and_a_cpu_engine_forks(gpu_vllm, monkeypatch):
    from hardex.generation.vllm_backend import engine_environment

    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "forkserver")
    VLLMGenerator("m", tokenizer=CharTokenizer(), progress=False).generate(["q"], 1, Sampling(1.0, 1.0, 4))
    assert gpu_vllm[0]["method"] == "forkserver"
    monkeypatch.delenv("VLLM_WORKER_MULTIPROC_METHOD")
    assert engine_environment("cpu") == {}  # no CUDA to break: vLLM's own choice stands
    assert engine_environment("cuda", in_process=True) == {"VLLM_WORKER_MULTIPROC_METHOD": "spawn",
                                                           "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
                                                           "VLLM_CPU_OMP_THREADS_BIND": "nobind"}


# ---- 7. jobs sharing a card: each held to its slice ----

def test_a_vllm_engine_on_a_shared_card_takes_its_share(gpu_vllm, shared_card):
    with devices.claim_gpus(1, log=lambda _: None):
        assert devices.gpu_share() == 0.25
        VLLMGenerator("m", tokenizer=CharTokenizer(), progress=False).generate(["q"], 1, Sampling(1.0, 1.0, 4))
        with pytest.raises(ValueError, match=r"generation.vllm.gpu_memory_utilization 0.5 is more than this job's "
                                             r"share of its GPU, 0.25 .*set it to 0.25 or less"):
            VLLMGenerator("m", tokenizer=CharTokenizer(), progress=False, gpu_memory_utilization=0.5).generate(
                ["q"], 1, Sampling(1.0, 1.0, 4))
    assert gpu_vllm[0]["kw"]["gpu_memory_utilization"] == pytest.approx(0.9 / 4)
    # beside a trainer (grpo.rollouts: vllm) the engine's usual 0.3 is of the job's share too; a CPU has no share
    assert engine_kwargs("m", device="cuda", colocated=True, gpu_share=0.25)["gpu_memory_utilization"] == 0.075
    assert engine_kwargs("m", device="cpu", gpu_share=0.25)["gpu_memory_utilization"] == 0.3


def test_a_job_on_a_shared_card_caps_torchs_allocator_when_cuda_starts(shared_card, monkeypatch, tmp_path):
    queued, fractions = [], []
    monkeypatch.setattr(devices, "cuda_status", lambda: {"torch": "2.13.0+cu128", "cuda": "12.8", "gpus": 1,
                                                         "warning": ""})
    monkeypatch.setattr(torch.cuda, "_lazy_call", queued.append)  # torch's queue for the first CUDA use
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    card = types.SimpleNamespace(total_memory=80 * 2**30)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: card)
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda f, i: fractions.append((f, i)))
    with job_log(fake_job(tmp_path, gpu=1)):
        assert len(queued) == 1 and fractions == []  # nothing starts CUDA at the job's start
        queued[0]()  # CUDA starts: the cap applies to each GPU the job sees
    assert fractions == [(pytest.approx(0.25 - 0.5 / 80), 0)]  # its fourth, less its CUDA context's 0.5 GiB
    assert "GPUs 0 claimed, 1/4 of each" in (tmp_path / "job.log").read_text()
    monkeypatch.setenv("HARDEX_JOBS_PER_GPU", "1")  # a card of its own: no cap
    with job_log(fake_job(tmp_path, gpu=1)):
        assert len(queued) == 1


def test_a_vllm_server_and_the_transformers_generator_keep_to_the_jobs_share(shared_card, monkeypatch):
    """The server's engine is sized from the share as an in-process one is; the transformers generator sizes its
    batches from the slice left to it, not from the whole card's free memory."""
    from hardex.vllm_server import server_command

    cmd = server_command("m", {"vllm_server_gpus": 1, "vllm": {}, "precision": "fp32"}, port=1)
    assert float(cmd[cmd.index("--gpu_memory_utilization") + 1]) == pytest.approx(0.9 / 4)
    with pytest.raises(ValueError, match="more than this job's share"):
        server_command("m", {"vllm_server_gpus": 1, "vllm": {"gpu_memory_utilization": 0.5}, "precision": "fp32"}, 1)

    gib = 2**30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (70 * gib, 80 * gib))  # a nearly free card
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 2 * gib)  # this job's weights
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 2 * gib)
    gen = fake_llama_generator()
    # 17.5 GiB of its slice are left (a fourth of 80 less its CUDA context's 0.5 GiB, less the 2 reserved); the
    # card's 70 GiB free are not its
    assert gen.effective_token_budget() == int(0.7 * 17.5 * gib / LLAMA_KV_PER_TOKEN)


#: a KV cache position of fake_llama_generator's model in bfloat16: keys and values, 32 layers, 8 heads of 128
LLAMA_KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2


def fake_llama_generator():
    """An HFGenerator on cuda:0 that only sizes batches: a Llama-8B-shaped config, no weights."""
    from hardex.generation.hf import HFGenerator

    gen = HFGenerator.__new__(HFGenerator)
    gen.device, gen.dtype, gen.token_budget, gen._torch = "cuda:0", torch.bfloat16, 10**9, torch
    text_config = types.SimpleNamespace(num_key_value_heads=8, head_dim=128, num_hidden_layers=32,
                                        num_attention_heads=32, hidden_size=4096)
    gen.model = gen.base = types.SimpleNamespace(config=types.SimpleNamespace(get_text_config=lambda: text_config))
    return gen


def test_the_allocators_cached_but_free_blocks_count_as_free_for_rollouts(shared_card, monkeypatch):
    """Issue 64 G2: after a train step, torch's allocator keeps the freed activations and gradients reserved; the
    rollout generator's batches may use them (the allocator hands them out before asking the card), so its KV
    budget counts reserved less allocated as free, on a shared card and on a card of its own."""
    gib = 2**30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (70 * gib, 80 * gib))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 10 * gib)  # weights + cached blocks
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 2 * gib)  # weights
    gen = fake_llama_generator()
    # a fourth of 80 less the 0.5 GiB context is 19.5 GiB; the weights' 2 hold the rest: 17.5, not 19.5 - 10
    assert gen.effective_token_budget() == int(0.7 * 17.5 * gib / LLAMA_KV_PER_TOKEN)

    from hardex.generation.kv_cache import kv_cache_room

    # a card of its own: 40 GiB free on the card and 20 cached in blocks no tensor holds, not the card's 40 alone
    assert kv_cache_room(40 * gib, 80 * gib, reserved=30 * gib, allocated=10 * gib, share=1.0) == 60 * gib
    # a shared card nearly full from its neighbours: the card's free memory bounds it, cached blocks added
    assert kv_cache_room(1 * gib, 80 * gib, reserved=10 * gib, allocated=2 * gib, share=0.25) == 9 * gib
    # nothing cached: the slice less what is reserved, as before
    assert kv_cache_room(70 * gib, 80 * gib, reserved=2 * gib, allocated=2 * gib, share=0.25) == 17.5 * gib
    assert kv_cache_room(0, 80 * gib, reserved=20 * gib, allocated=20 * gib, share=0.25) == 0


# ---- issue 64 G4, G5: k jobs' caps and CUDA contexts fit the card; a rank caps only the GPU it computes on ----

@pytest.mark.parametrize("k, card_gib", [(12, 80), (4, 80), (12, 141), (2, 24)])
def test_k_jobs_caps_and_their_cuda_contexts_fit_the_card(k, card_gib):
    total = card_gib * 2**30
    fraction = devices.allocator_fraction(1 / k, total)
    # every job at its cap, each with its context outside the cap (0.5 GiB, the most measured): within the card
    assert k * (fraction * total + devices.CUDA_CONTEXT_BYTES) <= total * (1 + 1e-12)
    # the cap a job had before (total / k) left no room: k contexts past the card
    assert k * (total / k + devices.CUDA_CONTEXT_BYTES) > total
    assert devices.allocator_fraction(1.0, total) == 1.0  # a card of its own: torch needs no cap
    with pytest.raises(ValueError, match=r"HARDEX_JOBS_PER_GPU"):
        devices.allocator_fraction(1 / 400, total)  # a slice smaller than a context


def test_each_rank_caps_only_the_gpu_it_computes_on(shared_card, monkeypatch):
    """accelerate's ranks see all the job's GPUs; capping one starts a CUDA context on it, outside every cap, so a
    rank that capped them all put a context of each rank on every card."""
    queued, fractions = [], []
    monkeypatch.setattr(torch.cuda, "_lazy_call", queued.append)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    card = types.SimpleNamespace(total_memory=80 * 2**30)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: card)
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda f, i: fractions.append(i))
    monkeypatch.setenv("LOCAL_RANK", "1")
    devices.hold_to_share()
    queued.pop()()
    assert fractions == [1]
    monkeypatch.delenv("LOCAL_RANK")  # one process of the job: every GPU it sees
    devices.hold_to_share()
    queued.pop()()
    assert fractions == [1, 0, 1, 2]


def _worker_spec(tmp_path) -> str:
    """What hardex.launch hands each rank (hardex.train_worker), for a fit that the test replaces."""
    import json

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"reward": {"family": "arith", "scoring": "lenient", "scale": 1.0}, "seed": 0,
                                "model_path": "m", "rows": [], "grpo": {}, "ckpt_dir": str(tmp_path), "resume": None,
                                "steps_total": 1, "trainer_args": {}}))
    return str(spec)


def test_trainings_launched_ranks_hold_to_the_share_too(monkeypatch, tmp_path):
    """accelerate's ranks (hardex.train_worker) start outside the job's setup: each caps its own allocator."""
    from hardex import train_worker

    calls = []
    monkeypatch.setattr(train_worker, "hold_to_share", lambda: calls.append("cap"))
    monkeypatch.setattr(train_worker, "die_with_parent", lambda: None)
    monkeypatch.setattr(train_worker, "fit", lambda *a: calls.append("fit"))
    train_worker.main(_worker_spec(tmp_path))
    assert calls == ["cap", "fit"]


def test_a_rank_ends_its_process_group_when_training_is_done(monkeypatch, tmp_path):
    """A rank that leaves its gloo process group to interpreter exit can abort (SIGABRT) after a finished run,
    failing the job: seen once in the Slurm test's two-process train job. Each rank ends it after fit."""
    import torch.distributed as dist

    from hardex import train_worker

    monkeypatch.setattr(train_worker, "hold_to_share", lambda: None)
    monkeypatch.setattr(train_worker, "die_with_parent", lambda: None)
    monkeypatch.setattr(train_worker, "fit", lambda *a: dist.barrier())  # training's last collective
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        train_worker.main(_worker_spec(tmp_path))
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


# ---- 11. a GPU job that cannot see CUDA stops at once ----

def test_a_gpu_job_on_a_cpu_build_of_torch_stops_at_once(shared_card, tmp_path, monkeypatch):
    """The real question, asked of this machine's torch (a CPU build) in a child process."""
    monkeypatch.setattr(devices, "driver_status", lambda: {"driver": "550.54.15", "cuda": "12.4"})
    ran = []
    with pytest.raises(devices.NoCudaError) as err:
        with job_log(fake_job(tmp_path, gpu=1)):
            ran.append(True)
    message = str(err.value)
    assert not ran  # the job's work never started
    assert f"torch {torch.__version__} (torch.version.cuda None) is a CPU build" in message
    assert "NVIDIA driver 550.54.15, which runs CUDA 12.4" in message and "install a CUDA build of torch" in message
    assert message.startswith("this job asks for 1 GPU(s) (compute.gpu) but torch sees 0 GPU(s)")
    assert "NoCudaError: this job asks for 1 GPU(s)" in (tmp_path / "job.log").read_text()


def test_a_driver_older_than_torchs_cuda_is_named_with_both_versions(shared_card, tmp_path, monkeypatch):
    monkeypatch.setattr(devices, "cuda_status", lambda: {
        "torch": "2.13.0+cu130", "cuda": "13.0", "gpus": 0,
        "warning": "CUDA initialization: The NVIDIA driver on your system is too old (found version 12040)."})
    monkeypatch.setattr(devices, "driver_status", lambda: {"driver": "550.54.15", "cuda": "12.4"})
    with pytest.raises(devices.NoCudaError) as err, job_log(fake_job(tmp_path, gpu=1)):
        pass
    message = str(err.value)
    assert ("torch 2.13.0+cu130 (torch.version.cuda 13.0) is built for a newer CUDA than the NVIDIA driver 550.54.15, "
            "which runs CUDA 12.4 at most (nvidia-smi)") in message
    assert "install a torch built for CUDA 12.4 or older, or update the driver" in message
    assert "driver on your system is too old" in message


def test_no_driver_and_the_way_to_run_a_gpu_config_on_a_cpu(shared_card, tmp_path, monkeypatch):
    monkeypatch.setattr(devices, "cuda_status", lambda: {"torch": "2.13.0+cu128", "cuda": "12.8", "gpus": 0,
                                                         "warning": ""})
    monkeypatch.setattr(devices, "driver_status", lambda: {})
    with pytest.raises(devices.NoCudaError, match="no NVIDIA driver answers on this node"), \
            job_log(fake_job(tmp_path, gpu=1)):
        pass
    monkeypatch.setattr(devices, "driver_status", lambda: {"driver": "570.86.15", "cuda": "12.8"})  # a fitting driver
    with pytest.raises(devices.NoCudaError, match=r"with NVIDIA driver 570.86.15.*check that the GPUs it was given "
                                                  r"\(CUDA_VISIBLE_DEVICES=0\) are there and free"), \
            job_log(fake_job(tmp_path, gpu=1)):
        pass
    monkeypatch.setenv("HARDEX_ALLOW_CPU", "1")  # a rehearsal of a GPU config on a machine without one
    with job_log(fake_job(tmp_path, gpu=1)):
        pass
    assert "HARDEX_ALLOW_CPU=1: this GPU job runs on the CPU" in (tmp_path / "job.log").read_text()
    monkeypatch.delenv("HARDEX_ALLOW_CPU")
    with job_log(fake_job(tmp_path, gpu=0)):  # a CPU job asks nothing
        pass


# ---- 8. the built model warm-starts on the GPU its job holds ----

def test_build_model_warm_starts_on_the_gpu_when_there_is_one(tmp_path, monkeypatch):
    """The build job (scripts/build_model.py) warm-starts on the device it picks: its GPU where it holds one."""
    import runpy

    import hardex.models
    from tests.support import ROOT

    seen = {}
    monkeypatch.setattr(devices, "pick_device", lambda device=None: "cuda")  # as where CUDA answers
    monkeypatch.setattr(hardex.models, "build_model", lambda *a, **k: seen.update(k) or {"device": k["device"]})
    job = types.SimpleNamespace(log=[str(tmp_path / "job.log")], rule="build_model", wildcards={}, threads=1,
                                resources=types.SimpleNamespace(gpu=0), output=[str(tmp_path / "model")],
                                input=types.SimpleNamespace(held_out=[], sft=[]),
                                params=types.SimpleNamespace(families=[], arch={}, warmstart={}))
    runpy.run_path(str(ROOT / "scripts" / "build_model.py"), init_globals={"snakemake": job})
    assert seen["device"] == "cuda"
    # the library function runs where it is told (float32 on the CPU by default)
    rows = [{"prompt": f"{i}+1=", "solution": str(i + 1)} for i in range(8)]
    arch = {"hidden_size": 16, "intermediate_size": 32, "num_layers": 1, "num_heads": 2, "vocab_size": 320,
            "max_position_embeddings": 64}
    warm = {"seed": 0, "batch_size": 4, "epochs": 0.5, "learning_rate": 1e-3}
    monkeypatch.undo()
    assert hardex.models.build_model(tmp_path / "cpu", rows, arch, warm, log=lambda *a: None)["device"] == "cpu"


# ---- 14. hub models without Meta's original/*.pth copies ----

def test_hub_models_are_fetched_without_their_original_checkpoint(tmp_path, monkeypatch):
    import huggingface_hub
    from huggingface_hub.utils import filter_repo_objects

    from hardex.models import model_fingerprint, resolve_model

    calls = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo, **kw: calls.append(kw) or str(tmp_path))
    assert resolve_model("meta-llama/Llama-3.1-8B-Instruct") == str(tmp_path)
    repo = ["config.json", "model-00001-of-00004.safetensors", "tokenizer.json", "original/consolidated.00.pth",
            "original/params.json", "original/tokenizer.model", "README.md"]
    fetched = list(filter_repo_objects(repo, **calls[0]))  # the hub's own filter, as snapshot_download applies it
    assert fetched == ["config.json", "model-00001-of-00004.safetensors", "tokenizer.json"]
    # a cache filled in full (huggingface-cli download) fingerprints as hardex's own download does
    for name in fetched:
        (tmp_path / name).write_text(name)
    before = model_fingerprint(tmp_path)
    (tmp_path / "original").mkdir()
    (tmp_path / "original" / "consolidated.00.pth").write_text("16 GB")
    assert model_fingerprint(tmp_path) == before


# ---- 14. a vllm-server run asks about CUDA without starting it before its training GPUs are narrowed ----

def test_train_grpo_asks_about_cuda_without_starting_its_driver_before_the_server_narrows(
        tmp_path, tiny_model, smoke_config, monkeypatch):
    """torch's default is_available() calls cuInit, after which the driver ignores the CUDA_VISIBLE_DEVICES that
    server mode narrows to the training GPUs; the NVML-based check reads it at each call."""
    import contextlib
    import copy

    import hardex.vllm_server
    from hardex.config import check_config
    from hardex.devices import cuda_available
    from hardex.training import train_grpo

    started = []
    monkeypatch.setattr(torch.cuda, "_is_compiled", lambda: True)  # a CUDA build of torch, as far as asking goes
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: 0)  # NVML: no GPU here
    # (a CPU build has no cuda entry points: raising=False adds the one the default check calls)
    monkeypatch.setattr(torch._C, "_cuda_getDeviceCount", lambda: started.append("cuInit") or 0, raising=False)
    assert torch.cuda.is_available() is False and started == ["cuInit"]  # what train_grpo asked before
    started.clear()
    assert cuda_available() is False and started == [] and "PYTORCH_NVML_BASED_CUDA_CHECK" not in os.environ

    class Narrowed(Exception):
        pass

    @contextlib.contextmanager
    def serve(*a, **k):
        raise Narrowed  # where the server narrows the GPUs: nothing may have started CUDA before

    monkeypatch.setattr(hardex.vllm_server, "serve_rollouts", serve)
    g = check_config(copy.deepcopy(smoke_config))["grpo"]
    g.update(max_steps=1, save_steps=1, num_generations=2, prompts_per_step=2, rollouts="vllm-server")
    rows = [{"prompt": f"q{i}", "answer": "(A)"} for i in range(2)]
    with pytest.raises(Narrowed):
        train_grpo(str(tiny_model), rows, lambda *a: 1.0, g, 0, tmp_path / "run", tmp_path / "final",
                   tmp_path / "steps.parquet", log=lambda *a: None)
    assert started == []
