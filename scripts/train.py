"""GRPO on one subset; resumes from the run's last checkpoint after a kill."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.controls import RewardSpec, control_rows, reward_line
from hardex.io import read_parquet, read_parquet_metadata
from hardex.job import job_log, job_model, renderer, set_threads, work_identity
from hardex.job_time import train_time_limit
from hardex.learnability import check_learnable, sampling_mismatch
from hardex.probing import PROVENANCE_KEY
from hardex.reward_hook import resolved
from hardex.selection import RunName
from hardex.tasks import get_task
from hardex.training import subset_rows, train_grpo

with job_log(snakemake) as log:
    # the job's runtime limit from its start, which its first steps are held to (hardex.time_limit)
    limit = train_time_limit(snakemake.config, snakemake.wildcards.model, getattr(snakemake.resources, "runtime", None))
    set_threads(snakemake.threads)
    p, grpo = job_model(snakemake.params.model), snakemake.params.grpo
    task = get_task(snakemake.params.family, snakemake.params.scoring, grpo.get("prompt"))
    # the task's reward hook (tasks.<task>.reward), its file found from anywhere the run's processes start
    hook = resolved(grpo["reward_hook"]["spec"]) if "reward_hook" in grpo else None
    subset = read_parquet(snakemake.input.subset)
    if warning := sampling_mismatch(read_parquet_metadata(snakemake.input.subset, PROVENANCE_KEY), grpo):
        log(warning)
    log(check_learnable(subset, snakemake.wildcards.strategy, snakemake.params.allow_unlearnable,
                        grpo["num_generations"]))
    rows = subset_rows(subset, read_parquet(snakemake.input.pool), task,
                       renderer(p["path"], p["chat"], task.prompt_format.system))
    log(f"{len(rows)} training examples, steps of {grpo['prompts_per_step']} prompts x "
        f"{grpo['num_generations']} generations, rollouts sampled by {grpo['rollouts']}")
    # a control run (selection.controls) trains on its strategy's subset with another reward (hardex.controls)
    control = RunName.parse(snakemake.wildcards.strategy).control
    rows, note = control_rows(control, rows, int(snakemake.wildcards.seed))
    log(reward_line(control, grpo["reward_scale"], hook) + (f"; {note}" if note else ""))
    train_grpo(
        p["path"],
        rows,
        # the reward as data: built into its function by train_grpo, or by each process of a run trained in several
        RewardSpec(snakemake.params.family, snakemake.params.scoring, grpo["reward_scale"], control, hook),
        grpo,
        int(snakemake.wildcards.seed),
        Path(snakemake.params.run_dir),
        Path(snakemake.output.final),
        Path(snakemake.output.steps),
        # a control's reward as its log states it: a changed control reward starts its runs afresh
        identity=work_identity(p, task) | ({"control": control, "reward": reward_line(control, grpo["reward_scale"])}
                                           if control else {}),
        log=log,
        run_name="{model}/{task}/{strategy}/seed{seed}".format(**dict(snakemake.wildcards)),
        time_limit=limit,
    )
