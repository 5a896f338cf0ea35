"""Write every table of the report (Markdown, CSV, LaTeX, HTML) from the run's result files."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.job import job_log
from hardex.report.loading import load_overlaps, load_pool, load_results
from hardex.report.reference import load_reference
from hardex.report.render import write_table
from hardex.report.rescoring import RESCORED_NOTE, rescored_table
from hardex.report.tables import TABLES, build_tables

with job_log(snakemake) as log:
    p, i = snakemake.params, snakemake.input
    res = load_results(i.evals, i.bases, i.steps, p.benchmarks, p.pass_k)
    probes, subsets = load_pool(i.probes, i.subsets)
    # the stored completions rescored by every scorer of their task: the benchmarks' data give the references
    rescored = rescored_table(i.evals, i.bases, p.benchmarks, dict(zip(p.rescoring["benchmarks"], i.benchmark_data)),
                              p.rescoring["families"], p.rescoring["scorings"])
    tables = build_tables(res, probes, subsets, p.stats["ci_level"], p.stats["iterations"], p.stats["seed"],
                          load_reference(p.reference), p.names, p.generations, load_overlaps(i.overlaps),
                          p.equivalence_margin, (rescored, RESCORED_NOTE), power=p.power, metrics=p.metrics)
    out_dir = {Path(f).stem: Path(f).parent for f in snakemake.output}
    for name, (df, note, *layout) in tables.items():  # layout: the headline's columns and footnote
        write_table(df, out_dir[name] / name, TABLES[name], note, p.decimals, banner=p.banner, **(layout or [{}])[0])
        log(f"{name}: {df.height} rows")
