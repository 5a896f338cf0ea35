"""Evaluate the base model (evaluate_base) or every checkpoint of a run (evaluate_run)."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.evaluation import evaluate_checkpoints, run_checkpoints
from hardex.io import write_parquet_atomic
from hardex.job import job_log, job_model, make_generator, renderer, set_threads


def main():
    with job_log(snakemake) as log:
        set_threads(snakemake.threads)
        p, gen = job_model(snakemake.params.model), snakemake.params.generation
        generator = make_generator(gen, p)
        log(f"{gen['backend']} backend")
        run_dir = getattr(snakemake.params, "run_dir", None)
        # a run: its checkpoints under its own seed; the base model: once per run seed it is compared with
        checkpoints = run_checkpoints(Path(run_dir)) if run_dir else [(0, None)]
        seeds = [int(snakemake.wildcards.seed)] if run_dir else snakemake.params.seeds
        log(f"evaluating steps {[s for s, _ in checkpoints]} for run seed(s) {seeds}")
        table = evaluate_checkpoints(generator, checkpoints, seeds, snakemake.params.benchmarks,
                                     list(snakemake.input.benchmarks), snakemake.params.scoring,
                                     lambda task: renderer(p["path"], p["chat"], task.prompt_format.system),
                                     snakemake.params.eval_seed, log)
        write_parquet_atomic(table, snakemake.output[0])


# vLLM starts its engine in a spawned process, which imports this script again: the job runs only here
if __name__ == "__main__":
    main()
