# The report: tables, the learnable-% regression, figures, and the HTML report's entries.
# Split so that each setting reaches only the rules it changes (through params): a plot setting
# (report.figures) reruns the two figure rules and not the tables or the regression; a statistics setting
# (report.ci_level, report.bootstrap) reruns the tables, the regression and report_figures (the capacity
# figure's intervals, and the figures drawn from regression.json and the tables), not the pool figure.
# Every figure but the pool's is drawn by one job (report_figures): a process per figure paid its imports
# (2-4 s) seven or eight times per report. The pool figure keeps its own rule: it needs no training, so
# `snakemake results/figures/pool_pass_rates.png` runs only data, probe and selection.
# All of them are cheap: run locally.
localrules:
    report_tables,
    report_compute,
    report_regression,
    report_figures,
    report_figure_pool,
    report_recommend,


rule report_tables:
    """Every table in Markdown, CSV, LaTeX and HTML (the HTML one goes into the report)."""
    input:
        evals=EVAL_FILES,
        bases=BASE_FILES,
        steps=STEPS_FILES,
        probes=PROBE_FILES,
        subsets=SUBSET_FILES,
        overlaps=OVERLAP_FILES,
        reference=REFERENCE_FILE,
        benchmark_data=[layout.data_file(b) for b in RESCORING["benchmarks"]],
    output:
        [table_output(name, title) for name, title in TABLES.items()],
        every(layout.TABLE, name=list(TABLES), ext=["md", "csv", "tex"]),
    log:
        "logs/report/tables.log",
    conda:
        "../envs/analysis.yaml"
    params:
        benchmarks=BENCHMARKS,
        pass_k=PASS_K,
        stats=STATS,
        equivalence_margin=REPORT["equivalence_margin"],
        power=REPORT["power"],
        decimals=REPORT["tables"]["decimals"],
        generations=GROUP_SIZES,
        reference=REPORT["reference"],
        names=REPORT["reference_names"],
        provenance=PROVENANCE,
        banner=BANNER,
        rescoring=RESCORING,
        metrics=REPORT["metrics"],
    script:
        "../scripts/report_tables.py"


rule report_compute:
    """Wall time and peak memory per stage, from every model job's timing file.

    The inputs are the jobs' outputs, not their timing files: a timing file missing (results made
    before timings were recorded) must not rerun a training job; the table says which are.
    """
    input:
        models=BUILT_MODEL_DIRS,
        probes=PROBE_FILES,
        bases=BASE_FILES,
        steps=STEPS_FILES,
        evals=EVAL_FILES,
    output:
        table_output("compute", "compute per stage"),
        every(layout.TABLE, name="compute", ext=["md", "csv", "tex"]),
    log:
        "logs/report/compute.log",
    conda:
        "../envs/analysis.yaml"
    params:
        model_stages=report_plan.model_stages(config),
        provenance=PROVENANCE,
        banner=BANNER,
    script:
        "../scripts/report_compute.py"


rule report_regression:
    """Gain on learnable % over the cells of report.regression_strategies (seeds averaged; OLS, bootstrap
    intervals over cells), on the share measured in training and on the probe's prediction before it; the
    published fit beside them."""
    input:
        evals=EVAL_FILES,
        bases=BASE_FILES,
        steps=STEPS_FILES,
        probes=PROBE_FILES,
        subsets=SUBSET_FILES,
        reference=REFERENCE_FILE,
    output:
        report(
            layout.REGRESSION,
            caption="../report/regression.rst",
            category="Regression",
            labels={"result": "gain on learnable %"},
        ),
    log:
        "logs/report/regression.log",
    conda:
        "../envs/analysis.yaml"
    params:
        benchmarks=BENCHMARKS,
        pass_k=PASS_K,
        stats=STATS,
        regression_strategies=REPORT["regression_strategies"],
        generations=GROUP_SIZES,
        reference=REPORT["reference"],
        names=REPORT["reference_names"],
        provenance=PROVENANCE,
    script:
        "../scripts/report_regression.py"


rule report_figures:
    """Every figure of the config (hardex.report.plan.figures) but the pool's, in one process
    (hardex.report.figures): accuracy curves (Figure 2), learnable % against gain (Figure 3, from
    regression.json), groups without learning signal, gain against compute (the rollout_budget table),
    pass@k against k (the pass_at_k table), and where the config has them gain by model capacity (several
    models) and accuracy per tier (tier strategies).
    """
    input:
        evals=EVAL_FILES,
        bases=BASE_FILES,
        steps=STEPS_FILES,
        probes=PROBE_FILES,  # the training_dynamics figure's predicted mixed share at step 0
        subsets=SUBSET_FILES,
        models=BUILT_MODEL_DIRS,
        regression=layout.REGRESSION,
        budget=layout.fill(layout.TABLE, name="rollout_budget", ext="csv"),
        pass_at_k=layout.fill(layout.TABLE, name="pass_at_k", ext="csv"),
        headline=layout.fill(layout.TABLE, name="headline", ext="csv"),
        gain_curve=layout.fill(layout.TABLE, name="gain_curve", ext="csv"),
        by_difficulty=layout.fill(layout.TABLE, name="gain_by_difficulty", ext="csv"),
        reference=REFERENCE_FILE,
    output:
        figure_outputs(
            [f for f in report_plan.figures(config) if f != report_plan.POOL_FIGURE]
        ),
    log:
        "logs/report/figures.log",
    conda:
        "../envs/analysis.yaml"
    params:
        benchmarks=BENCHMARKS,
        pass_k=PASS_K,
        stats=STATS,  # the capacity figure's intervals
        style=STYLE,
        reference=REPORT["reference"],
        names=REPORT["reference_names"],
        regression_strategies=REPORT["regression_strategies"],  # for a caption; the figure reads regression.json
        generations=GROUP_SIZES,
        sizes_b=report_plan.model_sizes(config),
        # a stand-in counts as the model it stands in for: its config's size_b
        built=report_plan.counted_models(config),
        provenance=PROVENANCE,
    script:
        "../scripts/report_figures.py"


rule report_figure_pool:
    """Histogram of the pool's pass rates with every selected subset marked, and the learnable %
    each subset should give (from the probe alone: needs no training, unlike report_figures).
    """
    input:
        probes=PROBE_FILES,
        subsets=FIRST_SUBSET_FILES,
    output:
        figure_outputs([report_plan.POOL_FIGURE]),
    log:
        "logs/report/figure_pool.log",
    conda:
        "../envs/analysis.yaml"
    params:
        style=STYLE,
        generations=GROUP_SIZES,
        provenance=PROVENANCE,
    script:
        "../scripts/report_figures.py"


rule report_recommend:
    """Which subset to train on, predicted from the probe alone (hardex.report.recommend): needs no
    training, so `snakemake results/tables/recommend.md` runs only data, probe and selection.
    """
    input:
        probes=PROBE_FILES,
        subsets=FIRST_SUBSET_FILES,
    output:
        table_output("recommend", RECOMMEND_TITLE),
        every(layout.TABLE, name="recommend", ext=["md", "csv", "tex"]),
    log:
        "logs/report/recommend.log",
    conda:
        "../envs/analysis.yaml"
    params:
        generations=GROUP_SIZES,
        decimals=REPORT["tables"]["decimals"],
        provenance=PROVENANCE,
        banner=BANNER,
    script:
        "../scripts/report_recommend.py"
