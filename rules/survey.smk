localrules:
    survey,


rule survey:
    """Which tasks can teach the model: every task's pass-rate distribution from its probe alone (never, always
    and sometimes solved, the expected share of mixed groups), a table and one figure. A named target
    (`snakemake survey`): it probes every pool and trains nothing (docs/rg-survey/survey.yaml).
    """
    input:
        probes=PROBE_FILES,
    output:
        table=layout.TABLE.format(name="survey", ext="md"),
        csv=layout.TABLE.format(name="survey", ext="csv"),
        figure=layout.FIGURE.format(name="survey", ext="png"),
    log:
        "logs/report/survey.log",
    conda:
        "../envs/analysis.yaml"
    params:
        generations=GROUP_SIZES,
        banner=BANNER,
    script:
        "../scripts/survey.py"
