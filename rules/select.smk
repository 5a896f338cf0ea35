rule select:
    """One subset per strategy and run seed from the probe table and the budget p: the run seed redraws
    the tie-breaks and random draws, so intervals over seeds cover the selection too."""
    input:
        probe=layout.PROBE,
    output:
        layout.SUBSET,
    log:
        "logs/select/{model}/{task}/{strategy}/seed{seed}.log",
    conda:
        "../envs/analysis.yaml"
    params:
        budget=config["selection"]["budget"],
        seed=lambda w: [config["selection"]["seed"], int(w.seed)],
        tiers=lambda w: tier_values(config["selection"]["tiers"], w.strategy, w.task),
        # each strategy gets only the settings it reads: editing the band reruns band alone
        band=lambda w: config["selection"]["band"] if w.strategy == "band" else None,
        group_size=lambda w: (
            grpo_settings(config, w.model)["num_generations"]
            if w.strategy == "learnable"
            else None
        ),
    script:
        "../scripts/select.py"
