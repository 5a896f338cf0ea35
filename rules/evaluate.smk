rule evaluate_base:
    """The base model on every benchmark of a task (step 0 of every curve), once per run seed: each
    with the evaluation seed of the runs it is compared with."""
    input:
        benchmarks=benchmark_inputs,
        model=model_dir,
    output:
        layout.EVAL_BASE,
    log:
        "logs/eval/{model}/base/{task}.log",
    benchmark:
        layout.TIMINGS["evaluate_base"]
    conda:
        GENERATION_ENV
    threads: EVALUATE_BASE_JOB.threads
    resources:
        gpu=EVALUATE_BASE_JOB.gpu,
        mem_mb=EVALUATE_BASE_JOB.mem_mb,
        runtime=EVALUATE_BASE_JOB.runtime,
    params:
        model=lambda w: model_settings(config, w.model),
        benchmarks=base_benchmark_params,
        scoring=lambda w: config["tasks"][w.task]["scoring"],
        eval_seed=config["evaluation"]["seed"],
        seeds=SEEDS,
        generation=lambda w: generation_settings(config, w.model),
    script:
        "../scripts/evaluate.py"


rule evaluate_run:
    """Every checkpoint of one run on every benchmark of its task, per example.

    Priority 1: a trained run is evaluated before any new one trains, so a study stopped between sittings
    holds complete runs, which its archive keeps without their weights."""
    input:
        benchmarks=benchmark_inputs,
        model=model_dir,
        steps=layout.STEPS,
        final=layout.FINAL,
    output:
        layout.EVAL_RUN,
    log:
        "logs/eval/{model}/{task}/{strategy}/seed{seed}.log",
    benchmark:
        layout.TIMINGS["evaluate_run"]
    priority: 1
    conda:
        GENERATION_ENV
    threads: EVALUATE_RUN_JOB.threads
    resources:
        gpu=EVALUATE_RUN_JOB.gpu,
        mem_mb=EVALUATE_RUN_JOB.mem_mb,
        runtime=EVALUATE_RUN_JOB.runtime,
    params:
        model=lambda w: model_settings(config, w.model),
        benchmarks=eval_benchmark_params,
        scoring=lambda w: config["tasks"][w.task]["scoring"],
        eval_seed=config["evaluation"]["seed"],
        generation=lambda w: generation_settings(config, w.model),
        run_dir=fill(layout.RUN_DIR),
    script:
        "../scripts/evaluate.py"
