"""Write the probe table from pass rates computed elsewhere (tasks.<task>.probe.from); print its histogram."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import polars as pl

from hardex.imported_probe import imported_provenance, probe_table, read_rates
from hardex.io import read_parquet, write_parquet_atomic
from hardex.job import job_log
from hardex.posterior import with_posterior
from hardex.probing import PROVENANCE_KEY, SAMPLES_SCHEMA, histogram

with job_log(snakemake) as log:
    key, rates_file = snakemake.params.key, snakemake.params.rates
    rates = read_rates(rates_file, key)
    counts, prior = with_posterior(probe_table(rates, read_parquet(snakemake.input.pool), key))
    provenance = imported_provenance(rates_file, snakemake.params.note, rates, prior)
    # no completions were imported: an empty samples table keeps the probe stage's outputs and their readers
    write_parquet_atomic(pl.DataFrame(schema=SAMPLES_SCHEMA), snakemake.output.samples)
    write_parquet_atomic(counts, snakemake.output.table, metadata={PROVENANCE_KEY: provenance})
    imported = provenance["imported"]
    if imported["sha256"] != snakemake.params.sha256:
        raise SystemExit(f"{key}: {rates_file} changed since the workflow was planned; run snakemake again")
    log(f"pass rates of {counts.height} pool examples imported from {rates_file} ({key}), sha256 {imported['sha256']}"
        + (f": {imported['note']}" if imported["note"] else "") + "; no model sampled")
    log(f"samples per example {counts['k'].min()}-{counts['k'].max()}, greedy answers "
        f"{'given' if imported['greedy'] else 'not given (greedy_correct null)'}, tokens not known")
    log(f"pass-rate prior: {prior['method']} Beta({prior['a']:.3g}, {prior['b']:.3g})")
    log("pass-rate histogram (examples per bin):")
    for label, count in histogram(counts["pass_rate"]):
        log(f"  {label:12s} {count:6d}  {'#' * round(50 * count / counts.height)}")
    mixed = counts["pass_rate"].is_between(0, 1, closed="none")
    log(f"learnable: {mixed.sum()} of {counts.height} pool examples ({100 * mixed.mean():.1f} %) "
        "have 0 < pass rate < 1")
