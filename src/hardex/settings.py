"""The settings views the rules read: what each rule's params carry, derived from the checked config.

Each view is a function of the config as `hardex.config.check_config` leaves it (defaults filled, keys
sorted) and a model, task, run or split: the grpo section with a model's overrides (`grpo_settings`), one
run's (`run_grpo_settings`), the probe section with a task's (`probe_settings`), a benchmark's decoding
(`decodings`), a select job's strategy settings (`select_settings`), a split's loader spec and, where planning
can tell, its size. A key that changes no result is left out of a view, so that Snakemake's params trigger
reruns what an edit touches and nothing else. Also the notice at planning of a probe that samples otherwise than
GRPO (`sampling_notices`). Validation reads these views in its cross-checks; nothing here validates.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

from hardex import layout
from hardex.controls import REGISTRY as CONTROL_REGISTRY
from hardex.io import file_sha256
from hardex.learnability import sampling_mismatch
from hardex.reward_hook import hook_settings
from hardex.selection import BOUNDARY_STRATEGIES, RunName, settings_read, tier_values
from hardex.sequential import design_of
from hardex.tasks import get_task
from hardex.tasks.reasoning_gym import version as rg_version
from hardex.tasks.rows import DataError, read_local

SYNTHETIC_FAMILIES = ("arith", "swaps", "addition")  # hardex's own generators (n, seed, difficulty)
#: families whose splits are generated here, nothing read or downloaded: a split's size is the config's n
GENERATED_FAMILIES = (*SYNTHETIC_FAMILIES, "reasoning_gym")
def _merge(base: dict, override: dict | None) -> dict:
    out = copy.deepcopy(base)
    for k, v in (override or {}).items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def probe_settings(cfg: dict, task: str) -> dict:
    """The probe section with the task's overrides applied.

    Adaptive probing settles examples against the selection boundaries, so only then does the
    selection budget change probe results (and reach the probe rule, as adaptive.budget).
    """
    settings = _merge(cfg["probe"], cfg["tasks"][task].get("probe"))
    adaptive = settings.get("adaptive") or {}
    if adaptive.get("enabled"):
        if adaptive.get("budget") is None:
            adaptive["budget"] = cfg["selection"]["budget"]
        if adaptive.get("strategies") is None:
            adaptive["strategies"] = boundary_strategies(cfg)
    if prompt := task_prompt(cfg, task):
        settings["prompt"] = prompt
    return settings


def task_prompt(cfg: dict, task: str) -> dict:
    """How a task asks, as its probe, train and evaluate jobs get it (hardex.tasks.get_task's `prompt`): its
    `prompt_template` and `system_prompt` where the config sets them; {} for today's prompt, and then no
    rule's params hold the key, so that results made before these keys existed stay up to date."""
    return {k: cfg["tasks"][task][k] for k in ("prompt_template", "system_prompt") if k in cfg["tasks"][task]}


def boundary_strategies(cfg: dict) -> list[str]:
    """The selected strategies whose subset ends at a pass-rate boundary (adaptive probing settles those)."""
    return [s for s in BOUNDARY_STRATEGIES if s in cfg["selection"]["strategies"]]


def generation_settings(cfg: dict, model: str) -> dict:
    """The generation section as a model's probe and evaluate jobs run it: its own `token_budget` in place of
    the shared one where it sets one (a large model's batch must be smaller: hardex.memory_plan)."""
    own = cfg["models"][model].get("token_budget")
    gen = cfg["generation"] if own is None else {**cfg["generation"], "token_budget": own}
    # the default decode path left out: the jobs' params stay what they were before the key existed (no reruns)
    return {k: v for k, v in gen.items() if not (k == "decode" and v == "auto")}


def grpo_settings(cfg: dict, model: str) -> dict:
    """The grpo section with the model's overrides applied; with vLLM rollouts, also the engine's
    settings (`generation.vllm`), which decide the samples as the other settings do."""
    grpo = _merge(cfg["grpo"], cfg["models"][model].get("grpo"))
    if grpo["rollouts"] in ("vllm", "vllm-server"):
        grpo["vllm"] = cfg["generation"]["vllm"]
    elif cfg["generation"].get("decode", "auto") != "auto":  # hardex's rollouts decode as probing does
        grpo["decode"] = cfg["generation"]["decode"]
    return grpo


def run_grpo_settings(cfg: dict, model: str, run_strategy: str, task: str | None = None) -> dict:
    """One run's grpo settings: the model's, with `online_filtering` for a <strategy>_online run (the key
    is absent otherwise, so that other runs keep the settings, and checkpoints, they had before it). With
    its `task`, also the task's `prompt` and `reward_hook` (the hook's spec and a hash of its file,
    hardex.reward_hook.hook_settings; a control that never calls it, format's, left without:
    `Control.calls_true_reward`) where set."""
    run = RunName.parse(run_strategy)
    grpo = grpo_settings(cfg, model)
    if run.online:
        grpo["online_filtering"] = True
    if task is not None:
        if prompt := task_prompt(cfg, task):
            grpo["prompt"] = prompt
        calls_hook = run.control is None or CONTROL_REGISTRY[run.control].calls_true_reward
        if "reward" in cfg["tasks"][task] and calls_hook:
            grpo["reward_hook"] = hook_settings(cfg["tasks"][task]["reward"])
    return grpo


def select_settings(cfg: dict, model: str, task: str, strategy: str) -> dict:
    """The settings a select job's params carry beyond the budget and the seed: `tiers` (its tier's values on the
    task), `band` (selection.band) and `group_size` (the model's grpo.num_generations), each None unless the strategy
    reads it (selection.settings_read), so editing one reruns only the strategies that read it."""
    values = {
        "tiers": lambda: tier_values(cfg["selection"]["tiers"], strategy, task),
        "band": lambda: cfg["selection"]["band"],
        "group_size": lambda: grpo_settings(cfg, model)["num_generations"],
    }
    reads = settings_read(strategy)
    return {name: value() if name in reads else None for name, value in values.items()}


def seed_design(cfg: dict):
    """The sequential design of `seeds: {first, batch, max}` (hardex.sequential.Design), None for a list."""
    seeds = cfg["seeds"]
    return design_of({k: v for k, v in seeds.items() if k != "deciding"} if isinstance(seeds, dict) else seeds)


def model_settings(cfg: dict, model: str) -> dict:
    """What identifies a model to its jobs: where from_pretrained finds it (the folder the workflow makes of it,
    layout.MODEL, else its config path: a hub id or a directory), its chat and its dtype."""
    m = cfg["models"][model]
    path = layout.fill(layout.MODEL, model=model) if m["path"] in layout.MADE_BY else m["path"]
    return {"path": path, "chat": m["chat"], "dtype": m["dtype"]}


def unlearnable_allowed(cfg: dict, run_strategy: str) -> bool:
    """Whether a run may train on a subset without a learnable example: it is listed in
    selection.allow_unlearnable, or it is a control of a strategy listed there (the same subset)."""
    allowed, run = cfg["selection"]["allow_unlearnable"], RunName.parse(run_strategy)
    return run_strategy in allowed or (run.control is not None and run.strategy in allowed)


def trained_run_dirs(cfg: dict, run_strategies: list[str], seeds: list[int],
                     root: Path = Path("results/train")) -> dict[Path, dict]:
    """The run folders already under `root` (results/train/<model>/<task>/<strategy>/seed<N>) that this config
    plans to train, each with its grpo settings (`run_grpo_settings`): what a train job would resume or delete."""
    runs = {}
    for model in cfg["models"]:
        for task in model_tasks(cfg, model):
            for strategy in run_strategies:
                for seed in seeds:
                    if (folder := root / model / task / strategy / f"seed{seed}").is_dir():
                        runs[folder] = run_grpo_settings(cfg, model, strategy, task)
    return runs


def warmstart_files(cfg: dict, model: str) -> dict[str, list[str]]:
    """A built model's warm-start data files (sft) and every other split of their datasets (held_out), which the
    build job proves disjoint from them."""
    sft = cfg["models"][model]["build"]["sft_from"]
    datasets = sorted({ref.split("/", 1)[0] for ref in sft})
    held_out = [f"{d}/{s}" for d in datasets for s in cfg["datasets"][d]["splits"] if f"{d}/{s}" not in sft]
    return {"sft": [layout.data_file(r) for r in sft], "held_out": [layout.data_file(r) for r in held_out]}


def model_tasks(cfg: dict, model: str) -> list[str]:
    """The tasks a model runs: its `tasks`, or every task."""
    return list(cfg["models"][model].get("tasks") or cfg["tasks"])


def seed_list(cfg: dict) -> list[int]:
    """Every seed a run may train with: the list, or a sequential design's 0 .. max - 1."""
    design = seed_design(cfg)
    return list(range(design.max)) if design else list(cfg["seeds"])


def run_strategies(cfg: dict) -> list[str]:
    """Every run's strategy: the selection's, <strategy>_online for its online strategies, and
    <strategy>_<control> for its controls (`selection.controls`)."""
    sel = cfg["selection"]
    online = [RunName(s, online=True) for s in sel["online_strategies"]]
    controls = [RunName(s, control=control)
                for control, strategies in (sel.get("controls") or {}).items() for s in strategies]
    return list(sel["strategies"]) + [str(run) for run in online + controls]


def decodings(cfg: dict) -> dict[str, dict]:
    """Decoding per benchmark ref used by any task (the default with the benchmark's overrides)."""
    refs = {b for t in cfg["tasks"].values() for b in t["benchmarks"]}
    ev = cfg["evaluation"]
    return {r: _merge(ev["decoding"], ev["overrides"].get(r)) for r in sorted(refs)}


def benchmark_settings(cfg: dict, task: str, base: bool = False) -> list[dict]:
    """What an evaluate job's params carry of each benchmark of the task: its ref, family and decoding (with
    `greedy` under evaluation.greedy: a greedy sample beside the sampled ones), the task's prompt where set
    (task_prompt) and the version of a verifier package that scores the family (reasoning-gym), so that an
    upgrade evaluates again; each key absent where unset, so that older results keep their params. `base`: the
    base model's, evaluation.base_pass_k samples on the task's first benchmark (its pass@k at large k)."""
    decoding, prompt, ev = decodings(cfg), task_prompt(cfg, task), cfg["evaluation"]
    benchmarks = []
    for ref in cfg["tasks"][task]["benchmarks"]:
        family = split_spec(cfg, ref)["family"]
        version = get_task(family).scorer_version
        benchmarks.append({"ref": ref, "family": family,
                           "decoding": decoding[ref] | ({"greedy": True} if ev["greedy"] else {})}
                          | ({"prompt": prompt} if prompt else {})
                          | ({"scorer_version": version} if version else {}))
    if base and ev["base_pass_k"] is not None:
        benchmarks[0]["decoding"] = {**benchmarks[0]["decoding"], "n_samples": ev["base_pass_k"]}
    return benchmarks


def imported_rates(cfg: dict) -> dict[str, str]:
    """{task: its pass-rate file} of the tasks whose pass rates are imported (`tasks.<task>.probe.from`)."""
    return {t: tc["probe"]["from"] for t, tc in cfg["tasks"].items() if (tc.get("probe") or {}).get("from")}


# keys of a split read from a file that keep every row of it (others filter: levels, subjects, parts...)
_WHOLE_FILE_KEYS = {"file", "fields", "limit", "name", "split", "rows", "ids", "start", "stop"}


def known_split_size(cfg: dict, ref: str) -> int | None:
    """Rows of a split when planning can tell without a job: a generated split, a list of rows or ids, or a
    local file read whole (its rows counted, no model loaded)."""
    ds, split = ref.split("/", 1)
    spec = cfg["datasets"][ds]["splits"][split]
    n = spec.get("n") if cfg["datasets"][ds]["family"] in GENERATED_FAMILIES else None
    if n is None and spec.get("file") and set(spec) <= _WHOLE_FILE_KEYS:
        read = peek_local_file(spec["file"])
        if read:  # a slice of the file's rows
            n = len(range(read[0])[spec.get("start", 0):spec.get("stop")])
    for listed in (spec.get("rows"), spec.get("ids")):
        n = len(listed) if listed is not None else n
    if n is not None and spec.get("limit"):
        n = min(n, spec["limit"])
    return n


def peek_local_file(path: str) -> tuple[int, list[str]] | None:
    """(rows, the first row's columns) of a local data file, read once per planning; None where it is not there
    yet or not readable (its job says why)."""
    p = Path(path).expanduser()
    if not p.is_file():
        return None
    return _read_local_file(str(p.resolve()), p.stat().st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _read_local_file(path: str, mtime_ns: int) -> tuple[int, list[str]] | None:
    try:
        if path.endswith(".parquet"):
            import polars as pl

            return pl.scan_parquet(path).select(pl.len()).collect().item(), list(pl.read_parquet_schema(path))
        rows = read_local(path)
    except (DataError, OSError, ValueError):
        return None
    return len(rows), list(rows[0]) if rows and isinstance(rows[0], dict) else []


def split_spec(cfg: dict, ref: str) -> dict:
    """Loader spec of one dataset split, with the family and split name the loader needs."""
    ds, split = ref.split("/", 1)
    dcfg = cfg["datasets"][ds]
    spec = {"name": split, **dcfg["splits"][split]}  # "split" in a hub spec is the hub split
    if dcfg["family"] == "reasoning_gym":
        # the dataset's task and config travel with each split, and the package's version with them: an upgrade
        # makes the splits again, and what they feed after them
        spec.update(task=dcfg["task"], rg_version=rg_version())
        if dcfg.get("config") is not None:
            spec["dataset_config"] = dcfg["config"]
    return {"family": dcfg["family"], "spec": spec}


def split_source(cfg: dict, ref: str) -> dict:
    """What the data job makes split `ref` from: its `split_spec`, and the sha256 of each local file it reads (its
    `file`, and `rows` or `ids` given as a file) where it reads any. The job's params carry it and no file is its
    input: a changed file makes the split again, while a copy of the same bytes, newer or elsewhere, reruns
    nothing. A split that reads no local file has no digest key, so its params stay as they were before files were
    compared (an archived study's splits are not made again). A file not there is left out (its job says so)."""
    source = split_spec(cfg, ref)
    ds, split = ref.split("/", 1)
    if digests := {p: file_sha256(p) for p in split_files(cfg["datasets"][ds]["splits"][split])}:
        source["file_sha256"] = digests
    return source


def split_files(spec: dict) -> list[str]:
    """The local files a split spec reads that are there: its `file`, and `rows` or `ids` given as a file."""
    paths = [spec.get(key) for key in ("file", "rows", "ids")]
    return [p for p in paths if isinstance(p, str) and Path(p).is_file()]


def sampling_notices(cfg: dict) -> list[str]:
    """One line per model x task whose probe samples otherwise than that model's GRPO (temperature, top_p,
    max length; `hardex.learnability.sampling_mismatch`): a notice at planning time, never an error."""
    imported = imported_rates(cfg)
    # imported pass rates were sampled as their file's run did, which hardex does not know
    lines = [f"{task}: pass rates imported from {path} (tasks.{task}.probe.from): how they were sampled is not known "
             f"here; they describe GRPO's groups only if that run sampled as GRPO does"
             for task, path in imported.items()]
    for model in cfg["models"]:
        for task in cfg["tasks"]:
            if task in imported:
                continue
            line = sampling_mismatch(probe_settings(cfg, task), grpo_settings(cfg, model))
            if line:
                lines.append(f"{model}/{task}: {line.removeprefix('WARNING: ')}")
    return lines
