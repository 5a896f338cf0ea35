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
    script:
        "../scripts/select.py"
