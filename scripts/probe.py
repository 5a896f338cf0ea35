"""Probe the base model K times per pool example; print the pass-rate histogram."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.adaptive import probe_pool_adaptive
from hardex.io import read_parquet, write_parquet_atomic
from hardex.job import job_log, job_model, make_generator, renderer, set_threads, work_identity
from hardex.learnability import probe_report
from hardex.posterior import with_posterior
from hardex.probing import PROVENANCE_KEY, histogram, probe_pool, probe_provenance
from hardex.tasks import get_task


def main():
    with job_log(snakemake) as log:
        set_threads(snakemake.threads)
        p, gen = job_model(snakemake.params.model), snakemake.params.generation
        settings = snakemake.params.settings
        adaptive = settings.get("adaptive") or {}
        pool = read_parquet(snakemake.input.pool)
        task = get_task(snakemake.params.family, snakemake.params.scoring, settings.get("prompt"))
        args = (pool, task, renderer(p["path"], p["chat"], task.prompt_format.system), lambda: make_generator(gen, p),
                settings, Path(snakemake.params.work_dir))
        identity = work_identity(p, task, gen)
        log(f"{gen['backend']} backend")
        if adaptive.get("enabled"):
            counts, samples = probe_pool_adaptive(*args, identity=identity, log=log)
        else:
            counts, samples = probe_pool(*args, chunk_size=settings["chunk_size"], identity=identity, log=log)
        counts, prior = with_posterior(counts)  # full or adaptive: the pool's own prior either way
        provenance = probe_provenance(settings, identity, prior)
        write_parquet_atomic(samples, snakemake.output.samples)
        write_parquet_atomic(counts, snakemake.output.table, metadata={PROVENANCE_KEY: provenance})
        log("probe provenance (in the table's metadata): " + ", ".join(
            f"{k} {v}" for k, v in provenance.items() if k != "prior"))
        log(f"pass-rate prior: {prior['method']} Beta({prior['a']:.3g}, {prior['b']:.3g})")
        if adaptive.get("enabled"):
            log(f"adaptive probing: {int(counts['k'].sum())} samples taken of {counts.height * settings['k']}")
        log("pass-rate histogram (examples per bin):")
        for label, count in histogram(counts["pass_rate"]):
            log(f"  {label:12s} {count:6d}  {'#' * round(50 * count / counts.height)}")
        if counts["greedy_correct"].is_not_null().all():
            log(f"greedy accuracy of the base model: {counts['greedy_correct'].mean():.3f}")
        for line in probe_report(counts, samples, pool, task):
            log(line)


# vLLM starts its engine in a spawned process, which imports this script again: the job runs only here
if __name__ == "__main__":
    main()
