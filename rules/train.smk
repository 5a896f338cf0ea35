rule train:
    """GRPO on one subset (TRL GRPOTrainer; LoRA or full), one row per step in steps.parquet.

    Checkpoints go to <run>/checkpoints/, deliberately not an output: Snakemake deletes a failed
    job's outputs, and a killed run resumes from them when the workflow is started again. Under
    grpo.schedule_steps a changed max_steps reruns the job (params), which continues from them.
    """
    input:
        subset=run_subset,
        pool=pool_file,
        model=model_dir,
    output:
        steps=layout.STEPS,
        final=directory(layout.FINAL),
    log:
        "logs/train/{model}/{task}/{strategy}/seed{seed}.log",
    benchmark:
        layout.TIMINGS["train"]
    conda:
        training_env
    threads: TRAIN_JOB.threads
    resources:
        gpu=TRAIN_JOB.gpu,
        mem_mb=TRAIN_JOB.mem_mb,
        runtime=TRAIN_JOB.runtime,
        # read by the job (hardex.job.job_log): a retry of a reward hook's error stops at once
        attempt=lambda wildcards, attempt: attempt,
    params:
        model=lambda w: model_settings(config, w.model),
        family=pool_family,
        scoring=lambda w: config["tasks"][w.task]["scoring"],
        # with the task's prompt and reward hook where set (hardex.settings.run_grpo_settings)
        grpo=lambda w: run_grpo_settings(config, w.model, w.strategy, w.task),
        allow_unlearnable=lambda w: unlearnable_allowed(config, w.strategy),
        run_dir=fill(layout.RUN_DIR),
    script:
        "../scripts/train.py"
