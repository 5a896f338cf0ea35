rule dataset_split:
    """Materialize one split of a dataset (hub, local file, or generator) as Parquet.

    Priority 1 (here and in check_overlap): data before models, so that with the data check a pool
    holding its benchmark stops before any model job."""
    output:
        layout.DATA,
    log:
        "logs/data/{dataset}/{split}.log",
    priority: 1
    conda:
        "../envs/generation.yaml"
    params:
        # a local file by its content, not its time (hardex.settings.split_source)
        source=lambda w: split_source(config, f"{w.dataset}/{w.split}"),
    script:
        "../scripts/dataset_split.py"


rule check_overlap:
    """The questions a task's benchmarks share with its pool, the same problem in other words included,
    and their near-duplicates: none, or as many as the config accepts (the gain would otherwise be
    measured on training data). Probing waits for it."""
    input:
        pool=pool_file,
        benchmarks=benchmark_inputs,
    output:
        layout.OVERLAP,
    log:
        "logs/overlap/{task}.log",
    priority: 1
    conda:
        "../envs/analysis.yaml"
    params:
        pool=lambda w: config["tasks"][w.task]["pool"],
        benchmarks=lambda w: config["tasks"][w.task]["benchmarks"],
        allowed=lambda w: config["tasks"][w.task]["allow_overlap"],
        allowed_near=lambda w: config["tasks"][w.task]["allow_near_duplicates"],
        families=lambda w: {
            ref: split_spec(config, ref)["family"]
            for ref in [
                config["tasks"][w.task]["pool"],
                *config["tasks"][w.task]["benchmarks"],
            ]
        },
    script:
        "../scripts/check_overlap.py"
