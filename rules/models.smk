rule build_model:
    """Build the tiny Qwen3 and warm-start it on the sft splits (disjoint from pools and tests)."""
    input:
        sft=sft_files,
        held_out=held_out_files,
    output:
        directory(layout.MODEL),
    log:
        "logs/models/{model}.log",
    benchmark:
        layout.TIMINGS["build_model"]
    conda:
        "../envs/generation.yaml"
    threads: MODEL_JOB_THREADS
    resources:
        gpu=MODEL_JOB_GPU,
        mem_mb=model_mem_mb,
        runtime=model_runtime,
    params:
        arch=lambda w: config["models"][w.model]["build"]["arch"],
        warmstart=lambda w: config["models"][w.model]["build"]["warmstart"],
        families=lambda w: [
            split_spec(config, r)["family"]
            for r in config["models"][w.model]["build"]["sft_from"]
        ],
    script:
        "../scripts/build_model.py"
