"""Regress gain on learnable % over the cells of report.regression_strategies; write results/regression.json."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import json

from hardex.io import write_json_atomic
from hardex.job import job_log
from hardex.report.loading import load_pool, load_results
from hardex.report.pool import subset_pass_rates
from hardex.report.reference import load_reference
from hardex.report.regression import regression_report
from hardex.report.runs import run_summary

with job_log(snakemake) as log:
    p, i = snakemake.params, snakemake.input
    res = load_results(i.evals, i.bases, i.steps, p.benchmarks, p.pass_k)
    # the probe's prediction of each subset's learnable %, made before training, beside the share measured in it
    subset_table = subset_pass_rates(*load_pool(i.probes, i.subsets), p.generations)
    out = regression_report(run_summary(res), p.stats["ci_level"], p.stats["iterations"], p.stats["seed"],
                            load_reference(p.reference), p.names, p.regression_strategies, subset_table)
    out["provenance"] = p.provenance
    write_json_atomic(out, snakemake.output[0])
    log(json.dumps({k: {m: v for m, v in fit.items() if m != "points"}
                    for k, fit in out.items() if k != "provenance"}, indent=1))
