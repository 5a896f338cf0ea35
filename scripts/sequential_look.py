"""A look of the sequential design: the deciding comparisons' verdicts from the evaluations so far, and the
runs the next batch of seeds goes to (hardex.report.looks)."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.io import write_json_atomic
from hardex.job import job_log
from hardex.report.loading import load_results
from hardex.report.looks import look_in_metrics
from hardex.report.runs import run_summary
from hardex.sequential import Design

with job_log(snakemake) as log:
    p, i = snakemake.params, snakemake.input
    res = load_results(i.evals, i.bases, (), p.benchmarks, p.pass_k)
    summaries = {m: run_summary(res.in_metric(m)) for m in p.metrics}  # the first decides (report.metrics)
    record = look_in_metrics(summaries, Design(**p.design), [tuple(c) for c in p.deciding], p.alpha, p.margin,
                             [tuple(c) for c in p.cells], int(snakemake.wildcards.look))
    write_json_atomic(record, snakemake.output[0])
    for v in record["verdicts"]:
        log(f"{v['model']}/{v['task']}: {v['strategy']} vs {v['versus']}: {v['verdict']} ({record['metric']})")
    log(f"next seeds {record['next_seeds']} for {record['needs_seeds']}")
