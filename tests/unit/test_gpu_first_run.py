"""Issue 35: what would break on a first multi-GPU, 4-bit or server-mode run, checked where the mechanism runs
on a CPU (a gloo group, a fake Slurm allocation, a stand-in server, the config check), with the GPU tests beside
them (they skip without CUDA; tools/gpu-smoke.sh runs the same on a lent GPU)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

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
    real_config = trl.GRPOConfig

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
    grpo = check_config(copy.deepcopy(smoke_config))["grpo"]
    with pytest.raises(Stop):
        fit(str(tiny_model), [{"prompt": "p", "answer": "a"}] * 8, lambda *a: 0.0, grpo, 0, tmp_path, None, 2, {})
    assert order == ["GRPOConfig", "from_pretrained"]


def test_the_smoke_script_runs_its_cpu_checks(tmp_path):
    from tests.support import ROOT

    res = subprocess.run(["bash", str(ROOT / "tools" / "gpu-smoke.sh"), "--cpu"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT,
                         env={**os.environ, "PYTHON": sys.executable, "GPU_SMOKE_DIR": str(tmp_path)})
    # (the script puts src/ first on PYTHONPATH and keeps the rest: an offline host's packages live there)
    out = res.stdout
    assert res.returncode == 0, out[-3000:] + res.stderr[-3000:]
    assert "FAIL" not in out.replace("0 FAIL", "")
    for check in ("versions", "nccl-reduction", "cuda-order", "grpo-1proc", "grpo-accelerate", "grpo-4bit", "vllm"):
        assert any(line.split()[1:2] == [check] for line in out.splitlines()
                   if line.startswith(("PASS", "SKIP"))), check
    assert "SUMMARY" in out


def test_the_first_run_check_runs_at_tiny_sizes(tmp_path):
    """tools/gpu-smoke.sh --first-run --tiny: every check of the real-size first run, its code run at stand-in sizes
    (a check that cannot run here skips with its reason; none fails), on a host with no network and an empty model
    cache, as a lent GPU machine or a compute node is: its first GPU run failed four checks there."""
    from tests.support import ROOT

    sys.path.insert(0, str(ROOT / "tools"))
    from first_run_check import CHECKS

    res = subprocess.run(["bash", str(ROOT / "tools" / "gpu-smoke.sh"), "--first-run", "--tiny", "--budget", "900",
                          "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=900, cwd=ROOT,
                         env={**os.environ, "PYTHON": sys.executable, "GPU_SMOKE_DIR": str(tmp_path),
                              "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-cache")})
    out = res.stdout
    assert res.returncode == 0, out[-3000:] + res.stderr[-3000:]
    results = {line.split()[1]: line.split()[0] for line in out.splitlines()
               if line.startswith(("PASS", "SKIP", "FAIL"))}
    assert list(results) == list(CHECKS), out  # each once, in the plan's order
    assert "FAIL" not in results.values(), out
    # what a CPU runs, it must pass: only ZeRO (CUDA and deepspeed) may skip
    assert {name for name, status in results.items() if status == "SKIP"} <= {"zero3-1proc"}, out
    assert "weights saved in float32" in out and "adapters float32" in out
    assert "2 jobs of a 1/12 share up together, 2 generating at once" in out  # twelve-shares' code, two of them
    assert "adapter on" in out  # eval-paper found train-paper's adapter
    written = (tmp_path / "out" / "first-run.md").read_text()  # what a device command brings back
    assert all(f"| {name} | {status} |" in written for name, status in results.items())
    assert "==== train-paper: PASS" in (tmp_path / "out" / "first-run-logs.txt").read_text()


# ---- the first-run check's plan (issue 64 item 5): one device command of at most 10 minutes ----

@pytest.fixture
def first_run():
    from tests.support import ROOT

    sys.path.insert(0, str(ROOT / "tools"))
    import first_run_check

    return first_run_check


class FakeChecks:
    """Checks that take given seconds on a fake clock (their planned seconds unless told), cut at their limit as
    run_one cuts them; what each was allowed is kept."""

    def __init__(self, plan, takes=None, seen=None):
        self.plan, self.takes, self.seen = plan, takes or {}, seen
        self.now, self.limits = 0.0, {}

    def clock(self) -> float:
        return self.now

    def run(self, name: str, limit: float) -> dict:
        if self.seen:
            self.seen(name)
        self.limits[name] = limit
        took = self.takes.get(name, self.plan[name].seconds)
        self.now += min(took, limit)
        if took > limit:
            return {"status": "FAIL", "detail": f"timed out after {limit:.0f} s", "seconds": limit}
        return {"status": "PASS", "detail": f"{name} ran", "seconds": took, "record": [f"  {name} says"]}


def test_the_first_run_check_runs_the_items_checks_in_its_order_the_essential_ones_first(first_run, tmp_path):
    fake = FakeChecks(first_run.PLAN)
    report = first_run.Report(None, [])
    rows = first_run.run_plan(first_run.CHECKS, 10_000, fake.run, report, fake.clock)
    order = [r["name"] for r in rows]
    assert order[:3] == ["graph-nccl", "train-paper", "twelve-shares"]  # the quick tests, then the two essential
    assert order.index("train-paper") < order.index("eval-paper")  # the evaluation reads the train step's adapter
    rest = ["eval-phi4", "eval-paper", "one-share", "zero3-1proc", "small-train-job"]  # the item's order
    assert [n for n in order if n in rest] == rest
    assert set(order[:8]) == set(first_run.ITEM)  # the older checks only after the item's
    assert all(r["status"] == "PASS" for r in rows)


def test_the_items_checks_at_their_planned_seconds_fit_one_device_command(first_run):
    fake = FakeChecks(first_run.PLAN)
    rows = first_run.run_plan(first_run.CHECKS, first_run.DEFAULT_BUDGET, fake.run, first_run.Report(None, []),
                              fake.clock)
    ran = [r["name"] for r in rows if r["status"] == "PASS"]
    assert ran[:8] == list(first_run.ITEM)  # every one of the item's runs, none cut
    assert first_run.STARTUP_S + fake.now <= first_run.COMMAND_S - 30  # installing, the checks and a margin
    assert all(r["status"] == "SKIP" and "budget is spent" in r["detail"] for r in rows if r["name"] not in ran)


def test_the_train_step_has_no_cap_of_its_own_and_leaves_the_twelve_shares_their_time(first_run):
    """The paper preset's step took 79 s on an H200 and its check timed out at a fixed 200 s cap: now it may take
    whatever the budget leaves after the twelve shares' planned time."""
    budget = first_run.DEFAULT_BUDGET
    fake = FakeChecks(first_run.PLAN, takes={"train-paper": 380})
    rows = {r["name"]: r for r in first_run.run_plan(first_run.CHECKS, budget, fake.run, first_run.Report(None, []),
                                                     fake.clock)}
    assert rows["train-paper"]["status"] == "PASS"
    graph, twelve = first_run.PLAN["graph-nccl"].seconds, first_run.PLAN["twelve-shares"]
    assert fake.limits["train-paper"] == budget - graph - twelve.seconds
    assert rows["twelve-shares"]["status"] == "PASS" and fake.limits["twelve-shares"] >= twelve.seconds
    skipped = [n for n, r in rows.items() if r["status"] == "SKIP"]
    assert skipped and all("budget is spent" in rows[n]["detail"] for n in skipped)
    assert fake.now <= budget

    # a train step that never ends is cut where the twelve shares' time begins, and they still run
    fake = FakeChecks(first_run.PLAN, takes={"train-paper": 10**6})
    rows = {r["name"]: r for r in first_run.run_plan(first_run.CHECKS, budget, fake.run, first_run.Report(None, []),
                                                     fake.clock)}
    assert rows["train-paper"]["status"] == "FAIL" and "timed out" in rows["train-paper"]["detail"]
    assert rows["twelve-shares"]["status"] == "PASS" and fake.now <= budget


def test_a_check_that_hangs_is_cut_at_its_cap_and_the_next_ones_run(first_run):
    fake = FakeChecks(first_run.PLAN, takes={"eval-phi4": 10**6})
    rows = {r["name"]: r for r in first_run.run_plan(first_run.ITEM, 10_000, fake.run, first_run.Report(None, []),
                                                     fake.clock)}
    assert rows["eval-phi4"]["status"] == "FAIL" and fake.limits["eval-phi4"] == first_run.PLAN["eval-phi4"].cap
    assert all(rows[n]["status"] == "PASS" for n in ("eval-paper", "one-share", "small-train-job"))


def test_each_checks_line_is_on_disk_when_it_finishes_and_the_summary_can_be_pasted(first_run, tmp_path):
    """A command cut at its limit brings back what ran: each line is in OUT/first-run.md before the next check
    starts; at the end, a table for docs/gpu-runs.md."""
    md = tmp_path / "out" / "first-run.md"
    done = []

    def seen(name):  # called as each check starts: every earlier one's line is written
        text = md.read_text()
        assert all(f"PASS {n} (" in text for n in done), (done, text)
        done.append(name)

    fake = FakeChecks(first_run.PLAN, seen=seen)
    report = first_run.Report(tmp_path / "out", ["first-run check, real sizes"])
    rows = first_run.run_plan(first_run.ITEM, 10_000, fake.run, report, fake.clock)
    report.write(*first_run.summary(rows, 10_000, "python3 tools/first_run_check.py", "2026-12-07", "one H100"))
    text = md.read_text()
    assert done == list(first_run.ITEM)
    assert "  train-paper says" in text  # what a check prints for the record
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert table[0].startswith("| check | result") and len(table) == 2 + len(first_run.ITEM)
    assert "8 PASS, 0 FAIL, 0 SKIP" in text


def test_twelve_shares_with_their_cuda_contexts_fit_the_card(first_run):
    """Each of twelve jobs is capped at 1/12 of the card less its CUDA context (hardex.devices), so twelve caps
    and twelve contexts fill the card and no more: an H100 80GB as torch sees it, and as nvidia-smi does."""
    from hardex.devices import CUDA_CONTEXT_BYTES

    for total in (85_029_158_912, 81559 * 2**20, 143771 * 2**20):  # H100 (torch, nvidia-smi), H200
        p = first_run.share_plan(12, total)
        assert p["fits"] and p["full"] <= total
        assert p["cap"] + CUDA_CONTEXT_BYTES <= total / 12
        assert total / 12 - (p["cap"] + CUDA_CONTEXT_BYTES) < 12  # the whole twelfth, to rounding
        assert p["cap"] > 6 * 2**30 if total < 100 * 2**30 else p["cap"] > 11 * 2**30
    with pytest.raises(ValueError, match="no more than its CUDA context"):
        first_run.share_plan(12, 4 * 2**30)  # a third of a GiB each: less than a context


def test_the_plan_mode_prints_the_order_and_budgets_without_running_anything(tmp_path):
    from tests.support import ROOT

    res = subprocess.run([sys.executable, str(ROOT / "tools" / "first_run_check.py"), "--plan", "--dir",
                          str(tmp_path / "never")], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = [line.split(" | ") for line in res.stdout.splitlines() if " | " in line][1:]
    assert [r[0] for r in rows][:3] == ["graph-nccl", "train-paper", "twelve-shares"]
    assert "(no cap)" in dict((r[0], r[2]) for r in rows)["train-paper"]
    assert not any("skipped" in r[-1] for r in rows[:8])  # the item's eight fit the default budget
    assert "12 x (6.14 GiB cap + 0.50 context) = 79.65 of 79.65 GiB" in res.stdout
    assert not (tmp_path / "never").exists()


def test_a_check_cut_at_its_limit_leaves_none_of_its_processes(first_run, tmp_path):
    """twelve-shares starts processes of its own: cut at its limit, its whole process group goes, so that the
    next check has the card to itself."""
    res = first_run.run_one("twelve-shares", 3, tmp_path, ["--tiny"])
    assert res["status"] == "FAIL" and "timed out after 3 s" in res["detail"]
    time.sleep(1)
    left = []
    for proc in Path("/proc").iterdir():
        try:
            if str(tmp_path) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                left.append(proc.name)
        except OSError:
            continue
    assert not left


def test_the_launched_checks_hand_the_workers_the_spec_they_read(first_run, tmp_path, monkeypatch):
    """The smoke's grpo-accelerate check and the first-run check's zero3-1proc build the job spec a run's processes
    are handed (hardex.launch, hardex.train_worker) themselves; on a GPU they launch it. Here each is stopped where
    accelerate would start and its spec read as launch_training and a worker read it: the grpo settings under the
    spec's own key (a spec with the former key "g" failed both on a GPU with KeyError: 'grpo')."""
    import importlib.util

    from hardex import launch, train_worker

    import gpu_smoke

    class Launched(Exception):
        pass

    def command(spec_file, processes, strategy, **options):  # what launch_training read from the spec
        raise Launched(spec_file, options)

    fitted = []
    monkeypatch.setattr(launch, "launch_command", command)
    monkeypatch.setattr(train_worker, "fit", lambda *args: fitted.append(args))
    monkeypatch.setattr(train_worker, "die_with_parent", lambda: None)
    monkeypatch.setattr(train_worker, "hold_to_share", lambda: None)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: find_spec(name, *a) or (object() if name == "deepspeed" else None))
    monkeypatch.setattr(first_run, "cuda", lambda: True)  # past the check's skips; nothing reaches CUDA

    grpo = gpu_smoke._grpo()
    with pytest.raises(Launched) as smoke:
        gpu_smoke._train(tmp_path / "smoke", "Qwen/Qwen3-4B", "grpo-accelerate", grpo, launch=True)
    with pytest.raises(Launched) as zero3:
        first_run.check_zero3_1proc(True, tmp_path / "zero3")
    handed = []
    for launched in (smoke, zero3):
        spec_file, options = launched.value.args
        train_worker.main(str(spec_file))
        handed.append(fitted[-1][3])  # the grpo settings fit was given
        assert (options["accumulation"], options["precision"]) == (handed[-1]["gradient_accumulation_steps"],
                                                                   handed[-1]["precision"])
    unresolved = {k: v for k, v in handed[0].items() if k != "precision"}  # the smoke resolves auto first
    assert unresolved == {k: v for k, v in grpo.items() if k != "precision"}
    assert (handed[1]["distributed"], handed[1]["rollouts"], handed[1]["max_steps"]) == ("zero3", "trl", 2)
