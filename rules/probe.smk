rule probe:
    """K samples per pool example from the base model (plus one greedy sample)."""
    input:
        pool=pool_file,
        overlap=layout.OVERLAP,
        model=model_dir,
    output:
        table=layout.PROBE,
        samples=layout.PROBE_SAMPLES,
    log:
        "logs/probe/{model}/{task}.log",
    benchmark:
        layout.TIMINGS["probe"]
    wildcard_constraints:
        task=one_of(PROBED_TASKS),
    conda:
        GENERATION_ENV
    threads: PROBE_JOB.threads
    resources:
        gpu=PROBE_JOB.gpu,
        mem_mb=PROBE_JOB.mem_mb,
        runtime=PROBE_JOB.runtime,
    params:
        model=lambda w: model_settings(config, w.model),
        family=pool_family,
        scoring=lambda w: config["tasks"][w.task]["scoring"],
        settings=lambda w: probe_settings(config, w.task),
        generation=lambda w: generation_settings(config, w.model),
        work_dir=fill(layout.PROBE_WORK),
    script:
        "../scripts/probe.py"


rule probe_from_file:
    """Pass rates computed elsewhere (tasks.<task>.probe.from), checked against the pool and written as the
    probe table; no model is sampled, and the samples table is empty."""
    input:
        pool=pool_file,
        overlap=layout.OVERLAP,
    output:
        table=layout.PROBE,
        samples=layout.PROBE_SAMPLES,
    log:
        "logs/probe/{model}/{task}.log",
    benchmark:
        layout.TIMINGS["probe"]
    wildcard_constraints:
        task=one_of(list(IMPORTED_RATES)),
    conda:
        "../envs/analysis.yaml"
    params:
        key=lambda w: f"tasks.{w.task}.probe.from",
        # the file by its content, not its time: a copy of the same bytes reruns nothing
        rates=lambda w: IMPORTED_RATES[w.task],
        sha256=lambda w: file_sha256(IMPORTED_RATES[w.task]),
        note=lambda w: config["tasks"][w.task]["probe"].get("from_note"),
    script:
        "../scripts/probe_from_file.py"
