"""Config validation: the JSON schema with its defaults, then the cross-references a schema cannot say.

`check_config` is called by the Snakefile before any job is planned. A mistake ends the run with
one line that names the key, the value and what is allowed. The views of the checked config that the
rules read are `hardex.settings`; the cross-checks here read them too.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import polars as pl

from hardex.architectures import known
from hardex.imported_probe import GREEDY_COLUMN, ImportedRatesError, check_ids, read_rates
from hardex.io import file_sha256
from hardex.job_time import gpu_rates, rates_key
from hardex.model_sources import check_model_source
from hardex.models import ModelError
from hardex.precision import BF16_CAPABILITY, bf16_refusal
from hardex.reward_hook import HookError, check_hook, check_returns, trial_calls
from hardex.schedule import completions_per_step, past_horizon, run_steps
from hardex.schema import SCHEMA
from hardex.selection import (BASE_SPLIT_STRATEGIES, BOUNDARY_STRATEGIES, BUDGET_STRATEGIES, CONTROLS, STRATEGIES,
                              RunName, SelectionError, check_band, subset_size, tier_values)
from hardex.sequential import BASE_RUN
from hardex.settings import (GENERATED_FAMILIES, SYNTHETIC_FAMILIES, boundary_strategies, decodings, grpo_settings,
                             known_split_size, model_tasks, peek_local_file, run_strategies, seed_design, split_files,
                             split_spec)
from hardex.tasks import STRICT_FAMILIES, DataError, get_task, template_error
from hardex.tasks import reasoning_gym
from hardex.tasks.rows import check_fields, keep_listed, listed


class ConfigError(ValueError):
    """An invalid config; str() is the one-line message for the user."""


def _path(parts) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def _number_hint(value, expected) -> str:
    """Why a number came as text: YAML 1.1 reads 3e-5 (no dot before the exponent) as a string."""
    if isinstance(value, str) and "number" in str(expected):
        try:
            number = float(value)
        except ValueError:
            return ""
        mantissa, _, exponent = value.lower().partition("e")
        if exponent and "." not in mantissa:
            return f" (YAML reads {value} as text: write {mantissa}.0e{exponent})"
        return f" (write {number!r} without quotes)"
    return ""


#: keys users bring from TRL's GRPOConfig, and what to write instead
TRL_KEYS = {
    "per_device_train_batch_size": "a step's batch is grpo.prompts_per_step prompts x grpo.num_generations "
                                   "completions (grpo.gradient_accumulation_steps splits it)",
    "num_train_epochs": "write grpo.epochs (a step budget by epochs) or grpo.max_steps",
    "reward_funcs": "a task's reward is its scorer, or a hook of your own in tasks.<task>.reward (module:function)",
    "max_steps_per_epoch": "write grpo.max_steps",
    "bf16": "write grpo.precision: bf16",
    "fp16": "write grpo.precision: fp16",
    "output_dir": "runs are written under results/train/<model>/<task>/<strategy>/seed<N>",
}


def _share_hint(key: str, value) -> str:
    """A budget is a share of the pool: '10%' and 10 were meant as 0.1."""
    if key.rsplit(".", 1)[-1] != "budget":
        return ""
    text = str(value).strip()
    try:
        percent = float(text.removesuffix("%"))
    except ValueError:
        return " (a share of the pool, between 0 and 1)"
    if text.endswith("%"):
        return f" (a share of the pool: write {percent / 100:g} for {percent:g} %)"
    return f" (a share of the pool: {percent:g} % is {percent / 100:g})" if 1 < percent <= 100 else ""


def _schema_error_line(err) -> str:
    """One line for a jsonschema ValidationError: key, value, what is allowed."""
    if err.validator == "oneOf" and err.context:  # one of several forms: the error of the form the value has
        same_type = [e for e in err.context if e.validator != "type"]
        if same_type:
            return _schema_error_line(min(same_type, key=lambda e: len(e.relative_schema_path)))
        types = " or ".join(str(e.schema["type"]) for e in err.context)
        return f"{_path(err.absolute_path)}: {err.instance!r} has the wrong type; expected {types}"
    key = _path(err.absolute_path)
    v, kind, sch = err.instance, err.validator, err.schema
    if kind == "additionalProperties":
        allowed = sorted(sch.get("properties", {}))
        extra = sorted(set(v) - set(allowed)) if isinstance(v, dict) else []
        where = f"{key}." if err.absolute_path else ""
        name = extra[0] if extra else "?"
        if name in TRL_KEYS:
            return f"{where}{name}: unknown key (a TRL setting): {TRL_KEYS[name]}"
        hint = f"; allowed: {', '.join(allowed)}" if allowed else ""
        return f"{where}{name}: unknown key{hint}"
    if kind == "required":
        missing = [r for r in sch["required"] if r not in v]
        return f"{key + '.' if err.absolute_path else ''}{missing[0]}: required key is missing"
    if kind == "enum":  # a rehearsal's own scorings (hardex-rehearse writes them) are not for a user to write
        allowed = [str(e) for e in sch["enum"] if not str(e).startswith("rehearsal+")]
        other = "; for another card state its peaks in compute.gpu_rates" if key == "compute.gpu_kind" else ""
        return f"{key}: {v!r} is not allowed; allowed: {', '.join(allowed)}{other}"
    if kind == "type":
        hint = _share_hint(key, v) or _number_hint(v, sch["type"])
        return f"{key}: {v!r} has the wrong type; expected {sch['type']}{hint}"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[kind]
        rng = [f"{o} {sch[k]}" for k, o in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                            ("maximum", "<="), ("exclusiveMaximum", "<")) if k in sch]
        return f"{key}: {v!r} is out of range; must be {' and '.join(rng) or op}{_share_hint(key, v)}"
    if kind == "pattern":
        why = f" ({sch['description']})" if sch.get("description") else ""
        return f"{key}: {v!r} does not match {sch['pattern']}{why}"
    if kind in ("minItems", "minProperties") and sch[kind] > 1:
        return f"{key}: {v!r} is too short; needs {sch[kind]} entries"
    if kind in ("minItems", "minProperties"):
        return f"{key}: must not be empty"
    if kind == "maxItems":
        return f"{key}: {v!r} is too long; at most {sch[kind]} entries"
    if kind == "uniqueItems":
        return f"{key}: {v!r} has duplicate entries"
    return f"{key}: {err.message}"


def _schema_errors(config: dict, schema_path: Path) -> list:
    """Validate with Snakemake's own `validate` (which fills defaults); return jsonschema errors."""
    import jsonschema
    import yaml
    from snakemake.utils import validate

    schema = yaml.safe_load(schema_path.read_text())
    try:
        validate(config, str(schema_path), set_default=True)
        return []
    except Exception:
        # Snakemake's message is a multi-line dump; recompute the errors to report them precisely
        validator = jsonschema.Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
        if errors:
            return errors
        raise


def _check_split(key: str, family: str, split: str, spec: dict) -> None:
    """One dataset split: what it needs, its windows and slices, and what a generator can make."""
    for name, kind in (("rows", int), ("ids", str)):
        try:  # a list from a file becomes the list itself: params carry it, so editing the file reruns
            spec[name] = listed(spec.get(name), kind, f"{key}.{name}")
        except DataError as e:
            raise ConfigError(str(e)) from None
        if spec[name] is None:
            del spec[name]
    if "start" in spec and "stop" in spec and spec["start"] >= spec["stop"]:
        raise ConfigError(f"{key}: start {spec['start']} is not before stop {spec['stop']}: no rows")
    if family != "reasoning_gym" and (isinstance(spec.get("config"), dict) or "tiers" in spec):
        which = "config" if isinstance(spec.get("config"), dict) else "tiers"
        raise ConfigError(f"{key}.{which}: a task's settings are for family reasoning_gym (here: {family!r}; "
                          f"a hub split's config is the name of the hub config)")
    if family == "reasoning_gym":
        return  # _check_reasoning_gym, with the dataset's task and config
    if family not in SYNTHETIC_FAMILIES:
        if not (spec.get("hub") or spec.get("file")):
            raise ConfigError(f"{key}: give a hub dataset (hub, config, split) or a local file (file)")
        if spec.get("file") and "{config}" not in spec["file"] and not Path(spec["file"]).exists():
            raise ConfigError(f"{key}.file: {spec['file']!r} does not exist")
        return
    for need in ("n", "seed", "difficulty"):
        if need not in spec:
            raise ConfigError(f"{key}.{need}: required for synthetic family {family!r}")
    if split not in ("pool", "test", "ood", "sft"):
        raise ConfigError(f"{key}: synthetic splits are pool, test, ood and sft, not {split!r}")
    for window in ("difficulty", "people"):
        if window in spec and spec[window][0] > spec[window][1]:
            raise ConfigError(f"{key}.{window}: {spec[window]} must be [low, high] with low <= high")
    room = get_task(family).capacity({**spec, "name": split})
    if spec["n"] > room // 2:  # beyond half of them, drawing distinct items takes ever longer
        raise ConfigError(f"{key}.n: {spec['n']} items asked, but only about {room} distinct ones exist in this split "
                          f"for difficulty {spec['difficulty']}; ask for at most {room // 2} or widen the difficulty range")


def _check_reasoning_gym(cfg: dict) -> None:
    """reasoning_gym datasets: the package, the task and its fields, each split made as its job will make it where
    that is quick, and no benchmark sharing a problem with its pool (hardex.tasks.reasoning_gym.planning_error)."""
    if error := reasoning_gym.planning_error(cfg["datasets"], cfg["tasks"], lambda ref: split_spec(cfg, ref)["spec"]):
        raise ConfigError(error)


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
            _check_split(f"datasets.{ds}.splits.{split}", dcfg["family"], split, spec)
    for task, tcfg in cfg["tasks"].items():
        split_exists(tcfg["pool"], f"tasks.{task}.pool")
        for i, b in enumerate(tcfg["benchmarks"]):
            split_exists(b, f"tasks.{task}.benchmarks[{i}]")
            if b == tcfg["pool"] and not tcfg.get("allow_overlap"):
                raise ConfigError(f"tasks.{task}.benchmarks[{i}]: {b!r} is the task's pool: its gain would be measured "
                                  f"on the questions it trains on; name a held-out split (or state the overlap: "
                                  f"tasks.{task}.allow_overlap)")
            if (same := _same_local_file(datasets, tcfg["pool"], b)) and not tcfg.get("allow_overlap"):
                raise ConfigError(f"tasks.{task}.benchmarks[{i}]: {b!r} reads the same file as the task's pool "
                                  f"{tcfg['pool']!r} ({same}), the same rows: its gain would be measured on the "
                                  f"questions it trains on; name a held-out file, or keep disjoint rows of it in each "
                                  f"split (rows, ids, or start and stop)")
    _check_reasoning_gym(cfg)
    _check_split_fields(datasets)
    _check_local_splits(datasets)
    _check_strict_scoring(cfg)
    for b in cfg["evaluation"]["overrides"]:
        split_exists(b, f"evaluation.overrides.{b}")
    _check_seed_design(cfg)
    for name, m in cfg["models"].items():
        for task in m.get("tasks") or []:
            if task not in cfg["tasks"]:
                raise ConfigError(f"models.{name}.tasks: {task!r} is no task of this config ({', '.join(cfg['tasks'])})")
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
                    raise ConfigError(f"models.{name}.build.sft_from[{i}]: {ref!r} is a {family} split, whose rows carry "
                                      f"no worked solution to warm-start on; name a split of {', '.join(SYNTHETIC_FAMILIES)}")
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
        _check_gpu_training(where, grpo)
        _check_card_bfloat16(cfg, name, where, grpo)
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
            raise ConfigError(f"{where('pass_k')}: {dec['pass_k']} needs n_samples >= {max(dec['pass_k'])} for benchmark "
                              f"{ref}; {where('n_samples')} is {dec['n_samples']}")
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
                              f"(n_samples) the checkpoints take on {ref} (task {task}): the base needs at least as many")


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


#: grpo.distributed strategies that shard the weights over the processes
SHARDED_WEIGHTS = ("zero3", "fsdp1", "fsdp2")


def _check_gpu_training(where: str, grpo: dict) -> None:
    """Combinations of several processes, sharding, 4-bit weights and rollouts that cannot train as asked."""
    processes = grpo["processes"]
    own_rollouts = grpo["rollouts"] in ("hardex", "vllm")  # hardex.rollouts.HardexRollouts
    if processes > 1 and own_rollouts and grpo["prompts_per_step"] % processes:
        raise ConfigError(f"{where}.prompts_per_step: {grpo['prompts_per_step']} prompts do not split into whole groups "
                          f"over {processes} processes (grpo.processes), which hardex's rollouts "
                          f"(grpo.rollouts: {grpo['rollouts']}) need; use a multiple of {processes}")
    if processes > 1 and own_rollouts and grpo["distributed"] in SHARDED_WEIGHTS:
        raise ConfigError(f"{where}.rollouts: {grpo['rollouts']} samples the unwrapped model, whose weights "
                          f"grpo.distributed: {grpo['distributed']} shards over the {processes} processes (the gathers "
                          f"fall out of step); use rollouts: trl or vllm-server, or distributed: multi_gpu, zero1 "
                          f"or zero2")
    if grpo["quantization"] != "none" and processes > 1:
        raise ConfigError(f"{where}.quantization: {grpo['quantization']} loads every process's model on the first GPU; "
                          f"train 4-bit weights in one process (processes: 1) or set quantization: none")
    if processes > 1 and grpo["rollouts"] == "vllm":
        # TRL's own colocate mode starts vLLM with its external_launcher, one engine per rank on its GPU;
        # hardex's in-process engine does not, so every rank's engine lands on cuda:0
        raise ConfigError(f"{where}.rollouts: vllm starts an engine in each of the {processes} training processes "
                          f"(grpo.processes) and every one lands on the first GPU; use processes: 1, or rollouts: "
                          f"vllm-server, trl or hardex")
    if grpo["quantization"] != "none" and grpo["rollouts"] in ("vllm", "vllm-server"):
        # TRL merges the adapters into the packed NF4 weights and sends uint8 tensors to a 16-bit engine
        raise ConfigError(f"{where}.quantization: {grpo['quantization']} with rollouts: {grpo['rollouts']} would add the "
                          f"LoRA deltas to packed 4-bit weights; use rollouts: hardex or trl")
    if grpo["rollouts"] == "vllm-server" and grpo["finetune"] == "lora" and grpo["precision"] != "fp32":
        # TRL's sync (W += dW, read, W -= dW) rounds twice a step: in 16 bits the frozen base and the KL reference
        # walk away over a run (tests/unit/test_vllm_server.py); float32's rounding is 2^16 times finer. auto is
        # refused too (bf16 from Ampere on); hardex's own vLLM rollouts compute W + dW without touching W.
        precision = "bf16" if grpo["precision"] == "auto" else grpo["precision"]
        raise ConfigError(f"{where}.rollouts: vllm-server with finetune: lora syncs the server by merging the adapters "
                          f"into the frozen base and unmerging them after, every step, which in {precision} drifts the "
                          f"base; use rollouts: vllm (one process), or {where}.precision: fp32")


def _check_card_bfloat16(cfg: dict, model: str, where: str, grpo: dict) -> None:
    """An explicit bfloat16 on the config's card without it (compute capability below 8.0, stated for each
    gpu_kind and, where a user says it, in gpu_rates) is refused here: the train job would refuse it only after
    hours of probing (hardex.precision), and vLLM refuses it too. auto takes fp32 there."""
    cap = gpu_rates(cfg).capability
    if not cfg["compute"]["gpu"] or cap is None or cap >= BF16_CAPABILITY:
        return
    card = f"{rates_key(cfg)} states {gpu_rates(cfg).name}'s, {'.'.join(map(str, cap))}"
    if cfg["models"][model].get("dtype") == "bfloat16":
        raise ConfigError(bf16_refusal(f"models.{model}.dtype", "bfloat16", card, "auto, float32 or float16"))
    if grpo["precision"] == "bf16":
        raise ConfigError(bf16_refusal(f"{where}.precision", "bf16", card))


def _check_split_fields(datasets: dict) -> None:
    """`fields` renames columns to the ones the family reads: refused where it cannot apply."""
    for ds, dcfg in datasets.items():
        for split, spec in dcfg["splits"].items():
            try:
                fields = check_fields(get_task(dcfg["family"]), spec.get("fields"))
            except DataError as e:
                raise ConfigError(f"datasets.{ds}.splits.{split}.{e}") from None
            read = peek_local_file(spec["file"]) if spec.get("file") and fields else None
            if read and read[1]:  # a local file planning can read: its columns, before any job
                for role, column in fields.items():
                    if column not in read[1]:
                        raise ConfigError(
                            f"datasets.{ds}.splits.{split}.fields.{role}: column {column!r} is not in {spec['file']} "
                            f"(its first row's columns: {', '.join(read[1])})")


def _made_split(family: str, spec: dict) -> pl.DataFrame:
    """A split as its dataset_split job makes it (a DataError where it cannot be), made once per planning: the
    checks of local files, of imported pass rates and of reward hooks all read it. Kept by the spec and the
    times and sizes of the files it names, so an edited file is read again."""
    stamps = tuple((p, (st := os.stat(p)).st_mtime_ns, st.st_size) for p in split_files(spec))
    made = _made_split_cached(family, json.dumps(spec, sort_keys=True, default=str), stamps)
    if isinstance(made, DataError):
        raise made
    return made


@functools.lru_cache(maxsize=32)
def _made_split_cached(family: str, spec_json: str, stamps: tuple) -> pl.DataFrame | DataError:
    spec = json.loads(spec_json)
    try:
        return keep_listed(get_task(family).load_split(spec, root=None), spec)
    except DataError as e:
        return e


def _same_local_file(datasets: dict, pool: str, benchmark: str) -> str | None:
    """The local file a pool and a benchmark both read alike (the same bytes, under one name or two, and the same
    family and row selection: no start, stop, rows, ids or filter of their own), or None. The overlap job would
    stop it too, but only after the data jobs ran."""
    read = []
    for ref in (pool, benchmark):
        ds, split = ref.split("/", 1)
        spec = datasets[ds]["splits"][split]
        if not (files := split_files({"file": spec.get("file")})):
            return None
        selection = {k: v for k, v in spec.items() if k not in ("file", "split")}  # `split` names a hub split only
        read.append((files[0], file_sha256(files[0]), datasets[ds]["family"], selection))
    (pool_file, *pool_read), (_, *benchmark_read) = read
    return pool_file if pool_read == benchmark_read else None


def _check_local_splits(datasets: dict) -> None:
    """Each split read from a local file, made as its job will make it: a row without its answer or a repeated
    id stops planning, not the data job."""
    for ds, dcfg in datasets.items():
        for split, spec in dcfg["splits"].items():
            if spec.get("file") and "{config}" not in spec["file"]:
                try:
                    _made_split(dcfg["family"], {"name": split, **spec})
                except DataError as e:
                    raise ConfigError(f"datasets.{ds}.splits.{split}: {e}") from None


def _check_strict_scoring(cfg: dict) -> None:
    """Strict scoring is paper 1's released scorers, which exist for a few families only."""
    for task, tcfg in cfg["tasks"].items():
        if not tcfg.get("scoring", "").endswith("strict"):  # "rehearsal+strict" runs the strict scorer too
            continue
        for ref in [tcfg["pool"], *tcfg["benchmarks"]]:
            family = cfg["datasets"][ref.split("/", 1)[0]]["family"]
            if family not in STRICT_FAMILIES:
                raise ConfigError(
                    f"tasks.{task}.scoring: 'strict' (paper 1's released scorers) is not available for {ref!r}, "
                    f"family {family!r}; it is for {', '.join(sorted(STRICT_FAMILIES))}")


def _check_steps_fit_subsets(cfg: dict) -> None:
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


def _check_strategy_names(cfg: dict) -> None:
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


def _check_adaptive_boundaries(cfg: dict) -> None:
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


def _check_power(cfg: dict) -> None:
    """A test whose power is at most its level finds nothing it would not find by chance."""
    power = cfg["report"]["power"]
    if power["power"] <= power["alpha"]:
        raise ConfigError(f"report.power.power: {power['power']} is not above report.power.alpha "
                          f"({power['alpha']}): any test reaches that power with 2 seeds")


def _check_imported_probes(cfg: dict) -> None:
    """Pass rates imported for a task (`tasks.<task>.probe.from`, hardex.imported_probe): the file checked
    here (columns, counts) and matched to the pool where planning knows the pool's ids (a generated split or
    a local file; the job checks the others); one model's rates for one model; the greedy answer where a
    strategy splits on it."""
    # base_wrong, base_right and matched_random's size split the pool by the greedy answer; full does not
    greedy_strategies = [s for s in cfg["selection"]["strategies"] if s in BASE_SPLIT_STRATEGIES and s != "full"]
    for task, tcfg in cfg["tasks"].items():
        probe, key = tcfg.get("probe") or {}, f"tasks.{task}.probe.from"
        if "from" not in probe:
            if "from_note" in probe:
                raise ConfigError(f"tasks.{task}.probe.from_note: says where imported pass rates come from, but {key} "
                                  f"names no file")
            continue
        sampled = [k for k in ("k", "temperature", "top_p", "max_new_tokens") if k in probe]
        if sampled:
            raise ConfigError(f"tasks.{task}.probe.{sampled[0]}: the task's pass rates are imported ({key}), nothing "
                              f"is sampled; drop it (the file's samples column is K)")
        models = [m for m in cfg["models"] if task in model_tasks(cfg, m)]
        if len(models) > 1:
            raise ConfigError(f"{key}: the file holds one model's pass rates, but models {', '.join(models)} run task "
                              f"{task!r}; give the task to one of them (models.<name>.tasks) and another task with the "
                              f"same pool to the others")
        try:
            rates = read_rates(probe["from"], key)
            pool_ids = _planned_split_ids(cfg, tcfg["pool"])
            if pool_ids is not None:
                check_ids(rates, pool_ids, key)
        except ImportedRatesError as e:
            raise ConfigError(str(e)) from None
        if greedy_strategies and GREEDY_COLUMN not in rates.columns:
            raise ConfigError(f"{key}: selection.strategies {', '.join(greedy_strategies)} split the pool by the base "
                              f"model's greedy answer, which {probe['from']} does not give (no {GREEDY_COLUMN} column); "
                              f"add the column or drop those strategies")


def _planned_split(cfg: dict, ref: str) -> pl.DataFrame | None:
    """A split as its dataset_split job makes it, where planning can without the hub (a generated split, a local
    file); None for a hub split, or where the split cannot be made (its job says why)."""
    spec = split_spec(cfg, ref)
    if spec["family"] not in GENERATED_FAMILIES and not spec["spec"].get("file"):
        return None
    try:
        return _made_split(spec["family"], spec["spec"])
    except (DataError, OSError, ValueError):
        return None


def _planned_split_ids(cfg: dict, ref: str) -> list[str] | None:
    """A split's ids where planning can make it (`_planned_split`), else None."""
    split = _planned_split(cfg, ref)
    return None if split is None else split["id"].to_list()


def _first_example(cfg: dict, ref: str) -> tuple[str, str]:
    """(question, answer) of a split's first row where planning can make it, else an example of the form."""
    split = _planned_split(cfg, ref)
    if split is None or split.height == 0:
        return ("What is 6 x 7?", "42")
    row = split.row(0, named=True)
    return (str(row["question"]), str(row["answer"]))


def _check_prompts_and_reward_hooks(cfg: dict) -> None:
    """A task's prompt template (it names {question}, and nothing but {question} and {instruction}) and its
    reward hook (it imports, and takes (completion, answer, prompt): hardex.reward_hook.check_hook)."""
    for task, tcfg in cfg["tasks"].items():
        if "prompt_template" in tcfg and (error := template_error(tcfg["prompt_template"])):
            raise ConfigError(f"tasks.{task}.prompt_template: {error}")
        if "reward" in tcfg:
            try:
                check_hook(tcfg["reward"])
                check_returns(tcfg["reward"], trial_calls(*_first_example(cfg, tcfg["pool"])))
            except HookError as e:
                raise ConfigError(f"tasks.{task}.reward: {e}") from None


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
        raise ConfigError(f"{_path(path)}: {node} is not a finite number")
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
    errors = _schema_errors(config, schema_path)
    if errors:
        raise ConfigError(_schema_error_line(errors[0]))
    for m, grpo in overrides.items():
        config["models"][m]["grpo"] = grpo
    _check_strategy_names(config)
    _cross_checks(config)
    _check_steps_fit_subsets(config)
    _check_adaptive_boundaries(config)
    _check_power(config)
    _check_imported_probes(config)
    _check_prompts_and_reward_hooks(config)
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
