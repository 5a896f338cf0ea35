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
        # each strategy gets only the settings it reads (selection.STRATEGY_SETTINGS): editing the band reruns band
        # alone
        tiers=strategy_setting("tiers"),
        band=strategy_setting("band"),
        group_size=strategy_setting("group_size"),
    script:
        "../scripts/select.py"
