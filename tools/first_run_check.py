"""Issue 64 item 5 on one GPU, in one command of at most 10 minutes: the presets' jobs at their real sizes, each
check in a process of its own, one PASS/FAIL/SKIP line each as it finishes, its peak GPU memory beside the memory
plan's estimate for the same job, and at the end a block to paste into docs/gpu-runs.md. docs/gpu-runs.md says
what each line means and what ran where; docs/offline-gpu.md gives the one command a lent GPU runs.

    python tools/first_run_check.py [--out DIR] [--budget 520] [--dir WORK] [--only NAME ...]   # on a GPU
    python tools/first_run_check.py --plan [--budget 520] [--card-mib 81559]   # the order and budgets, run nothing
    python tools/first_run_check.py --tiny ...      # the same code at the stand-in's sizes, on a CPU (CI)
    python tools/first_run_check.py --check NAME [--tiny]                       # one check, in this process

The checks run in the item's order, the essential ones first (PLAN: the graph and nccl tests, the paper preset's
train step at real size, twelve jobs sharing the card), then the evaluations, a 1/12 share alone, ZeRO-3 and a
small model's train job, then older checks while time is left. The budget is shared out as they run: a check may
take its cap (the train step none: whatever the budget leaves), less the planned seconds of the essential checks
still to come, and one with too little left is skipped and says so. Each finished check's line is appended to
OUT/first-run.md at once (a command cut at its limit keeps what ran), its log's tail to OUT/first-run-logs.txt.

Models are initialised at random from the kept config.json files (hardex.architectures): the real shapes and
vocabularies, nothing downloaded; the tokenizer is the family's stand-in (hardex.rehearsal.standin). Random weights
almost never sample an end token, so every completion runs to its maximum length: the worst case the plan assumes.
Everything it needs travels to a machine without internet (docs/offline-gpu.md). `--tiny` runs the same code at
the stand-in's sizes on whatever device there is (CI, on a CPU: tests/unit/test_gpu_first_run.py); its memory
figures and times mean nothing, its failures do. The GPU smoke (tools/gpu_smoke.py) checks the mechanisms on
stand-ins.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the library, also where hardex is not pip-installed
sys.path.insert(0, str(ROOT / "tools"))  # the smoke's runner

from gpu_smoke import Skip, _result  # noqa: E402

GIB = 2**30


@dataclass(frozen=True)
class Planned:
    """A check's place in the budget: `seconds` it is planned to take on one H100 (from what ran there, or an
    estimate where nothing did: docs/gpu-runs.md), `cap` the most it may take (None: whatever the budget leaves),
    `reserved`: its planned seconds are kept for it while the checks before it run."""
    seconds: int
    cap: int | None
    reserved: bool = False


#: issue 64 item 5's checks, the essential ones first, then the rest in the item's order, then older checks that
#: run while time is left. eval-paper reads train-paper's adapter, so it comes after it.
PLAN = {
    # the CUDA-graph decode and nccl tests of tests/unit (pytest starts, builds small models)
    "graph-nccl": Planned(35, 90, reserved=True),
    # model build and save ~30 s, load, two steps of ~80 s (79.2 s measured on an H200), the adapters saved
    "train-paper": Planned(230, None, reserved=True),
    # twelve processes start at once on 16 cores, then generate together
    "twelve-shares": Planned(70, 150, reserved=True),
    "eval-phi4": Planned(50, 110),
    "eval-paper": Planned(40, 90),
    "one-share": Planned(25, 60),
    # SKIPs at once without deepspeed (its wheel is not in the carried set); about a minute with it
    "zero3-1proc": Planned(15, 90),
    "small-train-job": Planned(55, 120),
    "fork-safety": Planned(15, 60),
    "full-ft-moves": Planned(30, 60),
    "trl-rollouts": Planned(40, 90),
}
CHECKS = tuple(PLAN)
ITEM = CHECKS[:8]  #: issue 64 item 5's
#: one device command, what installing the carried wheels takes before this script starts, and what is left for
#: stopping a check cut at its limit and writing the summary
COMMAND_S, STARTUP_S, MARGIN_S = 600, 40, 40
DEFAULT_BUDGET = COMMAND_S - STARTUP_S - MARGIN_S
#: a check is not started with less than this left, nor with less than its planned seconds
MIN_START_S = 20
#: the paper preset's model the train and evaluate checks run (its plan's largest 4B job)
PAPER_MODEL = ("hard_examples_paper.yaml", "qwen3-4b", "Qwen/Qwen3-4B")
#: jobs sharing one card (experiments/gpu_mini.yaml: HARDEX_JOBS_PER_GPU=12)
SHARES = 12
#: the small model's train job (issue 44): the study's arith job as it ran on the H100 (16 steps of 2 x 8, 48
#: tokens), against the same job's steps on this project's 2 CPU cores: 16.9 s a step, 270 s for its 16
#: (docs/gpu-runs.md, section 5); issue 44 asked a GPU for 20x that, start-up counted apart
SMALL_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMALL_CONFIG = "docs/results-real-model-study/arith-h100-config.yaml"
CPU_STEP_S, TARGET_SPEEDUP = 16.9, 20
#: the tests of tests/unit that need CUDA for the graph decode and nccl, with their CPU neighbours
GPU_TESTS = ("tests/unit/test_generation.py", "tests/unit/test_gpu_first_run.py")
GPU_TESTS_K = "cuda_graph or fixed_shape or capture or nccl"


# ---- the plan: order, budgets, shares (no torch) -------------------------------------------------------------

def limit_for(name: str, left: float, later: list[str]) -> float:
    """Seconds `name` may take with `left` seconds of the budget: its cap (none for an uncapped check), less the
    planned seconds of the reserved checks in `later`."""
    room = left - sum(PLAN[n].seconds for n in later if PLAN[n].reserved)
    cap = PLAN[name].cap
    return room if cap is None else min(cap, room)


def too_little(name: str, limit: float) -> bool:
    """Whether `limit` is too short to start `name`: under its planned seconds (a later, shorter check may use
    them) or under MIN_START_S."""
    return limit < max(MIN_START_S, PLAN[name].seconds)


def share_plan(k: int, total_bytes: int) -> dict:
    """k jobs on one card of `total_bytes`, each held to 1/k by hardex.devices: its allocator's cap (torch's
    per-process fraction, less its CUDA context, which the cap does not count) and the card's use when every
    cap and context is full."""
    from hardex.devices import CUDA_CONTEXT_BYTES, allocator_fraction

    cap = int(allocator_fraction(1 / k, total_bytes) * total_bytes)
    full = k * (cap + CUDA_CONTEXT_BYTES)
    return {"k": k, "total": total_bytes, "cap": cap, "context": CUDA_CONTEXT_BYTES, "full": full,
            "fits": full <= total_bytes}


def share_line(p: dict) -> str:
    return (f"{p['k']} x ({p['cap'] / GIB:.2f} GiB cap + {p['context'] / GIB:.2f} context) = {p['full'] / GIB:.2f} "
            f"of {p['total'] / GIB:.2f} GiB{'' if p['fits'] else ': MORE THAN THE CARD'}")


def plan_lines(names, budget: float, card_bytes: int) -> list[str]:
    """The plan as the run would follow it if each check took its planned seconds."""
    lines, t = [f"budget {budget:.0f} s (a {COMMAND_S} s command less {STARTUP_S} s of installing and a "
                       f"{MARGIN_S} s margin by default)", "check | planned s | may take | starts at | ends at"], 0.0
    names = list(names)
    for i, name in enumerate(names):
        limit = limit_for(name, budget - t, names[i + 1:])
        if too_little(name, limit):
            lines.append(f"{name} | {PLAN[name].seconds} | - | {t:.0f} | skipped: {limit:.0f} s left for it")
            continue
        lines.append(f"{name} | {PLAN[name].seconds} | {limit:.0f}{' (no cap)' if PLAN[name].cap is None else ''} | "
                     f"{t:.0f} | {t + PLAN[name].seconds:.0f}")
        t += PLAN[name].seconds
    lines.append(f"planned {t:.0f} s of {budget:.0f}; twelve shares: {share_line(share_plan(SHARES, card_bytes))}")
    return lines


def cuda_here() -> bool:
    """A GPU on this machine, asked without starting CUDA in this process (nvidia-smi)."""
    return bool(nvidia_smi("name"))


def cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def peak_gib() -> str:
    """This process's peak GPU memory, allocated and reserved by torch's allocator."""
    import torch

    if not torch.cuda.is_available():
        return "no GPU peak (CPU)"
    return (f"peak {torch.cuda.max_memory_allocated() / GIB:.1f} GiB allocated, "
            f"{torch.cuda.max_memory_reserved() / GIB:.1f} reserved")


# ---- the presets, their plans and their models -----------------------------------------------------------------

def preset(name: str) -> dict:
    """A preset of experiments/, checked as planning checks it (defaults filled), with each model's weights those of its
    kept architecture (path: standin; a built one is built): the checks train random weights of the real sizes, and a
    host with no network or cache (a compute node) must still plan them."""
    import yaml

    from hardex.config import check_config

    cfg = yaml.safe_load((ROOT / "experiments" / name).read_text())
    for m in cfg["models"].values():
        if m["path"] != "build":  # a built model needs nothing fetched
            m["architecture"] = m.get("architecture") or m["path"]
            m["path"] = "standin"
            m.pop("gguf", None)
    return check_config(cfg)


def plan_of(cfg: dict, model: str, kind: str):
    """The memory plan's job of that kind for one model of a preset."""
    from hardex.memory_plan import plan

    return next(p for p in plan(cfg) if p.model == model and p.kind == kind)


def planned(cfg: dict, model: str, kind: str) -> str:
    """The memory plan's estimate for one job of a preset, as `hardex plan` prints it, with this process's peak
    reserved memory against it where a GPU ran it."""
    job = plan_of(cfg, model, kind)
    card = f" of {job.device_gb:g} GB" if job.device_gb else ""
    line = f"plan {job.estimate.total:.1f} GiB{card} ({job.estimate.batch or job.micro_batch})"
    if cuda():
        import torch

        ratio = torch.cuda.max_memory_reserved() / GIB / job.estimate.total
        line += f"; peak reserved {ratio:.2f} of the plan{'' if ratio <= 1 else ': ABOVE THE PLAN'}"
    return line


def tokenizer_of(hub_id: str):
    from hardex.architectures import standin_spec
    from hardex.rehearsal.standin import standin_tokenizer

    spec = standin_spec(hub_id)
    return standin_tokenizer(spec["chat_template"], spec)


def random_model(hub_id: str, tiny: bool):
    """`hub_id`'s architecture at its real size (the stand-in's with `tiny`), random bfloat16 weights built on the
    device, with the stand-in tokenizer (whose ids all lie inside the real vocabulary)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    from hardex.architectures import config_of
    from hardex.rehearsal.standin import standin_config

    tok = tokenizer_of(hub_id)
    real = config_of(hub_id)
    if tiny:
        config = standin_config(real, tok)
    else:
        kept = {k: v for k, v in real.items() if k not in ("_name_or_path", "transformers_version", "auto_map")}
        config = AutoConfig.for_model(**{**kept, "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
                                         "pad_token_id": tok.pad_token_id})
    torch.manual_seed(0)
    with torch.device("cuda" if cuda() else "cpu"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                               do_sample=True)
    print(f"  {hub_id}{' (tiny)' if tiny else ''}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B "
          f"parameters, random, on {model.device}", flush=True)
    return model, tok


def saved_model(hub_id: str, work: Path, tiny: bool) -> Path:
    """random_model saved once in `work` (training loads from a folder, as the workflow's jobs do)."""
    out = work / (("tiny-" if tiny else "") + hub_id.replace("/", "--"))
    if not (out / "config.json").exists():
        model, tok = random_model(hub_id, tiny)
        model.save_pretrained(out)
        tok.save_pretrained(out)
        del model
    return out


def standin(work: Path, hub_id: str = "Qwen/Qwen3-4B") -> Path:
    """The stand-in of `hub_id` (hardex.rehearsal.standin), for the checks whose point is not the size."""
    from hardex.rehearsal.standin import build_standin

    out = work / f"standin-{hub_id.replace('/', '--')}"
    if not (out / "config.json").exists():
        build_standin(out, hub_id, log=lambda _: None)
    return out


def prompts(tok, n: int, tokens: int, chat: bool = True) -> list[str]:
    """n distinct rendered prompts of at most `tokens` tokens each (the plan's compute.prompt_tokens)."""
    from hardex.models import encode_prompt, render_prompt

    words = "the of and to in is that at start swap answer number seven plus minus".split()

    def render(i: int, k: int) -> str:
        return render_prompt(tok, f"Question {i}: " + " ".join(words[(i + j) % len(words)] for j in range(k)), chat)

    k = tokens
    while k > 4 and len(encode_prompt(tok, render(0, k))) > tokens:
        k = int(k * 0.9)
    out = []
    for i in range(n):
        ki = k
        while ki > 4 and len(encode_prompt(tok, render(i, ki))) > tokens:
            ki -= 2
        out.append(render(i, ki))
    return out


def train(model_dir: Path, rows: list[dict], grpo: dict, run: Path, time_limit=None) -> dict:
    """hardex's train_grpo on `rows` with a reward that mixes every group (by the completion's length); the pace
    line of a `time_limit` (hardex.time_limit) printed for the record."""
    from hardex.training import train_grpo

    reward = lambda completion, answer, prompt: float(len(completion) % 2)  # noqa: E731
    log = lambda *a: print("  " + " ".join(map(str, a)).removeprefix("[hardex] "), flush=True) \
        if a and "a step" in str(a[0]) else None  # noqa: E731
    return train_grpo(str(model_dir), rows, reward, grpo, 0, run, run / "final", run / "steps.parquet",
                      identity={"model": str(model_dir)}, log=log, run_name=run.name, time_limit=time_limit)


def step_seconds(run: Path) -> list[float]:
    import polars as pl

    return pl.read_parquet(run / "steps.parquet")["step_time"].to_list()


def tiny_grpo(grpo: dict, tiny: bool, **changes) -> dict:
    """A preset's grpo block for a check of a few steps; with `tiny`, a few short completions too."""
    small = dict(prompts_per_step=2, num_generations=2, gradient_accumulation_steps=1, max_completion_length=8)
    return {**grpo, "save_steps": 1, "epochs": None, **changes, **(small if tiny else {})}


def generation_batch(gen: dict, cfg: dict, samples: int, new_tokens: int) -> int:
    """How many prompts fill one batch of the transformers generator at a job's token budget (`gen`: its
    generation settings) with prompts of the plan's longest (compute.prompt_tokens)."""
    prompt_tokens = int(cfg["compute"].get("prompt_tokens") or 512)
    rows = gen["token_budget"] // (prompt_tokens + new_tokens)
    return max(1, min(gen["max_batch_prompts"], rows // samples))


# ---- the checks -------------------------------------------------------------------------------------------------

def check_fork_safety(tiny: bool, work: Path) -> str:
    """vLLM starts its workers by fork unless it finds CUDA initialised, and torch.cuda.is_available() (which
    transformers calls in places) breaks a later fork while is_initialized() stays False (vLLM RFC #15681): a GPU
    engine must start its workers by spawn. Where a GPU is here, a worker started so after that call uses CUDA."""
    import json
    import subprocess

    from hardex.generation.vllm_backend import engine_environment

    method = engine_environment("cuda").get("VLLM_WORKER_MULTIPROC_METHOD")
    if method != "spawn":
        raise AssertionError(f"a GPU engine's workers would start by {method or 'fork'}, not spawn")
    if not cuda():
        return "a GPU engine's workers start by spawn (a worker's CUDA after is_available(): needs a GPU)"
    code = ("import multiprocessing as mp, sys, json, torch\n"
            "def child(q):\n"
            "    try:\n        torch.zeros(1, device='cuda'); q.put('ok')\n"
            "    except Exception as e:\n        q.put(type(e).__name__ + ': ' + str(e).splitlines()[0])\n"
            "if __name__ == '__main__':\n"
            "    torch.cuda.is_available()  # what poisons a fork without initialising CUDA\n"
            "    ctx = mp.get_context(sys.argv[1]); q = ctx.Queue()\n"
            "    p = ctx.Process(target=child, args=(q,)); p.start(); p.join(60)\n"
            "    print(json.dumps(q.get(timeout=5)))\n")
    script = work / "fork_child.py"
    script.write_text(code)
    seen = {m: json.loads(subprocess.run([sys.executable, str(script), m], capture_output=True, text=True,
                                         timeout=120).stdout.strip().splitlines()[-1]) for m in ("spawn", "fork")}
    if seen["spawn"] != "ok":
        raise AssertionError(f"a spawned worker cannot use CUDA: {seen['spawn']}")
    return f"a spawned worker used CUDA after is_available(); a forked one: {seen['fork']}"


def check_train_paper(tiny: bool, work: Path) -> str:
    """Two GRPO steps of a full-size Qwen3-4B with hard_examples_paper's grpo block (32 prompts x 8, accumulation 8,
    beta 0.1, LoRA r 32 on seven projections, gradient checkpointing, hardex's rollouts, 250 tokens), held to the
    runtime Slurm would give its train job (hardex.job_time; the pace line of hardex.time_limit is printed): the
    peak against the memory plan, the last step's time against that limit for the preset's steps."""
    import torch

    name, model, hub_id = PAPER_MODEL
    from hardex.job_time import RUNTIME_SAFETY, runtime_minutes, train_seconds, train_time_limit
    from hardex.settings import grpo_settings
    from hardex.time_limit import duration

    cfg = preset(name)
    preset_steps = grpo_settings(cfg, model)["max_steps"]
    grpo = tiny_grpo(grpo_settings(cfg, model), tiny, max_steps=2)
    estimate = train_seconds(cfg, model, preset_steps)
    limit_min = runtime_minutes(cfg, model, estimate, 1)  # the first attempt's -t
    model_dir = saved_model(hub_id, work, tiny)
    tok = tokenizer_of(hub_id)
    rows = [{"prompt": p, "answer": "1"} for p in prompts(tok, 2 * grpo["prompts_per_step"], 16 if tiny else 500)]
    if cuda():
        torch.cuda.reset_peak_memory_stats()
    summary = train(model_dir, rows, grpo, work / "run-paper", train_time_limit(cfg, model, limit_min))
    if summary["steps"] != 2:
        raise AssertionError(f"trained {summary['steps']} steps, expected 2")
    seconds = step_seconds(work / "run-paper")
    need = cfg["compute"]["runtime_min"] * 60 + seconds[-1] * preset_steps
    verdict = "within it" if need <= limit_min * 60 else "MORE THAN THE LIMIT"
    return (f"{summary['steps']} steps; {peak_gib()}; {planned(cfg, model, 'train')}; step seconds "
            f"{', '.join(f'{s:.1f}' for s in seconds)} (hardex.job_time planned {estimate / preset_steps:.1f}); the "
            f"preset's {preset_steps} steps at the last step's pace {duration(need)} with start-up, against Slurm's "
            f"first limit {duration(limit_min * 60)} ({RUNTIME_SAFETY:g}x the estimate): {verdict}")


def check_eval_paper(tiny: bool, work: Path) -> str:
    """One evaluation batch of that Qwen3-4B with its trained adapter (train-paper's last checkpoint, where it ran):
    the transformers generator at the preset's token budget, GSM8K's decoding."""
    import torch

    from hardex.generation.hf import HFGenerator
    from hardex.generation.sampling import Sampling
    from hardex.settings import decodings, generation_settings

    name, model, hub_id = PAPER_MODEL
    cfg = preset(name)
    dec, gen_cfg = decodings(cfg)["gsm8k/test"], generation_settings(cfg, model)
    model_dir = saved_model(hub_id, work, tiny)
    if cuda():
        torch.cuda.reset_peak_memory_stats()
    gen = HFGenerator(str(model_dir), dtype="bfloat16", token_budget=gen_cfg["token_budget"],
                      max_batch_prompts=gen_cfg["max_batch_prompts"], progress=False)
    adapters = sorted((work / "run-paper" / "checkpoints").glob("checkpoint-*"))
    if adapters:
        gen.use_checkpoint(adapters[-1])
    new = 8 if tiny else dec["max_new_tokens"]
    n = 4 if tiny else generation_batch(gen_cfg, cfg, dec["n_samples"], new)
    out = gen.generate(prompts(gen.tokenizer, n, 16 if tiny else 500), dec["n_samples"],
                       Sampling.from_config({**dec, "max_new_tokens": new}), seed=0)
    if len(out) != n:
        raise AssertionError(f"{len(out)} results for {n} prompts")
    return (f"{n} prompts x {new} tokens, adapter {'on' if adapters else 'absent'}; {peak_gib()}; "
            f"{planned(cfg, model, 'evaluate')}")


def check_eval_phi4(tiny: bool, work: Path) -> str:
    """One evaluation batch of phi-4 under LoRA r 32 on its fused projections, at its own token budget: the paper
    preset's tightest job."""
    import torch
    from peft import LoraConfig, get_peft_model

    from hardex.generation.hf import HFGenerator
    from hardex.generation.sampling import Sampling
    from hardex.settings import decodings, generation_settings, grpo_settings

    cfg = preset(PAPER_MODEL[0])
    dec, gen_cfg = decodings(cfg)["gsm8k/test"], generation_settings(cfg, "phi4")  # its own token budget
    lora = grpo_settings(cfg, "phi4")["lora"]
    model, tok = random_model("microsoft/phi-4", tiny)
    model = get_peft_model(model, LoraConfig(r=lora["r"], lora_alpha=lora["alpha"],
                                             target_modules=lora["target_modules"], task_type="CAUSAL_LM")).eval()
    if cuda():
        torch.cuda.reset_peak_memory_stats()
    gen = HFGenerator("phi-4 (random)", model=model, tokenizer=tok, dtype="bfloat16",
                      token_budget=gen_cfg["token_budget"], max_batch_prompts=gen_cfg["max_batch_prompts"],
                      progress=False)
    new = 8 if tiny else dec["max_new_tokens"]
    n = 4 if tiny else generation_batch(gen_cfg, cfg, dec["n_samples"], new)
    gen.generate(prompts(tok, n, 16 if tiny else 500), dec["n_samples"],
                 Sampling.from_config({**dec, "max_new_tokens": new}), seed=0)
    return f"{n} prompts x {new} tokens; {peak_gib()}; {planned(cfg, 'phi4', 'evaluate')}"


def wait_for_all(barrier: str, timeout: float = 120) -> int:
    """Mark this process ready in `barrier` ("DIR:K") and wait until K processes are (at most `timeout` s): the
    twelve shares start generating together. Returns how many were ready."""
    folder, k = barrier.rsplit(":", 1)
    Path(folder, str(os.getpid())).touch()
    end = time.time() + timeout
    while (ready := len(os.listdir(folder))) < int(k) and time.time() < end:
        time.sleep(0.01)
    return ready


def check_one_share(tiny: bool, work: Path) -> str:
    """gpu_mini's probe batch at its token budget on its built model's shape, held to one job's share of the card
    (HARDEX_JOBS_PER_GPU=12, as its header runs it): torch's allocator capped at 1/12 less a CUDA context
    (hardex.devices), the generator's batches sized inside it. Alone on the card it also measures the CUDA
    context, which the cap does not count. twelve-shares runs twelve of it at once (HARDEX_FIRST_RUN_BARRIER)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from hardex.devices import allocator_fraction, hold_to_share
    from hardex.generation.hf import HFGenerator
    from hardex.generation.sampling import Sampling
    from hardex.model_shape import build_architecture
    from hardex.settings import generation_settings, probe_settings

    cfg = preset("gpu_mini.yaml")
    os.environ["HARDEX_JOBS_PER_GPU"] = str(SHARES)
    share = hold_to_share()
    tok = tokenizer_of("Qwen/Qwen3-4B")
    build = {**cfg["models"]["mini"]["build"]["arch"], "vocab_size": len(tok)}
    if tiny:
        build.update(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4)
    arch = build_architecture(build)
    config = AutoConfig.for_model(**{**arch, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id})
    with torch.device("cuda" if cuda() else "cpu"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    if cuda():
        torch.cuda.reset_peak_memory_stats()
    probe = probe_settings(cfg, "arith")
    gen = HFGenerator("mini (random)", model=model, tokenizer=tok, dtype="bfloat16",
                      token_budget=generation_settings(cfg, "mini")["token_budget"],
                      max_batch_prompts=cfg["generation"]["max_batch_prompts"], progress=False)
    new = 8 if tiny else probe["max_new_tokens"]
    n = 8 if tiny else generation_batch(generation_settings(cfg, "mini"), cfg, probe["k"], new)
    texts = prompts(tok, n, 100, chat=False)
    barrier = os.environ.get("HARDEX_FIRST_RUN_BARRIER")
    ready = wait_for_all(barrier) if barrier else None  # every share up, its model and context held
    t0 = time.time()
    gen.generate(texts, probe["k"], Sampling.from_config({**probe, "max_new_tokens": new}), seed=0)
    record = {"window": [t0, time.time()], "ready": ready}
    if not cuda():
        held = f"a {share:.3g} share of a card (none here)"
    else:
        total = torch.cuda.get_device_properties(0).total_memory
        cap = allocator_fraction(share, total) * total
        reserved = torch.cuda.max_memory_reserved()
        record.update(total=total, cap=cap, reserved=reserved)
        held = f"peak reserved {reserved / GIB:.2f} of its cap {cap / GIB:.2f} GiB (1/{SHARES} less a CUDA context)"
        if not barrier:  # alone on the card: what it holds outside the allocator is this process's context
            free, whole = torch.cuda.mem_get_info()
            record["outside"] = whole - free - torch.cuda.memory_reserved()
            held += f"; {record['outside'] / GIB:.2f} GiB outside the allocator (its CUDA context; counted 0.5)"
        if reserved > cap:
            raise AssertionError(f"{peak_gib()}: more than {held}")
    (work / "share.json").write_text(json.dumps(record))
    return f"{n} prompts x {probe['k']} samples x {new} tokens; {peak_gib()}; {held}; {planned(cfg, 'mini', 'probe')}"


def nvidia_smi(query: str) -> list[str] | None:
    """nvidia-smi's answer to --query-gpu=QUERY (csv, no header, no units), one line per GPU; None without it."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines() if out.returncode == 0 else None


def check_twelve_shares(tiny: bool, work: Path) -> str:
    """Twelve one-share jobs on one card at the same time (at tiny sizes two, on a CPU), each capped to its twelfth
    by hardex.devices' allocator fraction: each builds its model, waits for the others, and all generate at once.
    Fails when one fails (an out-of-memory error in one job, or its peak past its cap), or they did not overlap.
    The card's used memory is sampled by nvidia-smi meanwhile."""
    k = 2 if tiny else SHARES
    barrier = work / "barrier"
    barrier.mkdir(parents=True, exist_ok=True)
    for f in barrier.iterdir():
        f.unlink()
    env = {**os.environ, "HARDEX_JOBS_PER_GPU": str(SHARES), "HARDEX_FIRST_RUN_BARRIER": f"{barrier}:{k}"}
    card = nvidia_smi("memory.total")
    if card:
        shares = share_line(share_plan(SHARES, int(card[0]) * 2**20))
        print(f"  twelve shares of {int(card[0]) / 1024:.1f} GiB: {shares}", flush=True)
    used, running = [], True

    def sample():
        while running:
            lines = nvidia_smi("memory.used")
            if lines:
                used.append(int(lines[0]))
            time.sleep(1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    jobs = []
    for i in range(k):
        d = work / f"share{i}"
        d.mkdir(exist_ok=True)
        (d / "share.json").unlink(missing_ok=True)
        cmd = [sys.executable, __file__, "--check", "one-share", "--dir", str(d)] + (["--tiny"] if tiny else [])
        jobs.append((d, subprocess.Popen(cmd, stdout=open(d / "log.txt", "w"), stderr=subprocess.STDOUT, env=env)))
    for _, job in jobs:
        job.wait()
    running = False
    results, records = [], []
    for d, job in jobs:
        text = (d / "log.txt").read_text()
        line = next((x for x in reversed(text.splitlines()) if x.startswith("RESULT ")), None)
        results.append(json.loads(line[7:]) if line else {"status": "FAIL", "detail": f"exit {job.returncode}"})
        if (d / "share.json").exists():
            records.append(json.loads((d / "share.json").read_text()))
    failed = [f"share{i}: {r['detail']}" for i, r in enumerate(results) if r["status"] != "PASS"]
    if failed:
        raise AssertionError(f"{len(failed)} of {k} failed; " + "; ".join(failed[:3]))
    ready = min((r["ready"] for r in records), default=0)
    together = max((sum(r["window"][0] <= t < r["window"][1] for r in records) for t in
                    [r["window"][0] for r in records]), default=0)
    if len(records) < k or ready < k or (cuda_here() and together < k):
        raise AssertionError(f"{len(records)} of {k} reported; {ready} were up together, at most {together} "
                             f"generated at the same time")
    line = f"{k} jobs of a 1/{SHARES} share up together, {together} generating at once; none failed"
    if records and "cap" in records[0]:
        plan = share_plan(SHARES, records[0]["total"])
        line += (f"; peaks reserved {min(r['reserved'] for r in records) / GIB:.2f}-"
                 f"{max(r['reserved'] for r in records) / GIB:.2f} GiB of a {plan['cap'] / GIB:.2f} GiB cap each; "
                 + share_line(plan))
    if used and card:
        line += (f"; the card's used memory peaked at {max(used) / 1024:.1f} of {int(card[0]) / 1024:.1f} GiB "
                 "(nvidia-smi)")
    return line


def check_graph_nccl(tiny: bool, work: Path) -> str:
    """The tests of the CUDA-graph decode and the nccl reduction (GPU_TESTS, GPU_TESTS_K), with their CPU
    neighbours, under pytest: on a GPU every one must pass (one skipped for lack of CUDA fails the check); with
    `--tiny` or without a GPU they are only collected (the GPU ones skip on a CPU; the CPU lane runs the rest)."""
    import xml.etree.ElementTree as ET

    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", *GPU_TESTS, "-k", GPU_TESTS_K]
    if tiny or not cuda():
        out = subprocess.run([*base, "--collect-only", "-q"], capture_output=True, text=True, cwd=ROOT, env=env)
        ids = [x for x in out.stdout.splitlines() if "::" in x]
        for word in ("cuda_graph", "nccl"):
            if not any(word in x for x in ids):
                raise AssertionError(f"no test named *{word}* among {GPU_TESTS} "
                                     f"({out.stdout[-300:]}{out.stderr[-300:]})")
        return f"{len(ids)} tests collected, the GPU ones among them (run on a GPU: here only collected)"
    xml = work / "graph-nccl.xml"
    out = subprocess.run([*base, "-q", "-rs", f"--junitxml={xml}"], capture_output=True, text=True, cwd=ROOT, env=env)
    print(out.stdout[-3000:] + out.stderr[-2000:], file=sys.stderr)
    cases = {c.get("name"): next((x.tag for x in c if x.tag in ("failure", "error", "skipped")), "passed")
             for c in ET.parse(xml).getroot().iter("testcase")}
    bad = {n: how for n, how in cases.items() if how != "passed"}
    if bad or not cases:
        raise AssertionError(f"{len(bad)} of {len(cases)} not passed: "
                             + ", ".join(f"{n} {how}" for n, how in bad.items()))
    return f"{len(cases)} passed: " + ", ".join(cases)


def check_small_train_job(tiny: bool, work: Path) -> str:
    """The remaining item of issue 44: a small model's train job on the card alone, against the same job on 2 CPU
    cores (CPU_STEP_S a step), target TARGET_SPEEDUP x, its start-up counted apart. perf/train_startup.py runs the
    study's arith train job (SMALL_CONFIG: 16 steps of 2 prompts x 8, 48 tokens, one thread) in one process on
    SmolLM2-135M-Instruct's architecture at random weights, and splits its time."""
    model = saved_model(SMALL_MODEL, work, tiny)
    steps = 2 if tiny else 16
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(ROOT / "perf" / "train_startup.py"), "--config",
                          str(ROOT / SMALL_CONFIG), "--model", str(model), "--steps", str(steps)],
                         capture_output=True, text=True, cwd=work, env=env)
    if out.returncode:
        raise RuntimeError(f"perf/train_startup.py exited {out.returncode}: {(out.stderr or out.stdout)[-500:]}")
    marks = {m.group(2): float(m.group(1)) for m in re.finditer(r"^\s*([\d.]+) s  (.+)$", out.stdout, re.M)}
    all_steps = next(v for k, v in marks.items() if k.startswith("train_grpo: its"))
    first = float(re.search(r"the first step: ([\d.]+) s", out.stdout).group(1))
    total = next(v for k, v in marks.items() if k.startswith("in all"))
    warm = (all_steps - first) / (steps - 1)
    speedup, speedup_all = CPU_STEP_S / warm, CPU_STEP_S * steps / all_steps
    verdict = "tiny sizes: no measure" if tiny else "met" if speedup >= TARGET_SPEEDUP else "NOT met"
    return (f"{steps} steps {all_steps:.1f} s (the first {first:.1f} s, then {warm:.2f} s a step): {speedup:.1f}x the "
            f"{CPU_STEP_S} s a step of 2 CPU cores after the first step, {speedup_all:.1f}x over all {steps} "
            f"(target {TARGET_SPEEDUP}x: {verdict}); start-up apart: {total - all_steps:.1f} s of the process's "
            f"{total:.1f} s (imports {sum(v for k, v in marks.items() if k.startswith('import')):.1f} s)")


def check_full_ft_moves(tiny: bool, work: Path) -> str:
    """gpu_mini's full fine-tune (lr 5e-5, weight decay 0.1, precision auto) for 4 steps on the Qwen3 stand-in: the
    share of matrix entries that moved. bfloat16 weights under a plain AdamW round such updates away."""
    import torch
    from safetensors.torch import load_file

    from hardex.settings import grpo_settings

    cfg = preset("gpu_mini.yaml")
    grpo = tiny_grpo(grpo_settings(cfg, "mini"), True, max_steps=4, save_steps=4)
    model_dir = standin(work)
    tok = tokenizer_of("Qwen/Qwen3-4B")
    run = work / "run-full-ft"
    train(model_dir, [{"prompt": p, "answer": "1"} for p in prompts(tok, 8, 32)], grpo, run)
    before = load_file(str(model_dir / "model.safetensors"))
    after = load_file(str(run / "final" / "model.safetensors"))
    moved = total = 0
    for key, value in after.items():
        if key in before and value.dim() == 2:
            moved += int((value.float() != before[key].to(value.dtype).float()).sum())
            total += value.numel()
    share = moved / max(total, 1)
    saved = str(next(iter(after.values())).dtype).removeprefix("torch.")
    detail = f"weights saved in {saved}; {share:.0%} of matrix entries moved in 4 steps (3 at a learning rate > 0)"
    if share < 0.9:
        raise AssertionError(detail)
    return detail + (f"; {peak_gib()}" if torch.cuda.is_available() else "")


def check_trl_rollouts(tiny: bool, work: Path) -> str:
    """hard_examples_code's grpo block on the Qwen3 stand-in: TRL's own generate, LoRA, checkpointing, and its 4-bit
    base where bitsandbytes and a GPU are here; the adapters must have trained in float32."""
    from safetensors.torch import load_file

    from hardex.settings import grpo_settings

    cfg = preset("hard_examples_code.yaml")
    four_bit = cuda() and importlib.util.find_spec("bitsandbytes") is not None
    grpo = tiny_grpo(grpo_settings(cfg, "qwen3-4b"), True, max_steps=2,
                     quantization="4bit" if four_bit else "none", prompts_per_step=2, num_generations=4)
    tok = tokenizer_of("Qwen/Qwen3-4B")
    run = work / "run-trl"
    summary = train(standin(work), [{"prompt": p, "answer": "1"} for p in prompts(tok, 8, 32)], grpo, run)
    adapter = load_file(str(run / "final" / "adapter_model.safetensors"))
    dtypes = sorted({str(t.dtype).removeprefix("torch.") for t in adapter.values()})
    if dtypes != ["float32"]:
        raise AssertionError(f"the adapters trained in {', '.join(dtypes)}, not float32")
    base = "4-bit base" if four_bit else "16-bit base (4-bit needs a GPU and bitsandbytes)"
    return f"{summary['steps']} steps of TRL's rollouts, {base}; adapters float32; {peak_gib()}"


def check_zero3_1proc(tiny: bool, work: Path) -> str:
    """grpo.distributed: zero3 through hardex.launch with one process: the accumulation handed to DeepSpeed, the
    GRPOConfig made before the weights load, TRL's generate gathering the sharded weights."""
    if importlib.util.find_spec("deepspeed") is None:
        raise Skip("deepspeed is not installed (pip install 'hardex[gpu]')")
    if not cuda():
        raise Skip("ZeRO needs a CUDA GPU")
    from hardex.io import checkpoint_steps
    from hardex.launch import launch_training
    from hardex.settings import grpo_settings

    grpo = tiny_grpo(grpo_settings(preset(PAPER_MODEL[0]), PAPER_MODEL[1]), True, max_steps=2, rollouts="trl",
                     distributed="zero3", gradient_accumulation_steps=2, num_generations=4)
    tok = tokenizer_of("Qwen/Qwen3-4B")
    ckpt = work / "run-zero3" / "checkpoints"
    ckpt.mkdir(parents=True, exist_ok=True)
    spec = {"model_path": str(standin(work)), "rows": [{"prompt": p, "answer": "1"} for p in prompts(tok, 8, 32)],
            "reward": {"family": "arith", "scoring": "lenient", "scale": 1.0}, "grpo": grpo, "seed": 0,
            "ckpt_dir": str(ckpt), "resume": None, "steps_total": 2, "trainer_args": {}}
    launch_training(spec, ckpt / "launch.json", 1, "zero3", log=lambda *a: None)
    steps = checkpoint_steps(ckpt)
    if not steps or steps[-1] != 2:
        raise AssertionError(f"checkpoints {steps}, expected 2 steps")
    return "2 steps under ZeRO-3 in one process, accumulation 2"


# ---- the runner -------------------------------------------------------------------------------------------------

def run_check(name: str, tiny: bool, work: Path) -> None:
    """One check in this process; prints RESULT last."""
    fn = globals()["check_" + name.replace("-", "_")]
    try:
        _result("PASS", fn(tiny, work))
    except Skip as e:
        _result("SKIP", str(e))
    except Exception as e:  # any failure is the check's result, with its type
        import traceback

        traceback.print_exc()
        _result("FAIL", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def run_one(name: str, limit: float, work: Path, flags: list[str]) -> dict:
    """`name` in a process of its own (`--check NAME`), in a process group of its own, killed whole at `limit`
    seconds (pytest's and twelve-shares' children too). Returns status, detail, seconds, its stdout's lines for the
    record (`record`: those indented by two spaces) and its log (stdout, then stderr)."""
    t = time.time()
    out, err = work / f"{name}.log", work / f"{name}.err"
    with open(out, "w") as o, open(err, "w") as e:
        job = subprocess.Popen([sys.executable, __file__, "--check", name, "--dir", str(work), *flags], stdout=o,
                               stderr=e, start_new_session=True)
        try:
            job.wait(timeout=limit)
            res = None
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 30)):
                try:
                    os.killpg(job.pid, sig)
                    job.wait(timeout=wait)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
            res = {"status": "FAIL", "detail": f"timed out after {limit:.0f} s"}
    stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
    if res is None:
        line = next((x for x in reversed(stdout.splitlines()) if x.startswith("RESULT ")), None)
        res = json.loads(line[7:]) if line else {"status": "FAIL", "detail": f"exit {job.returncode}, no result"}
    return {**res, "seconds": time.time() - t, "record": [x for x in stdout.splitlines() if x.startswith("  ")],
            "log": stdout + stderr}


class Report:
    """What a run writes as it goes: stdout, and where `out` is given OUT/first-run.md (a header, each check's
    line when it finishes, the summary) and OUT/first-run-logs.txt (each log's tail), each line flushed to disk at
    once, so that a command cut at its limit brings back what ran."""

    def __init__(self, out: Path | None, header: list[str]):
        self.md = self.logs = None
        if out:
            out.mkdir(parents=True, exist_ok=True)
            self.md, self.logs = out / "first-run.md", out / "first-run-logs.txt"
            self.md.write_text("")
            self.logs.write_text("")
        self.write(*header)

    def write(self, *lines: str, to_logs: bool = False) -> None:
        if not to_logs:
            print(*lines, sep="\n", flush=True)
        path = self.logs if to_logs else self.md
        if path:
            with open(path, "a") as f:
                f.write("\n".join(lines) + "\n")
                f.flush()
                os.fsync(f.fileno())


def run_plan(names, budget: float, run, report: Report, clock=time.monotonic) -> list[dict]:
    """Run `names` in order within `budget` seconds: each may take limit_for's seconds, one with too little left
    is skipped and says so. `run(name, limit)` runs one check (run_one). Returns one row per check."""
    names, rows, t0 = list(names), [], clock()
    for i, name in enumerate(names):
        left = budget - (clock() - t0)
        limit = limit_for(name, left, names[i + 1:])
        if too_little(name, limit):
            res = {"status": "SKIP", "detail": f"the budget is spent: {max(left, 0):.0f} s left, {limit:.0f} s of it "
                                               f"for this check (planned {PLAN[name].seconds} s)", "seconds": 0.0}
        else:
            res = run(name, limit)
        rows.append({"name": name, **res})
        for x in res.get("record", []):  # what a check prints for the record (model sizes, pace, shares)
            report.write(x)
        report.write(f"{res['status']} {name} ({res['seconds']:.0f} s of {PLAN[name].seconds} planned): "
                     f"{res['detail']}")
        if res.get("log"):
            tail = res["log"].strip().splitlines()[-(80 if res["status"] == "FAIL" else 15):]
            report.write(f"==== {name}: {res['status']}, last lines of its log", *tail, "", to_logs=True)
            if res["status"] == "FAIL":
                report.write("    " + "\n    ".join(tail[-6:]))
    counts = {s: sum(r["status"] == s for r in rows) for s in ("PASS", "FAIL", "SKIP")}
    report.write(f"SUMMARY {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP in "
                 f"{clock() - t0:.0f} s of a {budget:.0f} s budget")
    return rows


def machine() -> str:
    """The card (nvidia-smi) and the versions (package metadata: nothing imported, CUDA not started)."""
    from importlib.metadata import PackageNotFoundError, version

    card = nvidia_smi("name,memory.total,driver_version")
    head = (f"one {card[0].split(', ')[0]} ({card[0].split(', ')[1]} MiB, driver {card[0].split(', ')[2]})"
            if card else "no NVIDIA GPU (CPU)")

    def v(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "absent"

    return (head + f", Python {sys.version.split()[0]}, " +
            ", ".join(f"{n} {v(n)}" for n in ("torch", "transformers", "trl", "peft", "accelerate", "deepspeed")))


def summary(rows: list[dict], budget: float, command: str, when: str, where: str) -> list[str]:
    """The block for docs/gpu-runs.md: when, where, the command, one row per check."""
    counts = {s: sum(r["status"] == s for r in rows) for s in ("PASS", "FAIL", "SKIP")}
    spent = sum(r["seconds"] for r in rows)
    out = ["", "---- for docs/gpu-runs.md ----", f"**{when}**, {where}:", "", "```bash", command, "```", "",
           f"{counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP in {spent:.0f} s of a {budget:.0f} s "
           f"budget.", "", "| check | result | seconds (planned) | what it showed |", "|---|---|---:|---|"]
    for r in rows:
        detail = r["detail"].replace("|", "/")
        out.append(f"| {r['name']} | {r['status']} | {r['seconds']:.0f} ({PLAN[r['name']].seconds}) | {detail} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the stand-in's sizes: the same code, in seconds, on a CPU")
    ap.add_argument("--dir", default=os.environ.get("GPU_SMOKE_DIR") or "/tmp/hardex-first-run",
                    help="work folder: models (8 GB for the 4B), runs, logs")
    ap.add_argument("--out", help="where first-run.md and first-run-logs.txt are written as checks finish ($OUT)")
    ap.add_argument("--check", choices=CHECKS, help="run one check in this process")
    ap.add_argument("--only", nargs="+", choices=CHECKS, help="run these checks only (in the plan's order)")
    ap.add_argument("--budget", type=float, default=DEFAULT_BUDGET, help="seconds for all checks")
    ap.add_argument("--plan", action="store_true", help="print the order, the budgets and the shares; run nothing")
    ap.add_argument("--card-mib", type=int, default=81559, help="--plan: the card's memory (an H100 80GB: 81559)")
    args = ap.parse_args(argv)
    names = [n for n in CHECKS if not args.only or n in args.only]
    if args.plan:
        print("\n".join(plan_lines(names, args.budget, args.card_mib * 2**20)))
        return 0
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    if args.check:
        run_check(args.check, args.tiny, work)
        return 0
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    where = machine()
    command = " ".join(["python3 tools/first_run_check.py", *(argv if argv is not None else sys.argv[1:])])
    report = Report(Path(args.out) if args.out else None,
                    [f"first-run check, {'tiny sizes' if args.tiny else 'real sizes'}, {when}", where, command,
                     *plan_lines(names, args.budget, int((nvidia_smi("memory.total") or [81559])[0]) * 2**20), ""])
    flags = ["--tiny"] if args.tiny else []
    rows = run_plan(names, args.budget,
                    lambda name, limit: run_one(name, min(limit, 300) if args.tiny else limit, work, flags), report)
    report.write(*summary(rows, args.budget, command, when, where))
    return 1 if any(r["status"] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
