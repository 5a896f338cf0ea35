# The report: tables, the learnable-% regression, figures, and the HTML report's entries.
# Split so that each setting reaches only the rules it changes (through params): a plot setting
# (report.figures) reruns the figure rules, a statistics setting (report.ci_level, report.bootstrap)
# the tables, the regression and the figure drawn from it. All of them are cheap: run locally.
localrules:
    report_tables,
    report_compute,
    report_regression,
    report_figure_curves,
    report_figure_learnable,
    report_figure_pool,
    report_figure_zero_std,
    report_figure_capacity,
    report_figure_compute,
    report_figure_tiers,
    report_figure_pass_at_k,


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
        benchmark_data=[data_file(b) for b in RESCORING["benchmarks"]],
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
        generations=GENERATIONS,
        reference=REPORT["reference"],
        names=REPORT["reference_names"],
        provenance=PROVENANCE,
        banner=BANNER,
        rescoring=RESCORING,
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
        timings=TIMING_FILES,
        provenance=PROVENANCE,
        banner=BANNER,
    script:
        "../scripts/report_compute.py"


rule report_regression:
    """Gain on learnable % over the cells of report.regression_strategies (seeds averaged; OLS, bootstrap
    intervals over cells); the published fit beside it."""
    input:
        evals=EVAL_FILES,
        bases=BASE_FILES,
        steps=STEPS_FILES,
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
        reference=REPORT["reference"],
        names=REPORT["reference_names"],
        provenance=PROVENANCE,
    script:
        "../scripts/report_regression.py"


rule report_figure_curves:
    """Test accuracy against training step per strategy, one panel per model x task (Figure 2)."""
    input:
        evals=EVAL_FILES,
        bases=BASE_FILES,
        reference=REFERENCE_FILE,
    output:
        figure_outputs("accuracy_curves", "accuracy during training"),
    log:
        "logs/report/figure_curves.log",
    conda:
        "../envs/analysis.yaml"
    params:
        benchmarks=BENCHMARKS,
        pass_k=PASS_K,
        style=STYLE,
        reference=REPORT["reference"],
        names=REPORT["reference_names"],
        provenance=PROVENANCE,
    script:
        "../scripts/report_figure_curves.py"


rule report_figure_tiers:
    """Test accuracy per difficulty tier during training, against the share of the full run's steps
    (paper 2's catch-up, drawn); for configs with tier strategies."""
    input:
        evals=EVAL_FILES,
        bases=BASE_FILES,
    output:
        figure_outputs("tier_curves", "accuracy per tier during training"),
    log:
        "logs/report/figure_tiers.log",
    conda:
        "../envs/analysis.yaml"
    params:
        benchmarks=BENCHMARKS,
        pass_k=PASS_K,
        style=STYLE,
        provenance=PROVENANCE,
    script:
        "../scripts/report_figure_tiers.py"


rule report_figure_learnable:
    """Learnable % against gain with the fitted line and its band (Figure 3), from regression.json."""
    input:
        regression=layout.REGRESSION,
    output:
        figure_outputs("learnable_vs_gain", "learnable % vs gain"),
    log:
        "logs/report/figure_learnable.log",
    conda:
        "../envs/analysis.yaml"
    params:
        style=STYLE,
        regression_strategies=REPORT["regression_strategies"],  # for the caption; the figure reads regression.json
        reference=REPORT["reference"],
        provenance=PROVENANCE,
    script:
        "../scripts/report_figure_learnable.py"


rule report_figure_pool:
    """Histogram of the pool's pass rates with every selected subset marked, and the learnable %
    each subset should give (from the probe alone: needs no training)."""
    input:
        probes=PROBE_FILES,
        subsets=SUBSET_FILES,
    output:
        figure_outputs("pool_pass_rates", "pool pass rates"),
    log:
        "logs/report/figure_pool.log",
    conda:
        "../envs/analysis.yaml"
    params:
        style=STYLE,
        generations=GENERATIONS,
        provenance=PROVENANCE,
    script:
        "../scripts/report_figure_pool.py"


rule report_figure_capacity:
    """Gain and learnable % of every strategy against model size, one row per task (more than one model)."""
    input:
        evals=EVAL_FILES,
        bases=BASE_FILES,
        steps=STEPS_FILES,
        models=BUILT_MODEL_DIRS,
    output:
        figure_outputs("capacity", "gain by model capacity"),
    log:
        "logs/report/figure_capacity.log",
    conda:
        "../envs/analysis.yaml"
    params:
        benchmarks=BENCHMARKS,
        pass_k=PASS_K,
        stats=STATS,
        style=STYLE,
        sizes_b={m: config["models"][m]["size_b"] for m in MODELS},
        # a stand-in counts as the model it stands in for: its config's size_b
        built={
            m: d
            for m, d in zip(BUILT_MODELS, BUILT_MODEL_DIRS)
            if m not in made_by("standin_model")
        },
        provenance=PROVENANCE,
    script:
        "../scripts/report_figure_capacity.py"


rule report_figure_zero_std:
    """Per-step share of GRPO groups with no reward variance, per strategy."""
    input:
        steps=STEPS_FILES,
    output:
        figure_outputs("zero_std_share", "groups without learning signal"),
    log:
        "logs/report/figure_zero_std.log",
    conda:
        "../envs/analysis.yaml"
    params:
        style=STYLE,
        provenance=PROVENANCE,
    script:
        "../scripts/report_figure_zero_std.py"


rule report_figure_compute:
    """Gain of every strategy against the rollouts and tokens it generated, probing and discarded groups
    included, from the rollout_budget table: offline selection and online filtering at equal cost.
    """
    input:
        budget=layout.fill(layout.TABLE, name="rollout_budget", ext="csv"),
    output:
        figure_outputs("gain_vs_compute", "gain against compute"),
    log:
        "logs/report/figure_compute.log",
    conda:
        "../envs/analysis.yaml"
    params:
        style=STYLE,
        provenance=PROVENANCE,
    script:
        "../scripts/report_figure_compute.py"


rule report_figure_pass_at_k:
    """pass@k against k (log2), the base model against each strategy's final checkpoint, from the
    pass_at_k table: sharpening against new solving."""
    input:
        table=layout.fill(layout.TABLE, name="pass_at_k", ext="csv"),
    output:
        figure_outputs("pass_at_k", "pass@k against k"),
    log:
        "logs/report/figure_pass_at_k.log",
    conda:
        "../envs/analysis.yaml"
    params:
        style=STYLE,
        provenance=PROVENANCE,
    script:
        "../scripts/report_figure_pass_at_k.py"
