"""Config validation: the JSON schema with its defaults, then the cross-references a schema cannot say.

`check_config` is called by the Snakefile before any job is planned. A mistake ends the run with
one line that names the key, the value and what is allowed. The views of the checked config that the
rules read are `hardex.settings`; the cross-checks here read them too. The checks are grouped by what they read:
the schema's errors (hardex.config_errors), the data (hardex.config_data), a model's GPUs (hardex.config_gpu) and
the selection (hardex.config_selection); here, the order they run in and the references between sections.
"""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path
from typing import Any

from hardex.architectures import known
from hardex.config_data import (
    check_imported_probes,
    check_local_splits,
    check_prompts_and_reward_hooks,
    check_reasoning_gym,
    check_split,
    check_split_fields,
    check_strict_scoring,
    same_local_file,
)
from hardex.config_errors import ConfigError, key_path, schema_error_line, schema_errors
from hardex.config_gpu import check_card_bfloat16, check_gpu_training
from hardex.config_selection import check_adaptive_boundaries, check_steps_fit_subsets, check_strategy_names
from hardex.model_sources import check_model_source
from hardex.models import ModelError
from hardex.schedule import completions_per_step, past_horizon
from hardex.schema import SCHEMA
from hardex.selection import SelectionError, tier_values
from hardex.sequential import BASE_RUN
from hardex.settings import SYNTHETIC_FAMILIES, decodings, grpo_settings, run_strategies, seed_design


def _cross_checks(cfg: dict) -> None:
    """What a schema cannot say: references between sections, arithmetic between keys."""
    datasets = cfg["datasets"]

    def split_exists(ref: str, key: str) -> None:
        ds, split = ref.split("/", 1)
        if ds not in datasets:
            raise ConfigError(f"{key}: {ref!r} names dataset {ds!r}, which is not in datasets ({', '.join(datasets)})")
        if split not in datasets[ds]["splits"]:
            raise ConfigError(
                f"{key}: {ref!r} names split {split!r}, which dataset {ds!r} does not define "
                f"({', '.join(datasets[ds]['splits'])})"
            )

    for ds, dcfg in datasets.items():
        for split, spec in dcfg["splits"].items():
            check_split(f"datasets.{ds}.splits.{split}", dcfg["family"], split, spec)
    for task, tcfg in cfg["tasks"].items():
        split_exists(tcfg["pool"], f"tasks.{task}.pool")
        for i, b in enumerate(tcfg["benchmarks"]):
            split_exists(b, f"tasks.{task}.benchmarks[{i}]")
            if b == tcfg["pool"] and not tcfg.get("allow_overlap"):
                raise ConfigError(f"tasks.{task}.benchmarks[{i}]: {b!r} is the task's pool: its gain would be measured "
                                  f"on the questions it trains on; name a held-out split (or state the overlap: "
                                  f"tasks.{task}.allow_overlap)")
            if (same := same_local_file(datasets, tcfg["pool"], b)) and not tcfg.get("allow_overlap"):
                raise ConfigError(f"tasks.{task}.benchmarks[{i}]: {b!r} reads the same file as the task's pool "
                                  f"{tcfg['pool']!r} ({same}), the same rows: its gain would be measured on the "
                                  f"questions it trains on; name a held-out file, or keep disjoint rows of it in each "
                                  f"split (rows, ids, or start and stop)")
    check_reasoning_gym(cfg)
    check_split_fields(datasets)
    check_local_splits(datasets)
    check_strict_scoring(cfg)
    for b in cfg["evaluation"]["overrides"]:
        split_exists(b, f"evaluation.overrides.{b}")
    _check_seed_design(cfg)
    for name, m in cfg["models"].items():
        for task in m.get("tasks") or []:
            if task not in cfg["tasks"]:
                raise ConfigError(f"models.{name}.tasks: {task!r} is no task of this config "
                                  f"({', '.join(cfg['tasks'])})")
    for name, m in cfg["models"].items():
        if (m.get("architecture") or m["path"] == "standin") and m.get("architecture") not in known():
            raise ConfigError(f"models.{name}.architecture: {m.get('architecture')!r} is not a kept architecture "
                              f"(src/hardex/architectures); kept: {', '.join(known())}")
        try:
            check_model_source(f"models.{name}", m)
        except ModelError as e:
            raise ConfigError(str(e)) from None
        if m["path"] == "build":
            if "build" not in m or "sft_from" not in m["build"]:
                raise ConfigError(f"models.{name}.build.sft_from: required when path is 'build'")
            for i, ref in enumerate(m["build"]["sft_from"]):
                split_exists(ref, f"models.{name}.build.sft_from[{i}]")
                if (family := datasets[ref.split("/", 1)[0]]["family"]) not in SYNTHETIC_FAMILIES:
                    raise ConfigError(f"models.{name}.build.sft_from[{i}]: {ref!r} is a {family} split, whose rows "
                                      f"carry no worked solution to warm-start on; name a split of "
                                      f"{', '.join(SYNTHETIC_FAMILIES)}")
        grpo = grpo_settings(cfg, name)
        completions = completions_per_step(grpo)
        where = f"models.{name}.grpo" if m.get("grpo") else "grpo"
        if completions % grpo["gradient_accumulation_steps"]:
            raise ConfigError(
                f"{where}.gradient_accumulation_steps: {grpo['gradient_accumulation_steps']} does not divide "
                f"the {completions} completions of a step (prompts_per_step x num_generations)"
            )
        if grpo["rollouts"] == "vllm" and grpo["vllm"].get("tensor_parallel_size", 1) > 1:
            raise ConfigError(f"{where}.rollouts: vllm runs one engine in each training process, on its GPU; "
                              f"generation.vllm.tensor_parallel_size {grpo['vllm']['tensor_parallel_size']} is for "
                              f"probing and evaluation: set it to 1 or train with grpo.processes instead")
        if grpo["quantization"] != "none" and grpo["finetune"] != "lora":
            raise ConfigError(f"{where}.quantization: {grpo['quantization']} base weights train only LoRA adapters; "
                              f"set {where}.finetune: lora, or quantization: none")
        if completions % (grpo["gradient_accumulation_steps"] * grpo["processes"]):
            raise ConfigError(
                f"{where}.processes: {grpo['processes']} processes x {grpo['gradient_accumulation_steps']} "
                f"micro-batches (gradient_accumulation_steps) do not divide the {completions} completions of a step"
            )
        check_gpu_training(where, grpo)
        check_card_bfloat16(cfg, name, where, grpo)
        # epochs: where the pool's size is known
        if not grpo.get("epochs") and (why := past_horizon(grpo, grpo["max_steps"])):
            raise ConfigError(f"{where}.schedule_steps: {why}")
    for strategy in cfg["selection"]["strategies"]:
        for task in cfg["tasks"]:
            try:
                tier_values(cfg["selection"]["tiers"], strategy, task)
            except SelectionError as e:
                raise ConfigError(f"selection.strategies: {e}") from None
    ev = cfg["evaluation"]
    for ref, dec in decodings(cfg).items():
        override = ev["overrides"].get(ref, {})

        def where(k: str) -> str:  # the key a decoding setting of this benchmark comes from
            return f"evaluation.overrides.{ref}.{k}" if k in override else f"evaluation.decoding.{k}"

        if dec["temperature"] == 0 and dec["n_samples"] != 1:
            raise ConfigError(f"{where('n_samples')}: greedy decoding ({where('temperature')} 0) takes n_samples 1 "
                              f"(benchmark {ref})")
        if max(dec["pass_k"]) > dec["n_samples"]:
            raise ConfigError(f"{where('pass_k')}: {dec['pass_k']} needs n_samples >= {max(dec['pass_k'])} for "
                              f"benchmark {ref}; {where('n_samples')} is {dec['n_samples']}")
    _check_greedy_and_base_pass_k(cfg)


def _check_greedy_and_base_pass_k(cfg: dict) -> None:
    """evaluation.greedy adds a greedy sample beside sampled ones; evaluation.base_pass_k samples the base
    model K times on each task's first benchmark: neither can apply to a decoding that is already greedy.
    report.metrics is completed here (its default follows evaluation.greedy) and its greedy needs it."""
    ev, decoding = cfg["evaluation"], decodings(cfg)
    for ref, dec in decoding.items():
        if ev["greedy"] and dec["temperature"] == 0:
            raise ConfigError(f"evaluation.greedy: benchmark {ref} is already decoded greedily (temperature 0); "
                              f"set evaluation.greedy: false or sample it")
    metrics = cfg["report"]["metrics"]
    if metrics is None:  # report.metrics' default: every metric the evaluations record
        cfg["report"]["metrics"] = ["sampled"] + (["greedy"] if ev["greedy"] else [])
    elif "greedy" in metrics and not ev["greedy"]:
        raise ConfigError("report.metrics: greedy needs a greedy answer per question; set evaluation.greedy: true "
                          "or leave greedy out")
    k = ev["base_pass_k"]
    if k is None:
        return
    for task, tcfg in cfg["tasks"].items():
        ref = tcfg["benchmarks"][0]
        if decoding[ref]["temperature"] == 0:
            raise ConfigError(f"evaluation.base_pass_k: {k} samples of the base model on {ref} (task {task}), whose "
                              f"decoding is greedy (temperature 0): one completion per question")
        if k < decoding[ref]["n_samples"]:
            raise ConfigError(f"evaluation.base_pass_k: {k} is below the {decoding[ref]['n_samples']} samples "
                              f"(n_samples) the checkpoints take on {ref} (task {task}): "
                              "the base needs at least as many")


def _check_seed_design(cfg: dict) -> None:
    """A sequential design's arithmetic, and deciding comparisons that name runs the config trains."""
    try:
        seed_design(cfg)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    runs = run_strategies(cfg)
    for i, pair in enumerate(cfg["seeds"].get("deciding") or [] if isinstance(cfg["seeds"], dict) else []):
        for name in pair:
            if name not in runs and name != BASE_RUN:
                raise ConfigError(f"seeds.deciding[{i}]: {name!r} is no run of this config ({', '.join(runs)}, "
                                  f"or {BASE_RUN})")


def _check_power(cfg: dict) -> None:
    """A test whose power is at most its level finds nothing it would not find by chance."""
    power = cfg["report"]["power"]
    if power["power"] <= power["alpha"]:
        raise ConfigError(f"report.power.power: {power['power']} is not above report.power.alpha "
                          f"({power['alpha']}): any test reaches that power with 2 seeds")


def canonicalize(node: Any) -> Any:
    """Sort the keys of every mapping, in place; lists keep their order (it can mean something).

    Params derived from the config then do not depend on the order keys were written in, so
    reordering a config file reruns nothing.
    """
    if isinstance(node, dict):
        items = sorted(node.items(), key=lambda kv: str(kv[0]))
        node.clear()
        node.update((k, canonicalize(v)) for k, v in items)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            node[i] = canonicalize(v)
    return node


def _check_finite(node: Any, path: tuple = ()) -> None:
    """NaN and infinity (YAML's .nan and .inf) pass every schema bound, since comparisons with NaN are
    false: refuse them by key before anything else reads them."""
    if isinstance(node, float) and not math.isfinite(node):
        raise ConfigError(f"{key_path(path)}: {node} is not a finite number")
    if isinstance(node, dict):
        for k, v in node.items():
            _check_finite(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _check_finite(v, (*path, i))


def check_config(config: dict[str, Any], schema_path: Path = SCHEMA) -> dict[str, Any]:
    """Validate `config` in place (defaults filled, keys sorted) or raise ConfigError with one line."""
    _check_finite(config)
    # a model's grpo block overrides only the keys it writes: the schema's defaults (filled in by the
    # validation) must not override the top-level grpo section
    overrides = {m: copy.deepcopy(v.get("grpo")) for m, v in (config.get("models") or {}).items()
                 if isinstance(v, dict) and isinstance(v.get("grpo"), dict)}
    errors = schema_errors(config, schema_path)
    if errors:
        raise ConfigError(schema_error_line(errors[0]))
    for m, grpo in overrides.items():
        config["models"][m]["grpo"] = grpo
    check_strategy_names(config)
    _cross_checks(config)
    check_steps_fit_subsets(config)
    check_adaptive_boundaries(config)
    _check_power(config)
    check_imported_probes(config)
    check_prompts_and_reward_hooks(config)
    return canonicalize(config)


def yaml_syntax_error(path: str | Path) -> str | None:
    """Where a YAML file is not YAML, in one line (file, line, column, what the parser met), else None: Snakemake
    says only "Config file is not valid JSON or YAML", naming no file and no line."""
    import yaml

    path = Path(path)
    try:
        yaml.safe_load(path.read_text())
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return f"{path.name}{where}: {e.problem}" + (f" ({e.context})" if e.context else "")
    except yaml.YAMLError as e:
        return f"{path.name}: {e}"
    return None


def check_duplicate_keys(paths) -> None:
    """YAML keeps the last of two equal keys silently; a config must not name a model twice."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        pass

    def construct_mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(f"{Path(loader.name).name} line {key_node.start_mark.line + 1}: "
                                  f"{key!r} is defined twice")
            seen.add(key)
        return loader.construct_mapping(node, deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    for path in paths:
        with open(path) as fh:
            loader = StrictLoader(fh)
            loader.name = str(path)
            try:
                loader.get_single_data()
            finally:
                loader.dispose()


def check_or_exit(config: dict[str, Any], configfiles=()) -> dict[str, Any]:
    """For the Snakefile: a bad config prints one line and exits before anything is planned."""
    try:
        check_duplicate_keys(configfiles)
        return check_config(config)
    except ConfigError as e:
        print(f"hardex: config error: {e}", file=sys.stderr)
        sys.exit(1)
