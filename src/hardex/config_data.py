"""The config's checks of its data at planning: each split's spec, local files read as their dataset_split jobs will
read them (`_made_split`, once per planning), and what reads a pool's rows before any job: imported pass rates
matched to its ids, a reward hook called on its first example. A mistake here would otherwise stop a data or train
job after the jobs before it ran."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import polars as pl

from hardex.config_errors import ConfigError
from hardex.imported_probe import GREEDY_COLUMN, ImportedRatesError, check_ids, read_rates
from hardex.io import file_sha256
from hardex.reward_hook import HookError, check_hook, check_returns, trial_calls
from hardex.selection import BASE_SPLIT_STRATEGIES
from hardex.settings import (
    GENERATED_FAMILIES,
    SYNTHETIC_FAMILIES,
    model_tasks,
    peek_local_file,
    split_files,
    split_spec,
)
from hardex.tasks import STRICT_FAMILIES, DataError, get_task, reasoning_gym, template_error
from hardex.tasks.rows import check_fields, keep_listed, listed


def check_split(key: str, family: str, split: str, spec: dict) -> None:
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
        return  # check_reasoning_gym, with the dataset's task and config
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
        raise ConfigError(f"{key}.n: {spec['n']} items asked, but only about {room} distinct ones exist in this "
                          f"split for difficulty {spec['difficulty']}; "
                          f"ask for at most {room // 2} or widen the difficulty range")


def check_reasoning_gym(cfg: dict) -> None:
    """reasoning_gym datasets: the package, the task and its fields, each split made as its job will make it where
    that is quick, and no benchmark sharing a problem with its pool (hardex.tasks.reasoning_gym.planning_error)."""
    if error := reasoning_gym.planning_error(cfg["datasets"], cfg["tasks"], lambda ref: split_spec(cfg, ref)["spec"]):
        raise ConfigError(error)


def check_split_fields(datasets: dict) -> None:
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


def same_local_file(datasets: dict, pool: str, benchmark: str) -> str | None:
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


def check_local_splits(datasets: dict) -> None:
    """Each split read from a local file, made as its job will make it: a row without its answer or a repeated
    id stops planning, not the data job."""
    for ds, dcfg in datasets.items():
        for split, spec in dcfg["splits"].items():
            if spec.get("file") and "{config}" not in spec["file"]:
                try:
                    _made_split(dcfg["family"], {"name": split, **spec})
                except DataError as e:
                    raise ConfigError(f"datasets.{ds}.splits.{split}: {e}") from None


def check_strict_scoring(cfg: dict) -> None:
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


def check_imported_probes(cfg: dict) -> None:
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
            raise ConfigError(f"{key}: selection.strategies {', '.join(greedy_strategies)} split the pool by the "
                              f"base model's greedy answer, which {probe['from']} does not give (no {GREEDY_COLUMN} "
                              f"column); add the column or drop those strategies")


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


def check_prompts_and_reward_hooks(cfg: dict) -> None:
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
