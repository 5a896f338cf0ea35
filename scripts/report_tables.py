"""Write every table of the report (Markdown, CSV, LaTeX, HTML) from the run's result files."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../src")  # the library, also inside --sdm conda envs

from pathlib import Path

from hardex import analysis
from hardex.workflow import job_log

with job_log(snakemake) as log:
    p, i = snakemake.params, snakemake.input
    res = analysis.load_results(i.evals, i.bases, i.steps, p.benchmarks, p.pass_k)
    probes, subsets = analysis.load_pool(i.probes, i.subsets)
    ref = analysis.load_reference(p.reference)
    tables = analysis.build_tables(res, probes, subsets, p.stats["ci_level"], p.stats["iterations"],
                                   p.stats["seed"], ref, p.names, p.generations, analysis.load_overlaps(i.overlaps))
    out_dir = {Path(f).stem: Path(f).parent for f in snakemake.output}
    for name, (df, note) in tables.items():
        analysis.write_table(df, out_dir[name] / name, analysis.TABLES[name], note, p.decimals)
        log(f"{name}: {df.height} rows")
