rule build_model:
    """Build the tiny Qwen3 and warm-start it on the sft splits (disjoint from pools and tests)."""
    input:
        sft=warmstart("sft"),
        held_out=warmstart("held_out"),
    output:
        directory(layout.MODEL),
    log:
        "logs/models/{model}.log",
    benchmark:
        layout.TIMINGS["build_model"]
    wildcard_constraints:
        model=one_of(made_by("build_model")),
    conda:
        "../envs/generation.yaml"
    threads: MODEL_JOB.threads
    resources:
        gpu=MODEL_JOB.gpu,
        mem_mb=MODEL_JOB.mem_mb,
        runtime=MODEL_JOB.runtime,
    params:
        arch=lambda w: config["models"][w.model]["build"]["arch"],
        warmstart=lambda w: config["models"][w.model]["build"]["warmstart"],
        families=lambda w: [
            split_spec(config, r)["family"]
            for r in config["models"][w.model]["build"]["sft_from"]
        ],
    script:
        "../scripts/build_model.py"


rule convert_model:
    """Dequantize a GGUF file into a float32 from_pretrained folder (on the CPU: no gpu resource)."""
    output:
        directory(layout.MODEL),
    log:
        "logs/models/{model}.log",
    benchmark:
        layout.TIMINGS["convert_model"]
    wildcard_constraints:
        model=one_of(made_by("convert_model")),
    conda:
        "../envs/generation.yaml"
    threads: MODEL_JOB.threads
    resources:
        mem_mb=MODEL_JOB.mem_mb,
        runtime=MODEL_JOB.runtime,
    params:
        gguf=lambda w: config["models"][w.model]["gguf"],
        # the file by its content, not as an input: a reinstall (newer, elsewhere) converts nothing again
        sha256=lambda w: file_sha256(gguf_file(config["models"][w.model]["gguf"])),
        # where this machine has it, a Path: Snakemake's params trigger compares no Path (gguf_location)
        file=gguf_location,
    script:
        "../scripts/convert_model.py"


rule standin_model:
    """A rehearsal's stand-in: a tiny random model of the real architecture, with its chat template."""
    input:
        architecture_input,
    output:
        directory(layout.MODEL),
    log:
        "logs/models/{model}.log",
    benchmark:
        layout.TIMINGS["standin_model"]
    wildcard_constraints:
        model=one_of(made_by("standin_model")),
    conda:
        "../envs/generation.yaml"
    threads: 1
    params:
        architecture=lambda w: config["models"][w.model]["architecture"],
    script:
        "../scripts/standin_model.py"
