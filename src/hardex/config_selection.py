"""The config's checks of its selection: strategy and control names (against hardex.selection, where they are
written), the boundaries adaptive probing settles, and subsets too small for one GRPO step where the pool's size is
known before any job."""

from __future__ import annotations

from hardex.config_errors import ConfigError
from hardex.schedule import past_horizon, run_steps
from hardex.selection import (
    BOUNDARY_STRATEGIES,
    BUDGET_STRATEGIES,
    CONTROLS,
    STRATEGIES,
    RunName,
    SelectionError,
    check_band,
    subset_size,
)
from hardex.settings import boundary_strategies, grpo_settings, known_split_size


def check_steps_fit_subsets(cfg: dict) -> None:
    """Refuse a subset that is smaller than one GRPO step, where the pool's size is known before any job.

    TRL makes no step from a subset smaller than prompts_per_step; the train job refuses it too, but
    only after building, probing and selecting. Pools whose size only the data knows (hub datasets,
    files) are checked there.
    """
    budget = cfg["selection"]["budget"]
    for task, tcfg in cfg["tasks"].items():
        n = known_split_size(cfg, tcfg["pool"])
        if n is None:
            continue
        for strategy in cfg["selection"]["strategies"]:
            try:
                m = subset_size(strategy, n, budget)
            except SelectionError as e:
                raise ConfigError(f"tasks.{task}: strategy {strategy!r}: {e}") from None
            for name, model in cfg["models"].items():
                grpo = grpo_settings(cfg, name)
                if m is not None and grpo.get("epochs") and (why := past_horizon(grpo, run_steps(grpo, m))):
                    where = f"models.{name}.grpo" if "schedule_steps" in (model.get("grpo") or {}) else "grpo"
                    raise ConfigError(f"{where}.schedule_steps: strategy {strategy!r} of task {task}: {why}")
                if m is None or m >= grpo["prompts_per_step"] or grpo["repeat_small_subsets"]:
                    continue
                where = f"models.{name}.grpo" if "prompts_per_step" in (model.get("grpo") or {}) else "grpo"
                raise ConfigError(
                    f"tasks.{task}: strategy {strategy!r} selects {m} of the pool's {n} examples, fewer than the "
                    f"{grpo['prompts_per_step']} prompts of one GRPO step ({where}.prompts_per_step): no step could be "
                    f"made; lower prompts_per_step, raise selection.budget, or set {where}.repeat_small_subsets: "
                    f"true to repeat examples within a step")


def check_strategy_names(cfg: dict) -> None:
    """Strategy names are checked against hardex.selection (where they are written) rather than the
    schema; unset lists default to the budget strategies."""
    for key in ("selection.strategies", "report.regression_strategies"):
        section, name = key.split(".")
        if cfg[section][name] is None:
            cfg[section][name] = list(BUDGET_STRATEGIES)
    for i, strategy in enumerate(cfg["selection"]["strategies"]):
        if strategy not in STRATEGIES and not strategy.startswith("tier_"):  # the schema checks tier names
            raise ConfigError(f"selection.strategies.{i}: {strategy!r} is not allowed; allowed: "
                              f"{', '.join(STRATEGIES)}, tier_<name>, tier_<name>_random")
    for i, strategy in enumerate(cfg["selection"]["online_strategies"]):
        if strategy not in cfg["selection"]["strategies"]:
            raise ConfigError(f"selection.online_strategies.{i}: {strategy!r} is not one of selection.strategies "
                              f"({', '.join(cfg['selection']['strategies'])}): its subset would not exist")
    _check_controls(cfg["selection"])
    # a strategy this config does not run may stand here (a config trimmed from a larger one); a typo may not
    for i, run in enumerate(cfg["selection"]["allow_unlearnable"]):
        strategy = RunName.parse(run).strategy
        if strategy not in STRATEGIES and not strategy.startswith("tier_"):
            raise ConfigError(f"selection.allow_unlearnable.{i}: {run!r} is not a strategy; allowed: "
                              f"{', '.join(STRATEGIES)}, tier_<name>, each also as <strategy>_online "
                              f"or <strategy>_<control>")
    try:
        check_band(cfg["selection"]["band"])
    except SelectionError as e:
        raise ConfigError(str(e)) from None
    if cfg["selection"]["online_strategies"]:
        for model in cfg["models"]:
            rollouts = grpo_settings(cfg, model)["rollouts"]
            if rollouts in ("trl", "vllm-server"):
                raise ConfigError(f"selection.online_strategies needs hardex's rollout function, which refills the "
                                  f"batch; model {model!r} samples with TRL's "
                                  f"{'generate' if rollouts == 'trl' else 'vLLM server'} (grpo.rollouts: {rollouts})")
    for i, strategy in enumerate(cfg["probe"]["adaptive"]["strategies"] or []):
        if strategy not in BOUNDARY_STRATEGIES:
            raise ConfigError(f"probe.adaptive.strategies.{i}: {strategy!r} is not allowed (it has no pass-rate "
                              f"boundary); allowed: {', '.join(BOUNDARY_STRATEGIES)}")


def _check_controls(sel: dict) -> None:
    """`selection.controls` ({control: [strategies]}) names known controls of strategies this config selects:
    a control trains on its strategy's subset, which must exist. Controls of <strategy>_online runs are
    not offered (which of the two would the control's gain be compared with?)."""
    for control, strategies in sel["controls"].items():
        if control not in CONTROLS:
            raise ConfigError(f"selection.controls.{control}: unknown control; known: {', '.join(CONTROLS)}")
        for i, strategy in enumerate(strategies):
            if RunName.parse(strategy).online:
                raise ConfigError(f"selection.controls.{control}.{i}: {strategy!r}: controls of online-filtering "
                                  f"runs are not supported; name the strategy itself")
            if strategy not in sel["strategies"]:
                raise ConfigError(f"selection.controls.{control}.{i}: {strategy!r} is not one of selection.strategies "
                                  f"({', '.join(sel['strategies'])}): its subset would not exist")


def check_adaptive_boundaries(cfg: dict) -> None:
    """Adaptive probing settles only the boundaries it is given: a subset chosen by any other
    boundary would be picked from unsettled estimates."""
    adaptive = cfg["probe"]["adaptive"]
    if not adaptive["enabled"] or adaptive["strategies"] is None:
        return
    missing = [s for s in boundary_strategies(cfg) if s not in adaptive["strategies"]]
    if missing:
        raise ConfigError(
            f"probe.adaptive.strategies: {adaptive['strategies']} leaves {missing}, which selection.strategies "
            f"names, to be selected from unsettled pass rates; add {' and '.join(missing)} or set null (all of them)")
