rule probe:
    """K samples per pool example from the base model (plus one greedy sample)."""
    input:
        pool=lambda w: data_file(config["tasks"][w.task]["pool"]),
        overlap="results/overlap/{task}.json",
        model=model_dir,
    output:
        table="results/probe/{model}/{task}.parquet",
        samples="results/probe/{model}/{task}.samples.parquet",
    log:
        "logs/probe/{model}/{task}.log",
    benchmark:
        "results/benchmarks/probe/{model}/{task}.tsv"
    conda:
        "../envs/generation.yaml"
    threads: MODEL_JOB_THREADS
    resources:
        gpu=MODEL_JOB_GPU,
        mem_mb=model_mem_mb,
        runtime=model_runtime,
    params:
        model=model_params,
        family=lambda w: hx.split_spec(config, config["tasks"][w.task]["pool"])[
            "family"
        ],
        scoring=lambda w: config["tasks"][w.task]["scoring"],
        settings=lambda w: hx.probe_settings(config, w.task),
        generation=config["generation"],
        work_dir=lambda w: f"results/probe/{w.model}/{w.task}.chunks",
    script:
        "../scripts/probe.py"
