# A sequential design (seeds: {first, batch, max}): a look after each batch of seeds decides which runs
# train the next (hardex.study_runs, hardex.report.looks). Without a design nothing here runs.
localrules:
    sequential_look,
    sequential_verdicts,


checkpoint sequential_look:
    """Look k: each deciding comparison's verdict from every evaluation of the first k batches, and the runs
    of the comparisons still undecided, which alone train the next batch of seeds."""
    input:
        evals=look_evals,
        bases=BASE_FILES,
    output:
        layout.LOOK,
    log:
        "logs/sequential/look{look}.log",
    conda:
        "../envs/analysis.yaml"
    params:
        design=lambda w: vars(DESIGN),
        deciding=DECIDING,
        cells=CELLS,
        alpha=1 - REPORT["ci_level"],
        margin=REPORT["equivalence_margin"],
        benchmarks=BENCHMARKS,
        pass_k=PASS_K,
        metrics=REPORT["metrics"],  # the first decides
    script:
        "../scripts/sequential_look.py"


rule sequential_verdicts:
    """The verdict of every deciding comparison at the design's last look, and the seeds each took."""
    input:
        look=last_look_file,
    output:
        table_output("sequential", "verdicts of the sequential design"),
        every(layout.TABLE, name="sequential", ext=["md", "csv", "tex"]),
    log:
        "logs/sequential/verdicts.log",
    conda:
        "../envs/analysis.yaml"
    params:
        design=lambda w: vars(DESIGN),
        banner=BANNER,
    script:
        "../scripts/sequential_verdicts.py"
