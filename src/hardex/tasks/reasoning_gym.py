r"""reasoning-gym's procedural tasks as one hardex family (`family: reasoning_gym`).

reasoning-gym (the `reasoning-gym` package, pure Python, its data inside the wheel) registers about a
hundred generators of verifiable problems, each with a configuration dataclass, a verifier
(`score_answer`, in [0, 1], partial credit where the task gives it) and, for most, a curriculum of
difficulty levels. A dataset of this family names its `task` (one registered name, or several with
weights: a mixed pool) and its `config` (the task's own fields); a split names `n` and `seed`, and may
override `config` (an `ood` split at harder settings) or name `tiers`: curriculum levels (`[0, 1, 2]`)
or named configurations (`{easy: {...}, hard: {...}}`), `n` shared evenly among them, each row's level
or name in the `tier` column. In a mixed pool every `config` is keyed by task name, and a row's `tier`
is its task (`task/tier` with tiers), so the per-tier tables read per task.

A row's reference (`answer`) is the entry the verifier needs, as JSON (`reference` / `entry_of`): the
task, its configuration (some verifiers read it), the task's own answer and its metadata; the task's
answer alone is in `gold`, and the task name in `rg_task`. A completion's answer is read as every family
reads one (the last box, else with `scoring: flexible` the last number where the task's answer is a
number) and scored by the task's `score_answer`: that score is the reward, a score of 1 a pass.

Splits are disjoint by construction, as the synthetic families' are: a generated item belongs to the
split whose hash bucket (`synthetic.SPLIT_BUCKETS`) its problem key falls in, and no key repeats within a
split. The key is the problem's canonical form where the task's metadata gives one (`CANONICAL_FIELDS`:
"Calculate 5 - 3" and "Solve 5 - 3" are one problem of basic_arithmetic), else the question's text with
its spacing normalized.

reasoning-gym is imported only by the functions that use it; its version (`version`, read from the
installed distribution without importing it) is in every split's spec, and so in the params of the data,
and in the scorer's identity, which keys probing, training and evaluation (hardex.job.work_identity).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import re
import typing
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import polars as pl

from hardex.tasks.base import SPLIT_BUCKETS, DataError, Task, check_split, last_number, split_bucket
from hardex.tasks.numbers import is_plain_number

DISTRIBUTION = "reasoning-gym"
INSTALL = "pip install 'reasoning-gym==0.1.25' (or pip install -e '.[reasoning-gym]')"
#: the fields hardex sets itself: a split's seed and n decide them
RESERVED_FIELDS = ("seed", "size")
#: metadata fields that state a task's problem whatever its wording: the problem key (module docstring)
CANONICAL_FIELDS: dict[str, tuple[str, ...]] = {
    "basic_arithmetic": ("expression",),
    "chain_sum": ("expression",),
    "decimal_chain_sum": ("expression",),
    "products": ("expression",),
    "gcd": ("numbers",),
    "lcm": ("numbers",),
    "leg_counting": ("animals",),
    "simple_equations": ("equation", "variable"),
    "spell_backward": ("word",),
    "count_bits": ("number",),
    "count_primes": ("start", "end"),
    "number_sequence": ("sequence",),
    "coin_flip": ("num_trials", "k_heads", "problem_type"),
}
#: fields whose order does not change the problem (gcd of 4 and 6 is gcd of 6 and 4)
UNORDERED_FIELDS = {("gcd", "numbers"), ("lcm", "numbers")}
#: expressions whose brackets the key leaves out, as the overlap check's normalized text does: basic_arithmetic
#: writes '( 4 - -8 )' and '4 - -8', and '-( 6 + -6 )' beside '-6 + -6'; with brackets in the key such twins
#: fell into different splits, and every test split of its level 0 held one or two the data check refused
BRACKETLESS_FIELDS = {("basic_arithmetic", "expression")}
# generation tries per row asked before a split is declared unable to hold n distinct problems
TRIES_PER_ROW, TRIES_SLACK = 50, 2000
#: planning makes a split itself only where that takes about this long at most (its data job makes the rest)
PLAN_GENERATION_SECONDS = 15.0
#: a pass: a score of 1, up to the rounding of verifiers that sum partial credits (0.1 * 10 is 0.9999999999999999)
PASS_SCORE = 1.0 - 1e-9
#: seconds one generated item may take: some generators never return at some settings (number_sequence at its
#: curriculum's level 2 in 0.1.25), and planning and the data job must stop with a reason instead of hanging
ITEM_SECONDS = 10.0


class NotInstalled(DataError):
    """reasoning-gym is not installed: the message says how to install it."""


def version() -> str | None:
    """The installed reasoning-gym's version, None when it is not installed (read without importing it)."""
    try:
        return importlib_metadata.version(DISTRIBUTION)
    except importlib_metadata.PackageNotFoundError:
        return None


def _factory():
    if version() is None:
        raise NotInstalled(f"family reasoning_gym needs the reasoning-gym package, which is not installed: {INSTALL}")
    import reasoning_gym  # noqa: F401  (registers every task)
    from reasoning_gym import factory

    return factory


def task_names() -> list[str]:
    """Every task reasoning-gym registers (its `composite` aside: a mixed pool is hardex's `task` mapping)."""
    return sorted(n for n in _factory().DATASETS if n != "composite")


def task_fields(task: str) -> dict[str, Any]:
    """{field: its type} of a task's configuration, hardex's own (seed, size) left out."""
    config_cls = _factory().DATASETS[task][1]
    hints = typing.get_type_hints(config_cls)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(config_cls) if f.name not in RESERVED_FIELDS}


def curriculum_levels(task: str) -> int | None:
    """How many difficulty levels a task's curriculum has (its longest attribute's), None without one."""
    factory = _factory()
    if not factory.has_curriculum(task):
        return None
    return max(len(a.levels) for a in factory.create_curriculum(task).attributes.values())


def _type_ok(value: Any, hint: Any) -> bool:
    """Whether a config value has a field's type, as YAML gives values: an int where a float is asked is fine,
    a bool is never a number; container and composite hints are checked by their outer kind only."""
    origin = typing.get_origin(hint)
    if hint is Any or isinstance(hint, typing.TypeVar):
        return True
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        return any(_type_ok(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin in (list, tuple, typing.Sequence) or hint in (list, tuple):
        return isinstance(value, list)
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is bool:
        return isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def config_error(task: str, fields: dict[str, Any]) -> tuple[str | None, str] | None:
    """Why a task cannot take these configuration fields, as (the field, or None for the whole, the reason naming
    the task's fields), or None; the task's own `validate` (its ranges) runs on them too."""
    known = task_fields(task)
    for name, value in fields.items():
        if name in RESERVED_FIELDS:
            return name, "set by hardex (a split's seed and n), not in config"
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            return name, f"{task} has no such field{hint}; its fields: {', '.join(known)}"
        if not _type_ok(value, known[name]):
            return name, f"{value!r} has the wrong type; {task} expects {_type_name(known[name])}"
    try:
        _dataset(task, json.dumps(fields, sort_keys=True), 0, 1)
    except Exception as e:  # the task's own validate(): assertions on ranges and combinations
        return None, f"{task} refuses these settings ({type(e).__name__}: {e or 'its validate() failed'})"
    return None


def unknown_task_error(task: str) -> str | None:
    """Why a task name is not a reasoning-gym task (naming the nearest ones), or None."""
    names = task_names()
    if task in names:
        return None
    near = difflib.get_close_matches(task, names, n=3, cutoff=0.5)
    return f"{task!r} is no reasoning-gym task" + (f"; nearest: {', '.join(near)}" if near else
                                                   f" ({len(names)} registered, e.g. {', '.join(names[:5])})")


@functools.lru_cache(maxsize=256)
def _dataset(task: str, fields_json: str, seed: int, size: int):
    factory = _factory()
    dataset_cls, config_cls = factory.DATASETS[task]
    config = config_cls(**json.loads(fields_json), seed=seed, size=size)
    if hasattr(config, "validate"):
        config.validate()
    return dataset_cls(config=config)


def _level_fields(task: str, level: int) -> dict[str, Any]:
    """The configuration fields of a task's curriculum at one level: every attribute at that level (or its last,
    where it has fewer), each range attribute's bounds at that level's values (reasoning-gym's UPPER_BOUND)."""
    factory = _factory()
    from reasoning_gym.coaching.base_curriculum import DefaultCurriculumContext, RangeAttributeMode

    curriculum = factory.create_curriculum(task)
    for name, attr in curriculum.attributes.items():
        curriculum.set_attr_level(name, min(level, len(attr.levels) - 1))
    config = curriculum.generate_configuration(context=DefaultCurriculumContext(mode=RangeAttributeMode.UPPER_BOUND))
    out = {}
    for attr in curriculum.attributes.values():
        names = ([attr.lower_field_name, attr.upper_field_name] if hasattr(attr, "lower_field_name")
                 else [attr.field_name])
        for f in names:
            value = getattr(config, f)
            out[f] = list(value) if isinstance(value, tuple) else value
    return out


def weights_of(spec: dict[str, Any]) -> dict[str, float]:
    """{task: weight} of a split's spec: one task at weight 1, or a mixed pool's mapping."""
    task = spec["task"]
    return {task: 1.0} if isinstance(task, str) else {k: float(v) for k, v in task.items()}


def is_mixed(spec: dict[str, Any]) -> bool:
    return not isinstance(spec["task"], str)


def _task_config(spec_config: dict | None, task: str, mixed: bool) -> dict[str, Any]:
    config = spec_config or {}
    return dict(config.get(task) or {}) if mixed else dict(config)


def tier_configs(spec: dict[str, Any]) -> list[tuple[Any, dict[str, dict[str, Any]]]]:
    """[(tier label or None, {task: its configuration fields})] of a split: the dataset's config, the split's
    over it, a tier's (curriculum level or named configuration) over both."""
    mixed = is_mixed(spec)
    tasks = list(weights_of(spec))
    base = {t: {**_task_config(spec.get("dataset_config"), t, mixed), **_task_config(spec.get("config"), t, mixed)}
            for t in tasks}
    tiers = spec.get("tiers")
    if tiers is None:
        return [(None, base)]
    if isinstance(tiers, list):  # curriculum levels: the level's fields, the config's own over them
        return [(level, {t: {**_level_fields(t, level), **base[t]} for t in tasks}) for level in tiers]
    return [(name, {t: {**base[t], **_task_config(over, t, mixed)} for t in tasks}) for name, over in tiers.items()]


def _shares(n: int, weights: list[float]) -> list[int]:
    """n split in proportion to `weights`, largest remainders first (ties to the earlier), summing to n."""
    total = sum(weights)
    exact = [n * w / total for w in weights]
    counts = [int(x) for x in exact]
    for i in sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))[: n - sum(counts)]:
        counts[i] += 1
    return counts


def problem_key(task: str, question: str, meta: dict[str, Any]) -> str:
    """A problem's canonical form (module docstring): its task's CANONICAL_FIELDS of the metadata, else its text."""
    fields = CANONICAL_FIELDS.get(task)
    if fields and all(f in meta for f in fields):
        parts = []
        for f in fields:
            value = meta[f]
            if (task, f) in UNORDERED_FIELDS and isinstance(value, list):
                value = sorted(value)
            if (task, f) in BRACKETLESS_FIELDS and isinstance(value, str):
                value = re.sub(r"[()\[\]]", "", value)
            parts.append(json.dumps(value, sort_keys=True, default=str))
        return f"{task}:" + "|".join(re.sub(r"\s+", "", p) for p in parts)
    return f"{task}:text:" + " ".join(question.split())


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "big")


class _Timeout(Exception):
    pass


def draw(dataset, task: str, idx: int) -> dict[str, Any]:
    """Item `idx` of a task's dataset, or a DataError where its generator takes longer than ITEM_SECONDS (on the
    main thread of a Unix process, where an interval timer can interrupt it; elsewhere it is not timed)."""
    import signal
    import threading

    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return dataset[idx]

    def expire(signum, frame):
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, ITEM_SECONDS)
    try:
        return dataset[idx]
    except _Timeout:
        settings = json.dumps(dataclasses.asdict(dataset.config), default=str)
        raise DataError(f"reasoning-gym's {task} generator did not return an item within {ITEM_SECONDS:g} s at these "
                        f"settings ({settings}); choose others") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def reference(task: str, fields: dict[str, Any], entry: dict[str, Any]) -> str:
    """The row's reference: what the verifier needs of its entry, as JSON (`entry_of` reads it back)."""
    return json.dumps({"task": task, "config": fields, "answer": entry["answer"], "metadata": entry["metadata"]},
                      sort_keys=True)


def _check_stored(dataset, task: str, entry: dict[str, Any], stored: str) -> None:
    """The verifier must judge the stored entry as it judges the generated one: a task whose metadata does not survive
    JSON (tuples or objects a verifier compares by type) would score every answer otherwise, so it is refused."""
    gold = None if entry["answer"] is None else str(entry["answer"])
    if dataset.score_answer(gold, entry) != dataset.score_answer(gold, entry_of(stored)):
        raise DataError(f"reasoning-gym's {task}: its verifier scores the entry stored as JSON otherwise than the one "
                        f"it generated (its metadata holds what JSON does not keep), so hardex cannot score this task")


def entry_of(reference_text: str) -> dict[str, Any]:
    """The entry a row's reference stands for: {"task", "config", "answer", "metadata"} (for a reward hook)."""
    return json.loads(reference_text)


def generate_split(spec: dict[str, Any]) -> pl.DataFrame:
    """The rows of one split (module docstring): `n` distinct problems of its hash bucket, in tiers and tasks.
    Made once per process for a spec (planning checks a split, then may list its ids)."""
    return _generate(json.dumps(spec, sort_keys=True))


@functools.lru_cache(maxsize=32)
def _generate(spec_json: str) -> pl.DataFrame:
    spec = json.loads(spec_json)
    split = spec.get("name")
    if split not in SPLIT_BUCKETS:
        raise DataError(f"reasoning_gym split {split!r}: must be one of {', '.join(SPLIT_BUCKETS)}")
    lo, hi = SPLIT_BUCKETS[split]
    n, seed = int(spec["n"]), int(spec["seed"])
    weights = weights_of(spec)
    tiers = tier_configs(spec)
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for (tier, configs), tier_n in zip(tiers, _shares(n, [1.0] * len(tiers))):
        for task, count in zip(weights, _shares(tier_n, list(weights.values()))):
            fields = configs[task]
            tries = TRIES_PER_ROW * count + TRIES_SLACK
            dataset = _dataset(task, json.dumps(fields, sort_keys=True), _seed(split, seed, task, tier), tries)
            got = 0
            for idx in range(tries):
                if got == count:
                    break
                entry = draw(dataset, task, idx)
                key = problem_key(task, entry["question"], entry["metadata"])
                if key in seen or not lo <= split_bucket(key) < hi:
                    continue
                seen.add(key)
                got += 1
                stored = reference(task, fields, entry)
                _check_stored(dataset, task, entry, stored)
                # a level stays a number (2 before 10, as the synthetic families' tiers); a mixed pool's is its task
                label = (task if tier is None else f"{task}/{tier}") if is_mixed(spec) else tier
                rows.append({"id": f"rg-{split}-{seed}-{len(rows)}", "question": entry["question"],
                             "answer": stored, "gold": None if entry["answer"] is None
                             else str(entry["answer"]), "rg_task": task,
                             "tier": label, "problem": key})
            if got < count:
                where = f"{task}" + (f" at tier {tier}" if tier is not None else "")
                raise DataError(f"reasoning_gym/{split}: only {got} distinct problems of {where} fall in this split "
                                f"in {tries} draws, {count} asked; ask for fewer (n={n}) or widen the settings")
    df = pl.DataFrame(rows)
    if spec.get("tiers") is None and not is_mixed(spec):
        df = df.drop("tier")
    return check_split(df, f"reasoning_gym/{split}")


def _scorer(task: str, fields_json: str):
    return _dataset(task, fields_json, 0, 1).score_answer


class ReasoningGymTask(Task):
    """Any reasoning-gym task (module docstring): its verifier's score is the reward, a score of 1 a pass."""

    name = "reasoning_gym"
    answer_kind = "text"

    @property
    def scorer_version(self) -> str | None:
        """reasoning-gym's version: its verifiers decide every score (hardex.job.work_identity keys by it)."""
        return version()

    def load_split(self, spec: dict[str, Any], root: Path | None = None) -> pl.DataFrame:
        return generate_split(spec)  # generated rows have no columns to rename: planning refuses `fields`

    def unboxed_answer(self, completion: str, reference: str) -> str | None:
        """Flexible scoring reads an unboxed completion's last number where the task's own answer is a number."""
        gold = entry_of(reference)["answer"]
        return last_number(completion) if gold is not None and is_plain_number(str(gold)) else None

    def score(self, completion: str, reference: str, prompt: str | None = None) -> float:
        """The task's verifier on the completion's answer (None where there is none), in [0, 1]."""
        return _verdict(self.answer(completion, reference, prompt), entry_of(reference))

    def is_correct(self, completion: str, reference: str, prompt: str | None = None) -> bool:
        return self.score(completion, reference, prompt) >= PASS_SCORE

    def is_equivalent(self, predicted: str, reference: str) -> bool:
        return _verdict(predicted, entry_of(reference)) >= PASS_SCORE


def _verdict(predicted: str | None, entry: dict[str, Any]) -> float:
    """An entry's verifier (built with the configuration the entry was generated with) on an answer, clipped to
    [0, 1]; a verifier that fails on a malformed answer, or returns NaN, scores it 0, as any family's scorer does."""
    try:
        value = float(_scorer(entry["task"], json.dumps(entry["config"], sort_keys=True))(predicted, entry))
    except Exception:
        return 0.0
    return min(1.0, max(0.0, value)) if value == value else 0.0


def check_split_spec(key: str, spec: dict[str, Any]) -> str | None:
    """What planning refuses of one reasoning_gym split's spec (hardex.config), as `key: reason`, or None: the
    package missing, an unknown task or weight, a config field the task lacks or of the wrong type, a tier level
    beyond the curriculum."""
    if version() is None:
        return f"{key}: family reasoning_gym needs the reasoning-gym package, which is not installed: {INSTALL}"
    dkey = key.rsplit(".splits.", 1)[0]
    weights = weights_of(spec)
    for task, weight in weights.items():
        if error := unknown_task_error(task):
            return f"{dkey}.task: {error}"
        if weight <= 0:
            return f"{dkey}.task.{task}: weight {weight:g} must be positive"
    mixed = is_mixed(spec)
    for where, config in ((f"{dkey}.config", spec.get("dataset_config")), (f"{key}.config", spec.get("config"))):
        if config is None:
            continue
        if not isinstance(config, dict):
            return f"{where}: {config!r} must be a mapping of the task's fields"
        if mixed and (stray := [t for t in config if t not in weights]):
            return (f"{where}: in a mixed pool config is keyed by task; {stray[0]!r} is not one of its tasks "
                    f"({', '.join(weights)})")
    tiers = spec.get("tiers")
    if isinstance(tiers, list):
        for task in weights:
            levels = curriculum_levels(task)
            if levels is None:
                return f"{key}.tiers: {task} has no curriculum; name each tier's settings instead ({{easy: {{...}}}})"
            if bad := [lv for lv in tiers if lv >= levels]:
                return f"{key}.tiers: level {bad[0]} is beyond {task}'s curriculum (levels 0-{levels - 1})"
    try:
        configs = tier_configs(spec)
    except (KeyError, ValueError, TypeError) as e:
        return f"{key}: {e}"
    for tier, per_task in configs:
        for task, fields in per_task.items():
            if error := config_error(task, fields):
                field, reason = error
                if tier is not None and not isinstance(tiers, list):
                    where = f"{key}.tiers.{tier}"
                else:
                    where = f"{key}.config" if spec.get("config") else f"{dkey}.config"
                where += f".{task}" if mixed else ""
                level = f" (at curriculum level {tier})" if isinstance(tiers, list) else ""
                return f"{where}{'.' + field if field else ''}: {reason}{level}"
    return None


def generation_seconds(spec: dict[str, Any], sample: int = 3) -> float:
    """About how long generating a split takes: a few draws of each task timed, times the draws a split's bucket
    needs (for planning, which generates a split only where that is quick)."""
    import time

    lo, hi = SPLIT_BUCKETS.get(spec.get("name"), (0.0, 0.1))
    tiers = tier_configs(spec)
    per_item = 0.0
    for _, per_task in tiers:
        for task, fields in per_task.items():
            dataset = _dataset(task, json.dumps(fields, sort_keys=True), _seed("timing", task), sample)
            start = time.perf_counter()
            for i in range(sample):
                draw(dataset, task, i)
            per_item += (time.perf_counter() - start) / sample / len(per_task) / len(tiers)
    return per_item * int(spec["n"]) / (hi - lo)


def planning_error(datasets: dict[str, Any], tasks: dict[str, Any], spec_of) -> str | None:
    """What planning refuses of a config's reasoning_gym datasets (hardex.config), one line naming the key, or None:
    keys of this family on another, a split's missing n or seed, what `check_split_spec` refuses, a split that cannot
    hold n problems or whose generator hangs (each split made as its job will make it, where that takes at most
    PLAN_GENERATION_SECONDS), and a benchmark sharing problems with its task's pool beyond allow_overlap. `spec_of`
    gives a split's loader spec ("dataset/split": hardex.settings.split_spec's)."""
    made: dict[str, pl.DataFrame] = {}
    for ds, dcfg in datasets.items():
        if dcfg["family"] != "reasoning_gym":
            if stray := [k for k in ("task", "config") if k in dcfg]:
                return f"datasets.{ds}.{stray[0]}: only for family reasoning_gym (here: {dcfg['family']!r})"
            continue
        if "task" not in dcfg:
            return (f"datasets.{ds}.task: required for family reasoning_gym (a reasoning-gym task name, or "
                    f"{{name: weight}} for a mixed pool)")
        for split, raw in dcfg["splits"].items():
            key = f"datasets.{ds}.splits.{split}"
            if missing := [need for need in ("n", "seed") if need not in raw]:
                return f"{key}.{missing[0]}: required for family reasoning_gym"
            if split not in SPLIT_BUCKETS:
                return f"{key}: generated splits are {', '.join(SPLIT_BUCKETS)}, not {split!r}"
            if stray := [k for k in ("hub", "file", "difficulty") if k in raw]:
                return f"{key}.{stray[0]}: reasoning_gym splits are generated; they take n, seed, config and tiers"
            spec = spec_of(f"{ds}/{split}")
            if error := check_split_spec(key, spec):
                return error
            try:  # too few distinct problems, or a generator that hangs at these settings
                if generation_seconds(spec) <= PLAN_GENERATION_SECONDS:
                    made[f"{ds}/{split}"] = generate_split(spec)
            except DataError as e:
                return f"{key}: {e}"
    for task, tcfg in tasks.items():
        if tcfg["pool"] not in made:
            continue
        pool = set(made[tcfg["pool"]]["problem"])
        for i, ref in enumerate(tcfg["benchmarks"]):
            if ref == tcfg["pool"] or ref not in made:
                continue
            shared = [q for q, k in zip(made[ref]["question"], made[ref]["problem"]) if k in pool]
            if len(shared) > (tcfg.get("allow_overlap") or 0):
                return (f"tasks.{task}.benchmarks[{i}]: {len(shared)} of {ref}'s problems are in the pool "
                        f"{tcfg['pool']} (e.g. {shared[0][:80]!r}); give the two splits disjoint names (pool, test, "
                        f"ood) in one dataset, or state the overlap: tasks.{task}.allow_overlap")
    return None
