"""Evaluate the base model (evaluate_base) or every checkpoint of a run (evaluate_run)."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import polars as pl

from hardex.evaluation import evaluate_examples, evaluation_seed, greedy_outcomes, run_checkpoints
from hardex.io import read_parquet, write_parquet_atomic
from hardex.job import job_log, job_model, make_generator, renderer, set_threads
from hardex.metrics import summarize
from hardex.tasks import get_task


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
        frames, greedy = [], {}
        for step, folder in checkpoints:
            generator.use_checkpoint(folder)
            for run_seed in seeds:
                sampling_seed = evaluation_seed(snakemake.params.eval_seed, run_seed)
                for bench, path in zip(snakemake.params.benchmarks, snakemake.input.benchmarks):
                    rows = read_parquet(path).to_dicts()
                    task = get_task(bench["family"], snakemake.params.scoring, bench.get("prompt"))
                    render = renderer(p["path"], p["chat"], task.prompt_format.system)
                    out = evaluate_examples(generator, task, rows, render, bench["decoding"], step, sampling_seed, run_seed)
                    if bench["decoding"].get("greedy"):  # evaluation.greedy: once per checkpoint, every seed's rows
                        if (step, bench["ref"]) not in greedy:
                            greedy[step, bench["ref"]] = greedy_outcomes(generator, task, rows, render, bench["decoding"], step)
                        out = out.join(greedy[step, bench["ref"]], on="id", how="left")
                    frames.append(out.with_columns(pl.lit(bench["ref"]).alias("benchmark")))
                    s = summarize(out, bench["decoding"]["pass_k"]).row(0, named=True)
                    log(f"seed {run_seed} step {step:5d}  {bench['ref']:24s} " + "  ".join(
                        f"{k} {v:.3f}" for k, v in s.items() if k not in ("step", "n_examples") and v is not None))
        write_parquet_atomic(pl.concat(frames), snakemake.output[0])


# vLLM starts its engine in a spawned process, which imports this script again: the job runs only here
if __name__ == "__main__":
    main()
