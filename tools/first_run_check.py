"""The first-run check at the presets' real sizes (`tools/gpu-smoke.sh --first-run`): what a user's first paid run
would meet, each check in a process of its own, one PASS/FAIL/SKIP line each with the peak GPU memory beside the
memory plan's estimate for the same job. docs/gpu-runs.md says what each line means and what ran where.

    python tools/first_run_check.py [--tiny] [--dir DIR] [--budget 540] [--only NAME ...]
    python tools/first_run_check.py --check NAME [--tiny]          # one, in this process

Models are initialised at random from the kept config.json files (hardex.architectures): the real shapes and
vocabularies, nothing downloaded; the tokenizer is the family's stand-in (hardex.rehearsal.standin). Random weights
almost never sample an end token, so every completion runs to its maximum length: the worst case the plan assumes.
Everything it needs travels to a machine without internet (docs/offline-gpu.md). `--tiny` runs the same code at
the stand-in's sizes on whatever device there is (CI, on a CPU: tests/unit/test_gpu_first_run.py); its memory
figures mean nothing, its failures do. The GPU smoke (tools/gpu_smoke.py) checks the mechanisms on stand-ins.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the library, also where hardex is not pip-installed
sys.path.insert(0, str(ROOT / "tools"))  # the smoke's runner

from gpu_smoke import Skip, _result, run_in_processes  # noqa: E402

GIB = 2**30
CHECKS = ("fork-safety", "train-paper", "eval-paper", "eval-phi4", "mini-generation", "full-ft-moves",
          "trl-rollouts", "zero3-1proc")
#: seconds each check may take on one H100 (the sum leaves room in a 10-minute command)
LIMITS = {"train-paper": 200, "eval-paper": 90, "eval-phi4": 120, "mini-generation": 60, "full-ft-moves": 60,
          "trl-rollouts": 90, "zero3-1proc": 90, "fork-safety": 60}
#: the paper preset's model the train and evaluate checks run (its plan's largest 4B job)
PAPER_MODEL = ("hard_examples_paper.yaml", "qwen3-4b", "Qwen/Qwen3-4B")


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
    """A preset of experiments/, checked as planning checks it (defaults filled), with each model's weights those
    of its kept architecture (path: standin; a built one is built): the checks train random weights of the real sizes, and a host with
    no network or cache (a compute node) must still plan them."""
    import yaml

    from hardex.config import check_config

    cfg = yaml.safe_load((ROOT / "experiments" / name).read_text())
    for m in cfg["models"].values():
        if m["path"] != "build":  # a built model needs nothing fetched
            m["architecture"] = m.get("architecture") or m["path"]
            m["path"] = "standin"
            m.pop("gguf", None)
    return check_config(cfg)


def planned(cfg: dict, model: str, kind: str) -> str:
    """The memory plan's estimate for one job of a preset, as `hardex plan` prints it."""
    from hardex.memory_plan import plan

    job = next(p for p in plan(cfg) if p.model == model and p.kind == kind)
    card = f" of {job.device_gb:g} GB" if job.device_gb else ""
    return f"plan {job.estimate.total:.1f} GiB{card} ({job.estimate.batch or job.micro_batch})"


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


def train(model_dir: Path, rows: list[dict], g: dict, run: Path) -> dict:
    """hardex's train_grpo on `rows` with a reward that mixes every group (by the completion's length)."""
    from hardex.training import train_grpo

    reward = lambda completion, answer, prompt: float(len(completion) % 2)  # noqa: E731
    return train_grpo(str(model_dir), rows, reward, g, 0, run, run / "final", run / "steps.parquet",
                      identity={"model": str(model_dir)}, log=lambda *a: None, run_name=run.name)


def step_seconds(run: Path) -> list[float]:
    import polars as pl

    return pl.read_parquet(run / "steps.parquet")["step_time"].to_list()


def tiny_grpo(g: dict, tiny: bool, **changes) -> dict:
    """A preset's grpo block for a check of a few steps; with `tiny`, a few short completions too."""
    small = dict(prompts_per_step=2, num_generations=2, gradient_accumulation_steps=1, max_completion_length=8)
    return {**g, "save_steps": 1, "epochs": None, **changes, **(small if tiny else {})}


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
    beta 0.1, LoRA r 32 on seven projections, gradient checkpointing, hardex's rollouts, 250 tokens)."""
    import torch

    name, model, hub_id = PAPER_MODEL
    from hardex.settings import grpo_settings

    cfg = preset(name)
    preset_steps = grpo_settings(cfg, model)["max_steps"]
    g = tiny_grpo(grpo_settings(cfg, model), tiny, max_steps=2)
    model_dir = saved_model(hub_id, work, tiny)
    tok = tokenizer_of(hub_id)
    rows = [{"prompt": p, "answer": "1"} for p in prompts(tok, 2 * g["prompts_per_step"], 16 if tiny else 500)]
    if cuda():
        torch.cuda.reset_peak_memory_stats()
    summary = train(model_dir, rows, g, work / "run-paper")
    if summary["steps"] != 2:
        raise AssertionError(f"trained {summary['steps']} steps, expected 2")
    seconds = step_seconds(work / "run-paper")
    return (f"{summary['steps']} steps; {peak_gib()}; {planned(cfg, model, 'train')}; step seconds "
            f"{', '.join(f'{s:.1f}' for s in seconds)}: the preset's {preset_steps} steps "
            f"~{seconds[-1] * preset_steps / 3600:.1f} h")


def check_eval_paper(tiny: bool, work: Path) -> str:
    """One evaluation batch of that Qwen3-4B with its trained adapter (train-paper's last checkpoint, where it ran):
    the transformers generator at the preset's token budget, GSM8K's decoding."""
    import torch

    from hardex.settings import decodings, generation_settings
    from hardex.generation.hf import HFGenerator
    from hardex.generation.sampling import Sampling

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

    from hardex.settings import decodings, generation_settings, grpo_settings
    from hardex.generation.hf import HFGenerator
    from hardex.generation.sampling import Sampling

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


def check_mini_generation(tiny: bool, work: Path) -> str:
    """gpu_mini's probe batch at its token budget on its built model's shape, held to one job's share of the card
    (HARDEX_JOBS_PER_GPU=12, as its header runs it)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from hardex.settings import generation_settings, probe_settings
    from hardex.devices import hold_to_share
    from hardex.generation.hf import HFGenerator
    from hardex.generation.sampling import Sampling
    from hardex.model_shape import build_architecture

    cfg = preset("gpu_mini.yaml")
    os.environ["HARDEX_JOBS_PER_GPU"] = "12"
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
    gen.generate(prompts(tok, n, 100, chat=False), probe["k"], Sampling.from_config({**probe, "max_new_tokens": new}),
                 seed=0)
    if not cuda():
        held = f"a {share:.3g} share of a card (none here)"
    else:
        slice_gib = share * torch.cuda.mem_get_info()[1] / GIB
        held = f"the job's slice {slice_gib:.1f} GiB (1/12 of the card)"
        if torch.cuda.max_memory_reserved() / GIB > slice_gib:
            raise AssertionError(f"{peak_gib()}: more than {held}")
    return f"{n} prompts x {probe['k']} samples x {new} tokens; {peak_gib()}; {held}; {planned(cfg, 'mini', 'probe')}"


def check_full_ft_moves(tiny: bool, work: Path) -> str:
    """gpu_mini's full fine-tune (lr 5e-5, weight decay 0.1, precision auto) for 4 steps on the Qwen3 stand-in: the
    share of matrix entries that moved. bfloat16 weights under a plain AdamW round such updates away."""
    import torch
    from safetensors.torch import load_file

    from hardex.settings import grpo_settings

    cfg = preset("gpu_mini.yaml")
    g = tiny_grpo(grpo_settings(cfg, "mini"), True, max_steps=4, save_steps=4)
    model_dir = standin(work)
    tok = tokenizer_of("Qwen/Qwen3-4B")
    run = work / "run-full-ft"
    train(model_dir, [{"prompt": p, "answer": "1"} for p in prompts(tok, 8, 32)], g, run)
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
    g = tiny_grpo(grpo_settings(cfg, "qwen3-4b"), True, max_steps=2,
                  quantization="4bit" if four_bit else "none", prompts_per_step=2, num_generations=4)
    tok = tokenizer_of("Qwen/Qwen3-4B")
    run = work / "run-trl"
    summary = train(standin(work), [{"prompt": p, "answer": "1"} for p in prompts(tok, 8, 32)], g, run)
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
    from hardex.settings import grpo_settings
    from hardex.launch import launch_training
    from hardex.io import checkpoint_steps

    g = tiny_grpo(grpo_settings(preset(PAPER_MODEL[0]), PAPER_MODEL[1]), True, max_steps=2, rollouts="trl",
                  distributed="zero3", gradient_accumulation_steps=2, num_generations=4)
    tok = tokenizer_of("Qwen/Qwen3-4B")
    ckpt = work / "run-zero3" / "checkpoints"
    ckpt.mkdir(parents=True, exist_ok=True)
    spec = {"model_path": str(standin(work)), "rows": [{"prompt": p, "answer": "1"} for p in prompts(tok, 8, 32)],
            "reward": {"family": "arith", "scoring": "lenient", "scale": 1.0}, "g": g, "seed": 0,
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the stand-in's sizes: the same code, in seconds, on a CPU")
    ap.add_argument("--dir", default=os.environ.get("GPU_SMOKE_DIR") or "/tmp/hardex-first-run")
    ap.add_argument("--check", choices=CHECKS, help="run one check in this process")
    ap.add_argument("--only", nargs="+", choices=CHECKS, help="run these checks only")
    ap.add_argument("--budget", type=int, default=540, help="seconds for all checks (the command's limit less a margin)")
    args = ap.parse_args(argv)
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    if args.check:
        run_check(args.check, args.tiny, work)
        return 0
    print(f"first-run check, {'tiny sizes' if args.tiny else 'real sizes'}", flush=True)
    flags = ["--tiny"] if args.tiny else []
    failed = run_in_processes(__file__, args.only or CHECKS, work, flags, lambda name: LIMITS[name] * (2 if args.tiny else 1),
                              args.budget)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
