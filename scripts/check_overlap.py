"""Refuse a task whose pool holds questions of its benchmarks or near-duplicates (beyond what the config accepts)."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.io import read_parquet, write_json_atomic
from hardex.job import job_log
from hardex.overlap import check_task
from hardex.tasks import get_task

with job_log(snakemake) as log:
    p = snakemake.params
    benchmarks = {ref: read_parquet(f) for ref, f in zip(p.benchmarks, snakemake.input.benchmarks)}
    keys = {ref: get_task(family).problem_key for ref, family in p.families.items()}  # each family's canonical form
    result = check_task(snakemake.wildcards.task, p.pool, read_parquet(snakemake.input.pool), benchmarks,
                        p.allowed, keys, p.allowed_near)
    write_json_atomic(result, snakemake.output[0])
    for ref, f in result["benchmarks"].items():
        log(f"{ref}: {f['overlap']} of {f['n_benchmark']} questions in the pool ({f['exact']} exact, "
            f"{f['normalized']} after normalizing, {f['same_problem']} the same problem); {f['near_duplicates']} "
            f"near-duplicates ({f['same_numbers']} same numbers, {f['shared_ngram']} sharing a {result['ngram']}-gram)")
