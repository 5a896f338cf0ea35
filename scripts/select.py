"""Write one strategy's subset of the pool."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.io import read_parquet, read_parquet_metadata, write_parquet_atomic
from hardex.job import job_log
from hardex.learnability import mixed, tie_line, with_probe_posterior
from hardex.probing import PROVENANCE_KEY
from hardex.selection import select

with job_log(snakemake) as log:
    probe = read_parquet(snakemake.input.probe)
    subset = select(probe, snakemake.wildcards.strategy, snakemake.params.budget, snakemake.params.seed,
                    in_tiers=snakemake.params.tiers, band=snakemake.params.band,
                    group_size=snakemake.params.group_size)
    # the train job's refusal reads each example's posterior, and the probe's sampling to compare with GRPO's
    provenance = read_parquet_metadata(snakemake.input.probe, PROVENANCE_KEY)
    write_parquet_atomic(with_probe_posterior(subset, probe), snakemake.output[0],
                         metadata={PROVENANCE_KEY: provenance} if provenance else None)
    log(f"{snakemake.wildcards.strategy}: {subset.height} of {probe.height}, "
        f"mean pass rate {subset['pass_rate'].mean():.3f}, {mixed(subset['pass_rate']).sum()} with 0 < pass rate < 1")
    if line := tie_line(snakemake.wildcards.strategy, subset, probe):
        log(line)
    if snakemake.wildcards.strategy == "band":
        lo, hi = snakemake.params.band
        inside = subset["pass_rate"].is_between(lo, hi).sum()
        log(f"band [{lo}, {hi}]: {inside} of the {subset.height} inside the window, "
            f"{subset.height - inside} nearest outside it")
