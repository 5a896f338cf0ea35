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
    conda:
        GENERATION_ENV
    threads: PROBE_THREADS
    resources:
        gpu=GENERATION_JOB_GPU,
        mem_mb=model_mem_mb,
        runtime=probe_runtime,
    params:
        model=model_params,
        family=pool_family,
        scoring=lambda w: config["tasks"][w.task]["scoring"],
        settings=lambda w: probe_settings(config, w.task),
        generation=lambda w: generation_settings(config, w.model),
        work_dir=fill(layout.PROBE_WORK),
    script:
        "../scripts/probe.py"
